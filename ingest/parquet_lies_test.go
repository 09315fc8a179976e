package ingest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

// columnKeys reads the keys of column path, every row group: the key pass of
// build, count or query with --key path.
func columnKeys(b []byte, path string, limit int64) error {
	p, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), limit)
	if err != nil {
		return err
	}
	defer p.Close()
	cols, err := p.ResolveKey([]string{path})
	if err != nil {
		return err
	}
	for g := range p.RowGroups() {
		if err := p.Keys(g, cols, nil, func(int64, []byte, error) error { return nil }); err != nil {
			return err
		}
	}
	return nil
}

// TestParquetPagesLie: real files, DuckDB's and parquet-go's (v1 and v2
// pages), each with one page header or its footer lying as a two-byte
// patch or a crafted footer would: a page of a column that is not a key
// saying one value less than its row group's rows (a copy wrote a file
// whose columns disagree, with exit 0), a key column's footer saying
// REQUIRED or INT32 where its pages hold levels or INT64 (the key pass
// keyed on the misread bytes), a row group saying a row more than its
// pages hold. The copy of every column (dedup's) and the key pass of the
// column (build's, count's) refuse each alike, as damage naming the
// column and the row group.
func TestParquetPagesLie(t *testing.T) {
	duck, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", "types.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	go1 := goFile(t, 3000, 1, &parquet.Snappy, 1500)
	go2 := goFile(t, 3000, 2, &parquet.Zstd, 1500)
	values := func(path string) func([]byte) ([]byte, error) {
		return func(b []byte) ([]byte, error) { return b, pqcraft.DataPageValues(b, path, 0, -1) }
	}
	required := func(path string) func([]byte) ([]byte, error) {
		return func(b []byte) ([]byte, error) { return pqcraft.Required(b, path) }
	}
	int32s := func(path string) func([]byte) ([]byte, error) {
		return func(b []byte) ([]byte, error) { return pqcraft.Int32(b, path) }
	}
	moreRows := func(b []byte) ([]byte, error) { return pqcraft.RowGroupRows(b, 0, 1) }
	for _, tc := range []struct {
		name string
		file []byte
		lie  func([]byte) ([]byte, error)
		col  string // the column the error names
		key  bool   // the column can be a key: its key pass refuses it too
		// every row group lies (a footer's type or repetition): a copy
		// has two row groups in flight, either may be named
		every bool
	}{
		{"duckdb, a DOUBLE page one value short", duck, values("d"), "d", true, false},
		{"duckdb, a string page one value short", duck, values("s"), "s", true, false},
		{"duckdb, a nullable page one value short", duck, values("n"), "n", true, false},
		{"duckdb, a list's page one value short", duck, values("l.list.element"), "l.list.element", false, false},
		{"duckdb, a struct member's page one value short", duck, values("st.b"), "st.b", true, false},
		{"duckdb, a nullable INT64 said REQUIRED", duck, required("n"), "n", true, true},
		{"duckdb, a nullable string said REQUIRED", duck, required("s"), "s", true, true},
		{"duckdb, INT64 said INT32", duck, int32s("i64"), "i64", true, true},
		{"duckdb, a row group a row more", duck, moreRows, "id", true, false},
		{"parquet-go v1, a plain string page one value short", go1, values("s"), "s", true, false},
		{"parquet-go v1, a dictionary page one value short", go1, values("sdict"), "sdict", true, false},
		{"parquet-go v1, a delta page one value short", go1, values("i64delta"), "i64delta", true, false},
		{"parquet-go v1, a boolean page one value short", go1, values("b"), "b", true, false},
		{"parquet-go v1, an optional plain INT64 said REQUIRED", go1, required("opti"), "opti", true, true},
		{"parquet-go v1, an optional dictionary INT64 said REQUIRED", go1, required("optid"), "optid", true, true},
		{"parquet-go v1, an optional string said REQUIRED", go1, required("opts"), "opts", true, true},
		{"parquet-go v1, a plain INT64 said INT32", go1, int32s("i64plain"), "i64plain", true, true},
		{"parquet-go v1, a dictionary INT64 said INT32", go1, int32s("i64dict"), "i64dict", true, true},
		{"parquet-go v2, a plain string page one value short", go2, values("s"), "s", true, false},
		{"parquet-go v2, a nullable page one value short", go2, values("optf"), "optf", true, false},
		{"parquet-go v2, an optional INT64 said REQUIRED", go2, required("opti"), "opti", true, true},
		{"parquet-go v2, a dictionary INT64 said INT32", go2, int32s("i64dict"), "i64dict", true, true},
		{"parquet-go v2, a row group a row more", go2, moreRows, "i64", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.lie(bytes.Clone(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			const limit = 64 << 20
			check := func(what string, err error) {
				t.Helper()
				var pe *ParquetError
				switch {
				case err == nil:
					t.Fatalf("%s: no error", what)
				case !errors.As(err, &pe) || !errors.Is(err, ErrParquetDamaged):
					t.Fatalf("%s: not a damaged file: %T %v", what, err, err)
				case pe.Column != tc.col || !strings.Contains(err.Error(), "row group 0") && !tc.every:
					t.Fatalf("%s: %v: not column %s, row group 0", what, err, tc.col)
				}
				t.Logf("%s: %v", what, err)
			}
			check("copy", copyParquet(b, limit))
			if tc.key {
				check("key pass", columnKeys(b, tc.col, limit))
			}
		})
	}
}

// TestParquetFooterRows: a footer whose row groups do not sum to the rows
// it declares (found by FuzzParquet: a copy wrote 0 rows of the 13
// declared, exit 0) is damage, refused when the file opens.
func TestParquetFooterRows(t *testing.T) {
	b := goFile(t, 120, 1, &parquet.Snappy, 400)
	md, err := pqcraft.Footer(b)
	if err != nil {
		t.Fatal(err)
	}
	md.NumRows++
	lie, err := pqcraft.WithFooter(b, md)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenParquet("f.parquet", bytes.NewReader(lie), int64(len(lie)), 64<<20)
	if !errors.Is(err, ErrParquetDamaged) || !strings.Contains(err.Error(), "the footer says 121 rows, its row groups hold 120") {
		t.Fatalf("%v", err)
	}
}
