package ingest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pformat "github.com/parquet-go/parquet-go/format"

	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

// TestParquetBrotli: BROTLI, which DuckDB, Arrow and Polars read and
// write, was refused as "unsupported in a Parquet key" even for a column
// that is no key. DuckDB's file of every type in BROTLI (the rows of
// types.parquet, whose golden TestParquetKeyText checks both against) is
// copied whole as dedup copies it: the copy is BROTLI too, and reads back
// to the input's key text in every column.
func TestParquetBrotli(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", "types-brotli.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := copyParquetTo(&out, in, 64<<20); err != nil {
		t.Fatal(err)
	}
	p := openFixture(t, "types-brotli.parquet")
	q, err := OpenParquet("out.parquet", bytes.NewReader(out.Bytes()), int64(out.Len()), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if c := q.file.Metadata().RowGroups[0].Columns[0].MetaData.Codec; c != pformat.Brotli {
		t.Fatalf("the copy's codec is %s", c)
	}
	keyed := 0
	for _, c := range p.Columns() {
		if _, err := p.ResolveKey([]string{c.Path}); err != nil {
			continue
		}
		a, b := keysOf(t, p, c.Path), keysOf(t, q, c.Path)
		for i := range b {
			b[i] = strings.Replace(b[i], "out.parquet", "types-brotli.parquet", 1) // a NULL's error names its file
		}
		if !slices.Equal(a, b) {
			t.Fatalf("column %s: the copy keys otherwise", c.Path)
		}
		keyed++
	}
	if keyed < 20 {
		t.Fatalf("%d columns keyed", keyed)
	}
}

// TestParquetCodecRefused: a codec the library does not read (LZO, the
// Hadoop-framed LZ4) is refused in a column that is no key as in one that
// is, as not readable, naming the codecs read; not as a key's problem.
func TestParquetCodecRefused(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", "types.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, codec := range []pformat.CompressionCodec{pformat.LZO, pformat.Lz4} {
		md, err := pqcraft.Footer(in)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := pqcraft.Leaf(md, "d")
		for g := range md.RowGroups {
			md.RowGroups[g].Columns[c].MetaData.Codec = codec
		}
		b, err := pqcraft.WithFooter(in, md)
		if err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{"copy": copyParquet(b, 64<<20), "key pass": columnKeys(b, "d", 64<<20)} {
			var pe *ParquetError
			if !errors.As(err, &pe) || !errors.Is(err, ErrParquetUnreadable) || pe.Column != "d" ||
				!strings.Contains(err.Error(), "the "+codec.String()+" codec (fpdedup reads UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4_RAW and BROTLI)") {
				t.Fatalf("%s, %s: %v", codec, what, err)
			}
		}
		if err := columnKeys(b, "id", 64<<20); err != nil {
			t.Fatalf("%s in column d, the keys of column id: %v", codec, err)
		}
	}
}
