package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
	p, err := OpenParquet(name, f, st.Size(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
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
// formatted here as Go's shortest round-trip text); the same rows written
// with BROTLI (types-brotli.parquet, refused before as "unsupported") key
// the same.
func TestParquetKeyText(t *testing.T) {
	for _, file := range []string{"types.parquet", "types-brotli.parquet"} {
		t.Run(file, func(t *testing.T) { parquetKeyText(t, file) })
	}
}

func parquetKeyText(t *testing.T, file string) {
	p := openFixture(t, file)
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
					w = "BAD " + file + ": row group " + strconv.Itoa(r/2048) + ", row " + strconv.Itoa(r+1) + ": column n is null"
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
		{[]string{"st"}, `key "st": a group, not a leaf column: its leaf columns are st.a (leaf 19), st.b (leaf 20)`, nil},
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

// TestParquetDeltaUint32: DuckDB's v2 pages delta-encode a UINTEGER from
// its unsigned value, which the library cannot decode as INT32: the column
// is refused as unreadable, naming the page and how to write the file,
// not as damage; the file's other column still keys.
func TestParquetDeltaUint32(t *testing.T) {
	p := openFixture(t, "uint32-v2.parquet")
	cols, err := p.ResolveKey([]string{"u32"})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Keys(0, cols, []byte(":"), func(int64, []byte, error) error { return nil })
	want := "uint32-v2.parquet: column u32: not readable by the Parquet library fpdedup uses: row group 0: the page at"
	if !errors.Is(err, ErrParquetUnreadable) || errors.Is(err, ErrParquetDamaged) || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "from 4000000000") || !strings.Contains(err.Error(), "v1 pages") {
		t.Fatalf("u32: %v, want %q", err, want)
	}
	if got := keysOf(t, p, "id"); len(got) != 100 || got[99] != "99" {
		t.Fatalf("id: %d keys, the last %q", len(got), got[len(got)-1])
	}
}

// TestNotParquet: a file without PAR1 at both ends, or too short.
func TestNotParquet(t *testing.T) {
	for _, b := range []string{"", "PAR1", "PARExxxxxxxxPAR1", "hello world, not parquet"} {
		_, err := OpenParquet("x", strings.NewReader(b), int64(len(b)), 1<<20)
		if !errors.Is(err, ErrNotParquet) {
			t.Errorf("%q: %v", b, err)
		}
	}
}

// readParquetKeys opens b and reads the keys of every column that can be a key,
// row group by row group: what the commands do with a file.
func readParquetKeys(b []byte, limit int64) error {
	p, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), limit)
	if err != nil {
		return err
	}
	defer p.Close()
	for _, c := range p.Columns() {
		cols, err := p.ResolveKey([]string{c.Path})
		if err != nil {
			continue
		}
		for g := range p.RowGroups() {
			if err := p.Keys(g, cols, nil, func(int64, []byte, error) error { return nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestParquetDamaged: copies of the fixture with bytes flipped in the
// footer, the first pages' headers and anywhere are read whole. Each gives
// its keys or a *ParquetError, never a panic, another error or a goroutine
// left running, and none makes the reader allocate much past its limit
// (the library allocated what a damaged page header declared, 1.5 GB of
// RSS over such a run, before the walk of every header).
func TestParquetDamaged(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", "types.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	const limit = 4 << 20
	r := rand.New(rand.NewPCG(5, 6))
	goroutines := runtime.NumGoroutine()
	var worst uint64
	outcomes := map[string]int{}
	copies := 1500
	if testing.Short() {
		copies = 200 // the race step: no goroutine of ours to race
	}
	for range copies {
		b := bytes.Clone(orig)
		for range 1 + r.IntN(3) {
			var at int
			switch r.IntN(3) {
			case 0:
				at = len(b) - 8 - r.IntN(4000)
			case 1:
				at = 4 + r.IntN(300)
			default:
				at = r.IntN(len(b))
			}
			b[at] ^= byte(1 + r.IntN(255))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := readParquetKeys(b, limit)
		if err == nil && r.IntN(4) == 0 {
			err = copyParquet(b, limit) // every column decoded
		}
		runtime.ReadMemStats(&after)
		worst = max(worst, after.TotalAlloc-before.TotalAlloc)
		var pe *ParquetError
		switch {
		case err == nil:
			outcomes["read"]++
		case errors.As(err, &pe):
			outcomes[pe.Err.Error()]++
		default:
			t.Fatalf("not a *ParquetError: %T %v", err, err)
		}
	}
	t.Logf("outcomes %v; the most one file allocated: %d MiB", outcomes, worst>>20)
	// The killers allocated gigabytes. Under -race sync.Pool drops a share
	// of what is put back, so the same reads allocate 3-4x (56-65 MiB seen).
	bound := uint64(64 << 20)
	if raceBuild {
		bound = 256 << 20
	}
	if worst > bound {
		t.Fatalf("a damaged file made the reader allocate %d MiB under a limit of %d MiB", worst>>20, limit>>20)
	}
	if n := goroutinesAfter(goroutines); n > goroutines {
		t.Fatalf("%d goroutines after, %d before", n, goroutines)
	}
}

// goroutinesAfter is how many goroutines run once those that have said
// they are done (a channel closed by their last deferred call, which
// Close and Abort wait for) have also exited: it waits, up to 10 s on a
// busy machine, for the count to fall to before.
func goroutinesAfter(before int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestParquetPageSizes: a page header that declares a page larger than
// the limit, or one that runs past its column chunk, is refused before the
// library reads (and allocates) it.
func TestParquetPageSizes(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", "types.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := OpenParquet("t", bytes.NewReader(orig), int64(len(orig)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	m := p.file.Metadata().RowGroups[0].Columns[0].MetaData
	at := m.DataPageOffset
	if d := m.DictionaryPageOffset; d > 0 && d < at {
		at = d
	}
	// The header starts with its type (field 1), then the uncompressed
	// size (field 2) and the compressed one (field 3), each an i32 field.
	var n int
	varint := func(b []byte) int {
		i := 0
		for b[i]&0x80 != 0 {
			i++
		}
		return i + 1
	}
	h := orig[at:]
	if h[0] != 0x15 {
		t.Fatalf("the first page header begins %x", h[:4])
	}
	n = 1 + varint(h[1:]) // past field 1
	if h[n] != 0x15 {
		t.Fatalf("field 2 of the header: %x", h[n:n+4])
	}
	sizeAt := n + 1
	zigzag := func(v int64) []byte {
		u := uint64(v<<1) ^ uint64(v>>63)
		var b []byte
		for u >= 0x80 {
			b = append(b, byte(u)|0x80)
			u >>= 7
		}
		return append(b, byte(u))
	}
	with := func(field int, v int64) []byte {
		i := sizeAt
		if field == 3 {
			i = sizeAt + varint(h[sizeAt:]) + 1
		}
		b := append([]byte{}, orig[:int(at)+i]...)
		b = append(b, zigzag(v)...)
		return append(b, orig[int(at)+i+varint(h[i:]):]...)
	}
	for _, c := range []struct {
		b    []byte
		is   error
		want string
	}{
		{with(2, 1<<31-1), ErrParquetTooLarge, "a page of 2147483647 bytes"},
		{with(3, 4<<20), ErrParquetDamaged, "runs past its column chunk"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := readParquetKeys(c.b, 8<<20)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "column id") {
			t.Errorf("%v, want %v: %q", err, c.is, c.want)
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > 32<<20 {
			t.Errorf("%d MiB allocated", a>>20)
		}
	}
}

// TestParquetFooter: a footer whose string claims a gigabyte (created_by,
// field 6) is refused before the library decodes it, which would allocate
// the gigabyte first; so is a footer longer than the limit.
func TestParquetFooter(t *testing.T) {
	footer := []byte{0x68, 0x80, 0x80, 0x80, 0x80, 0x04, 'x', 'y', 0x00}
	b := append([]byte("PAR1"), footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	b = append(b, "PAR1"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := OpenParquet("f", bytes.NewReader(b), int64(len(b)), 64<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrParquetDamaged) || !strings.Contains(err.Error(), "the footer does not parse") {
		t.Fatalf("a footer claiming 1 GiB: %v", err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 32<<20 {
		t.Fatalf("%d MiB allocated", a>>20)
	}
	if _, err := OpenParquet("f", bytes.NewReader(b), int64(len(b)), 4); !errors.Is(err, ErrParquetTooLarge) {
		t.Fatalf("a footer over the limit: %v", err)
	}
}

// TestParquetDecodeAhead: the next row group decoded ahead (keyColumns)
// gives the same keys whatever order and columns the calls ask for (a
// guess that missed is dropped), and Close waits for a decoding under way.
func TestParquetDecodeAhead(t *testing.T) {
	groupKeys := func(p *ParquetFile, g int, items ...string) []string {
		cols, err := p.ResolveKey(items)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		err = p.Keys(g, cols, []byte(":"), func(row int64, key []byte, bad error) error {
			if bad != nil {
				out = append(out, fmt.Sprint(row, " BAD ", bad))
			} else {
				out = append(out, fmt.Sprint(row, " ", string(key)))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b := []string{"id", "i8"}, []string{"st.a", "id"}
	calls := []struct {
		g    int
		cols []string
	}{{0, a}, {1, a}, {0, a}, {2, a}, {1, b}, {2, b}, {2, a}, {0, b}, {1, b}}
	p := openFixture(t, "types.parquet")
	for i, c := range calls {
		fresh := openFixture(t, "types.parquet")
		want := groupKeys(fresh, c.g, c.cols...)
		if got := groupKeys(p, c.g, c.cols...); !slices.Equal(got, want) || len(got) == 0 {
			t.Fatalf("call %d (group %d of %v): %d keys differ from a fresh file's %d", i, c.g, c.cols, len(got), len(want))
		}
	}
	groupKeys(p, 0, a...) // group 1 decoding now
	p.Close()
	if p.ahead != nil {
		t.Fatal("Close left a decoding behind")
	}
}
