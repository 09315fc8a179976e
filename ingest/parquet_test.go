package ingest

import (
	"bufio"
	"compress/gzip"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// openFixture opens testdata/parquet/NAME, written by DuckDB
// (testdata/parquet/gen.mjs).
func openFixture(t testing.TB, name string) *ParquetFile {
	t.Helper()
	path := filepath.Join("..", "testdata", "parquet", name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenParquet(name, f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// keysOf reads every row group's keys of columns items, joined by ":";
// a bad row is "BAD " and its error.
func keysOf(t *testing.T, p *ParquetFile, items ...string) []string {
	t.Helper()
	cols, err := p.ResolveKey(items)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for g := range p.RowGroups() {
		err := p.Keys(g, cols, []byte(":"), func(row int64, key []byte, bad error) error {
			if int64(len(out))+1 != row {
				t.Fatalf("row %d after %d rows", row, len(out))
			}
			if bad != nil {
				out = append(out, "BAD "+bad.Error())
			} else {
				out = append(out, string(key))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestParquetKeyText: the key text of every type DuckDB writes, column by
// column, against the golden DuckDB computed from DESIGN's rules
// (types.golden.tsv.gz: hex for strings and blobs, floats with 17 digits,
// formatted here as Go's shortest round-trip text).
func TestParquetKeyText(t *testing.T) {
	p := openFixture(t, "types.parquet")
	if p.RowGroups() != 3 || p.Rows() != 4200 {
		t.Fatalf("%d row groups, %d rows", p.RowGroups(), p.Rows())
	}
	gf, err := os.Open(filepath.Join("..", "testdata", "parquet", "types.golden.tsv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	gz, err := gzip.NewReader(gf)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(gz)
	sc.Scan()
	names := strings.Split(sc.Text(), "\t")
	var rows [][]string
	for sc.Scan() {
		rows = append(rows, strings.Split(sc.Text(), "\t"))
	}
	if len(rows) != 4200 {
		t.Fatalf("golden: %d rows", len(rows))
	}
	for c, name := range names {
		got := keysOf(t, p, name)
		for r, want := range rows {
			w := want[c]
			switch name {
			case "s", "bl", "st.b":
				b, err := hex.DecodeString(w)
				if err != nil {
					t.Fatal(err)
				}
				w = string(b)
			case "f", "d":
				bits := 64
				if name == "f" {
					bits = 32
				}
				v, err := strconv.ParseFloat(w, 64)
				if err != nil {
					t.Fatal(err)
				}
				w = strconv.FormatFloat(v, 'g', -1, bits)
			case "n":
				if w == `\N` {
					w = "BAD types.parquet: row group " + strconv.Itoa(r/2048) + ", row " + strconv.Itoa(r+1) + ": column n is null"
				}
			}
			if got[r] != w {
				t.Fatalf("column %s, row %d: key %q, DuckDB says %q", name, r+1, got[r], w)
			}
		}
	}
	// Several columns, by path and by leaf number, joined by the separator.
	got := keysOf(t, p, "i64", "st.b", "15")
	if got[1] != "-298999999993:n1:1700000001000003" {
		t.Fatalf("a key of three columns: %q", got[1])
	}
}

// TestParquetKeyColumns: what cannot be a key column is refused, naming
// the file and column.
func TestParquetKeyColumns(t *testing.T) {
	p := openFixture(t, "types.parquet")
	for _, c := range []struct {
		items []string
		want  string
		is    error
	}{
		{nil, "a Parquet row has no bytes of its own", nil},
		{[]string{"l.list.element"}, "types.parquet: column l.list.element: unsupported in a Parquet key: a repeated column", ErrParquetUnsupported},
		{[]string{"st"}, `key "st": no such leaf column in the file, whose leaf columns are id, i8,`, nil},
		{[]string{"nope"}, `no such leaf column`, nil},
		{[]string{"0"}, "columns are numbered from 1", nil},
		{[]string{"23"}, "the file has only 22 leaf columns", nil},
		{[]string{""}, "an empty item", nil},
	} {
		_, err := p.ResolveKey(c.items)
		if err == nil || !strings.Contains(err.Error(), c.want) || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%q: %v, want %q", c.items, err, c.want)
		}
	}
}

// TestNotParquet: a file without PAR1 at both ends, or too short.
func TestNotParquet(t *testing.T) {
	for _, b := range []string{"", "PAR1", "PAR1xxxxxxxxPAR0", "hello world, not parquet"} {
		_, err := OpenParquet("x", strings.NewReader(b), int64(len(b)))
		if !errors.Is(err, ErrNotParquet) {
			t.Errorf("%q: %v", b, err)
		}
	}
}
