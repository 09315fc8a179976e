package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

// TestWriteParquetShapes writes the two files the README's figures of a
// Parquet input's memory under --mem were measured on, when
// FPDEDUP_PARQUET_SHAPES names a directory (else it is skipped):
//
//	wide.parquet    20,000 nullable INT64 columns x 200 rows, one row group, zstd
//	groups.parquet  100,000 one-row row groups of id (INT64) and s (string), snappy
//
// parquet-go writes at most 32767 row groups a file, so groups.parquet is
// parts of 25,000 joined, their row groups' offsets moved, as Arrow writes
// such a file at once (DuckDB writes 2048 rows a group at least). Then:
//
//	/usr/bin/time -v fpdedup dedup -q --mem 64MiB --key c00000 -o out.parquet DIR/wide.parquet
//	/usr/bin/time -v fpdedup count -q --mem 64MiB --key id DIR/groups.parquet
func TestWriteParquetShapes(t *testing.T) {
	dir := os.Getenv("FPDEDUP_PARQUET_SHAPES")
	if dir == "" {
		t.Skip("FPDEDUP_PARQUET_SHAPES names no directory")
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// wide.parquet
	const cols, rows = 20000, 200
	g := parquet.Group{}
	for c := range cols {
		g[fmt.Sprintf("c%05d", c)] = parquet.Optional(parquet.Int(64))
	}
	var wide bytes.Buffer
	bw := bufio.NewWriter(&wide)
	w := parquet.NewWriter(bw, parquet.NewSchema("wide", g), parquet.Compression(&parquet.Zstd), parquet.PageBufferSize(4096))
	row := make(parquet.Row, cols)
	for r := range rows {
		for c := range cols {
			row[c] = parquet.Int64Value(int64(r*cols+c%7)).Level(0, 1, c)
		}
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	write("wide.parquet", wide.Bytes())
	// groups.parquet
	type ev struct {
		ID int64  `parquet:"id"`
		S  string `parquet:"s"`
	}
	const groups, part = 100_000, 25_000
	data := []byte("PAR1")
	var md *format.FileMetaData
	for done := 0; done < groups; done += part {
		var b bytes.Buffer
		w := parquet.NewGenericWriter[ev](&b, parquet.MaxRowsPerRowGroup(1), parquet.Compression(&parquet.Snappy))
		for i := done; i < done+part; i++ {
			if _, err := w.Write([]ev{{int64(i % 1000), "v" + strconv.Itoa(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		pm, err := pqcraft.Footer(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		footer := int(binary.LittleEndian.Uint32(b.Bytes()[b.Len()-8:]))
		shift := int64(len(data)) - 4
		data = append(data, b.Bytes()[4:b.Len()-8-footer]...)
		for i := range pm.RowGroups {
			rg := &pm.RowGroups[i]
			rg.FileOffset += shift
			rg.Ordinal = 0 // omitted, as DuckDB does: an int16 wraps past 32767
			for j := range rg.Columns {
				c := &rg.Columns[j]
				c.FileOffset += shift
				c.MetaData.DataPageOffset += shift
				if c.MetaData.DictionaryPageOffset > 0 {
					c.MetaData.DictionaryPageOffset += shift
				}
				c.OffsetIndexOffset, c.OffsetIndexLength, c.ColumnIndexOffset, c.ColumnIndexLength = 0, 0, 0, 0
			}
		}
		if md == nil {
			md = pm
			continue
		}
		md.RowGroups = append(md.RowGroups, pm.RowGroups...)
		md.NumRows += pm.NumRows
	}
	data = append(data, 0, 0, 0, 0, 'P', 'A', 'R', '1') // WithFooter replaces an empty footer
	out, err := pqcraft.WithFooter(data, md)
	if err != nil {
		t.Fatal(err)
	}
	write("groups.parquet", out)
}
