package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pformat "github.com/parquet-go/parquet-go/format"
)

// wideFile writes rows rows of cols nullable INT64 columns with the Go
// library, groupRows rows a row group.
func wideFile(t testing.TB, cols, rows, groupRows int) []byte {
	t.Helper()
	g := parquet.Group{}
	for c := range cols {
		g[fmt.Sprintf("c%05d", c)] = parquet.Optional(parquet.Int(64))
	}
	var out bytes.Buffer
	w := parquet.NewWriter(&out, parquet.NewSchema("wide", g), parquet.MaxRowsPerRowGroup(int64(groupRows)))
	row := make(parquet.Row, cols)
	for r := range rows {
		for c := range cols {
			row[c] = parquet.Int64Value(int64(r*cols+c)).Level(0, 1, c)
		}
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// emptyChunks is a footer crafted as small as it parses large: one leaf,
// one row group of n column chunks that say nothing (3 bytes each, 560
// parsed).
func emptyChunks(t testing.TB, n int) []byte {
	t.Helper()
	md := pformat.FileMetaData{Version: 1, NumRows: 1, Schema: []pformat.SchemaElement{{Name: "root"}, {Name: "a"}}}
	md.Schema[0].NumChildren.Set(1)
	md.Schema[1].Type.Set(pformat.Int64)
	md.RowGroups = []pformat.RowGroup{{NumRows: 1, Columns: make([]pformat.ColumnChunk, n)}}
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte("PAR1"), enc...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(enc)))
	return append(b, "PAR1"...)
}

// allocated is what fn allocates, and what it leaves held after a
// collection.
func allocated(fn func()) (total, held int64) {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	total = int64(b.TotalAlloc - a.TotalAlloc)
	runtime.GC()
	runtime.ReadMemStats(&b)
	return total, int64(b.HeapAlloc) - int64(a.HeapAlloc)
}

// TestParquetFooterCounted: what a footer's parse will hold is counted
// from the walk of its bytes and refused past the limit before the parse
// (a 67 MB footer was refused only after 730 MB of RSS; a footer of empty
// column chunks parses to 190 times its bytes), naming what it needs; and
// what it names suffices, and bounds what the parse holds.
func TestParquetFooterCounted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  []byte
		limit int64
	}{
		{"3000 one-row row groups", wideFile(t, 2, 3000, 1), 1 << 20},
		{"3000 columns", wideFile(t, 3000, 4, 4), 2 << 20},
		{"200,000 empty column chunks", emptyChunks(t, 200_000), 16 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			footer := int64(binary.LittleEndian.Uint32(tc.file[len(tc.file)-8:]))
			var err error
			total, _ := allocated(func() {
				_, err = OpenParquet("f.parquet", bytes.NewReader(tc.file), int64(len(tc.file)), tc.limit)
			})
			var me *ParquetMemError
			if !errors.As(err, &me) || !errors.Is(err, ErrParquetTooLarge) || me.Need <= tc.limit {
				t.Fatalf("not refused as past the limit: %T %v", err, err)
			}
			t.Logf("%v (%d bytes allocated)", err, total)
			if total > 3*footer+1<<20 {
				t.Fatalf("%d bytes allocated to refuse a footer of %d", total, footer)
			}
			var p *ParquetFile
			_, held := allocated(func() {
				p, err = OpenParquet("f.parquet", bytes.NewReader(tc.file), int64(len(tc.file)), me.Need)
			})
			if tc.name == "200,000 empty column chunks" {
				if !errors.Is(err, ErrParquetDamaged) {
					t.Fatalf("with its need, not refused as damaged: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("with the limit it named: %v", err)
			}
			defer p.Close()
			if held > me.Need {
				t.Fatalf("the parse holds %d bytes, more than the %d counted", held, me.Need)
			}
			t.Logf("the parse holds %d bytes of the %d counted", held, me.Need)
		})
	}
}

// TestParquetCopyCounted: a copy's buffers, ~48 KiB a column whatever its
// rows (20,000 columns of 200 rows took 5.6 GB under --mem 64MiB), are
// counted with the footer and refused up front: by OpenParquetRows from
// the footer's bytes before it is parsed, and by RowWriter.Schema for a
// file opened for its keys, which read within the limit. With the limit it
// names the copy is made.
func TestParquetCopyCounted(t *testing.T) {
	b := wideFile(t, 500, 6, 3)
	const limit = 16 << 20
	keys, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), limit)
	if err != nil {
		t.Fatalf("its keys: %v", err)
	}
	defer keys.Close()
	if err := columnKeys(b, "c00499", limit); err != nil {
		t.Fatalf("its keys: %v", err)
	}
	if err := NewRowWriter(io.Discard, RowsAsRead).Schema(keys); !errors.Is(err, ErrParquetTooLarge) {
		t.Fatalf("a copy of a file opened for its keys: %v", err)
	}
	var me *ParquetMemError
	total, _ := allocated(func() {
		_, err = OpenParquetRows("f.parquet", bytes.NewReader(b), int64(len(b)), limit)
	})
	if !errors.As(err, &me) || me.Need <= limit {
		t.Fatalf("not refused up front: %T %v", err, err)
	}
	t.Logf("%v (%d bytes allocated)", err, total)
	if total > 4<<20 {
		t.Fatalf("%d bytes allocated to refuse it", total)
	}
	if me.Need < 2*500*parquetCopyColumnBytes {
		t.Fatalf("%d bytes named for 500 columns of two row groups in flight", me.Need)
	}
	if _, err := copyParquetTo(io.Discard, b, me.Need); err != nil {
		t.Fatalf("with the limit it named: %v", err)
	}
}

// TestParquetRowGroupStarts: each row group's first row, counted once
// when the file opens (summing the groups before each took 148 s for
// 100,000 of them), is where Frames and a copy number its rows.
func TestParquetRowGroupStarts(t *testing.T) {
	b := wideFile(t, 1, 1000, 7) // 143 groups, the last of 6 rows
	p, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cols, _ := p.ResolveKey([]string{"1"})
	next := int64(1)
	for g := range p.RowGroups() {
		if p.groupStart(g) != next {
			t.Fatalf("row group %d starts at %d, want %d", g, p.groupStart(g), next)
		}
		err := p.Frames(g, cols, 1<<20, func(first int64, n int, data []byte) error {
			if first != next {
				return fmt.Errorf("row group %d: rows from %d, want %d", g, first, next)
			}
			next += int64(n)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if next != 1001 {
		t.Fatalf("%d rows", next-1)
	}
}
