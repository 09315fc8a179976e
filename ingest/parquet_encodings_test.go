package ingest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pformat "github.com/parquet-go/parquet-go/format"

	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

// TestParquetCopyListedEncodings: the library takes a column's encoding
// for a copy from the first chunk's list of encodings, which may name one
// the column's type cannot be written in: RLE first (for the levels) on an
// INT64 column, a delta or split encoding on a BOOLEAN, an encoding no
// library knows. Every column of the Go library's file of every type,
// listed so, is copied whole as dedup copies it, and the copy keys as the
// input in every key column (found by FuzzParquet: the copy failed with
// "encoding not supported for type INT64", an error that was no
// *ParquetError).
func TestParquetCopyListedEncodings(t *testing.T) {
	in := goFile(t, 120, 1, &parquet.Uncompressed, 400)
	lists := [][]pformat.Encoding{
		{pformat.RLE, pformat.Plain},
		{pformat.BitPacked, pformat.RLE, pformat.Plain},
		{pformat.DeltaBinaryPacked},
		{pformat.DeltaLengthByteArray},
		{pformat.DeltaByteArray},
		{pformat.ByteStreamSplit},
		{pformat.RLEDictionary},
		{99},
	}
	for _, list := range lists {
		t.Run(fmt.Sprint(list), func(t *testing.T) {
			b := listEncodings(t, in, list)
			var out bytes.Buffer
			rows, err := copyParquetTo(&out, b, 64<<20)
			if err != nil {
				t.Fatalf("the copy: %v", err)
			}
			p, err := OpenParquet("in.parquet", bytes.NewReader(b), int64(len(b)), 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			q, err := OpenParquet("in.parquet", bytes.NewReader(out.Bytes()), int64(out.Len()), 64<<20)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if q.Rows() != rows || rows != 120 {
				t.Fatalf("the copy has %d rows of %d", q.Rows(), rows)
			}
			keyed := 0
			for _, c := range p.Columns() {
				if _, err := p.ResolveKey([]string{c.Path}); err != nil {
					continue
				}
				if a, b := keysOf(t, p, c.Path), keysOf(t, q, c.Path); !slices.Equal(a, b) {
					t.Fatalf("column %s: the copy keys otherwise:\n%s\n%s", c.Path, strings.Join(a[:3], " "), strings.Join(b[:3], " "))
				}
				keyed++
			}
			if keyed < 15 {
				t.Fatalf("%d columns keyed", keyed)
			}
		})
	}
}

// TestWritableSchemaKeepsWritable: a file whose columns' encodings can all
// be written is copied with its own schema, its encodings unchanged.
func TestWritableSchemaKeepsWritable(t *testing.T) {
	in := goFile(t, 120, 2, &parquet.Uncompressed, 400)
	f, err := parquet.OpenFile(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	if s := f.Schema(); writableSchema(s) != s {
		t.Fatal("a schema whose encodings are all writable was rebuilt")
	}
}

// listEncodings is b with every column chunk's list of encodings list.
func listEncodings(t testing.TB, b []byte, list []pformat.Encoding) []byte {
	t.Helper()
	md, err := pqcraft.Footer(b)
	if err != nil {
		t.Fatal(err)
	}
	for g := range md.RowGroups {
		for c := range md.RowGroups[g].Columns {
			md.RowGroups[g].Columns[c].MetaData.Encoding = list
		}
	}
	b, err = pqcraft.WithFooter(b, md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
