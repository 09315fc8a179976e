package ingest

import (
	"bytes"
	"io"
	"runtime"
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
	defer w.Abort()
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

// TestRowWriterAbort: copies under way stop and their goroutines end at
// Abort, and the output cannot be closed after it; a damaged row group's
// copy fails the Write after it or Close, never silently.
func TestRowWriterAbort(t *testing.T) {
	in := openFixture(t, "types.parquet")
	before := runtime.NumGoroutine()
	w := NewRowWriter(io.Discard, RowsAsRead)
	if err := w.Schema(in); err != nil {
		t.Fatal(err)
	}
	for g, rows := range [][]int64{{1, 5, 9}, {2049, 2050}} {
		if err := w.Write(in, g, rows); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	if n := goroutinesAfter(before); n > before {
		t.Fatalf("%d goroutines after Abort, %d before", n, before)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after Abort succeeded")
	}
	// Rows past the group's end: the copy's error comes back.
	w = NewRowWriter(io.Discard, RowsAsRead)
	defer w.Abort()
	err := w.Write(in, 0, []int64{1, 3000})
	if err == nil {
		err = w.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "not ahead in row group 0") {
		t.Fatalf("rows past the group: %v", err)
	}
}
