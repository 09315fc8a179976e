package ingest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// copyRows writes the rows of p numbered by keep(row) (1-based) with a
// RowWriter, row group by row group in chunks of chunk rows, as dedup
// does, and returns the file written.
func copyRows(t testing.TB, p *ParquetFile, chunk int64, keep func(row int64) bool) ([]byte, error) {
	return copyRowsAs(p, RowsAsRead, chunk, keep)
}

// copyRowsAs is copyRows writing format.
func copyRowsAs(p *ParquetFile, format RowFormat, chunk int64, keep func(row int64) bool) ([]byte, error) {
	var out bytes.Buffer
	w := NewRowWriter(&out, format)
	if err := w.Schema(p); err != nil {
		return nil, err
	}
	row := int64(1)
	for g := range p.RowGroups() {
		n := p.file.RowGroups()[g].NumRows()
		for end := row + n; row < end; {
			var rows []int64
			for last := min(row+chunk, end); row < last; row++ {
				if keep(row) {
					rows = append(rows, row)
				}
			}
			if err := w.Write(p, g, rows); err != nil {
				return nil, err
			}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// TestParquetWriterCopiesRows: a third of types.parquet's rows (every type
// DuckDB writes, a struct, a list, NULLs, three row groups), copied in
// chunks that do not line up with pages, read back: every column's key
// text of the rows kept, in order, is the input's; the schema and the
// key-value metadata are the input's, one output row group per input row
// group.
func TestParquetWriterCopiesRows(t *testing.T) {
	in := openFixture(t, "types.parquet")
	keep := func(row int64) bool { return row%3 != 1 || row%7 == 0 }
	b, err := copyRows(t, in, 500, keep)
	if err != nil {
		t.Fatal(err)
	}
	out, err := OpenParquet("out.parquet", bytes.NewReader(b), int64(len(b)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := sameSchema(in, out); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(in.Columns(), out.Columns(), func(a, b ParquetColumn) bool { return a.same(&b) }) {
		t.Fatalf("columns %v, want %v", out.Columns(), in.Columns())
	}
	if out.RowGroups() != in.RowGroups() {
		t.Fatalf("%d row groups, want %d", out.RowGroups(), in.RowGroups())
	}
	if got, want := out.file.Metadata().KeyValueMetadata, in.file.Metadata().KeyValueMetadata; len(want) > 0 && len(got) < len(want) {
		t.Fatalf("key-value metadata %v, want %v", got, want)
	}
	checked := 0
	for _, c := range in.Columns() {
		if c.Repeated || c.bad != "" {
			continue
		}
		all := keysOf(t, in, c.Path)
		var want []string
		for i, k := range all {
			if keep(int64(i + 1)) {
				want = append(want, strings.ReplaceAll(k, "BAD types.parquet", "BAD out.parquet"))
			}
		}
		got := keysOf(t, out, c.Path)
		for i := range want {
			// Row numbers of a NULL's message are the output's.
			if strings.HasPrefix(want[i], "BAD ") && strings.HasPrefix(got[i], "BAD ") {
				want[i], got[i] = "BAD", "BAD"
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("column %s: %d rows read back differ from the %d kept", c.Path, len(got), len(want))
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("%d columns checked", checked)
	}
}
