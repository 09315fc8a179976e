package ingest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var raceBuild bool

// copyParquet copies every row of b, every column decoded, as a dedup
// that keeps them all does.
func copyParquet(b []byte, limit int64) error {
	_, err := copyParquetTo(io.Discard, b, limit)
	return err
}

// copyParquetTo is copyParquet writing to out; it returns the rows the
// input declares.
func copyParquetTo(out io.Writer, b []byte, limit int64) (int64, error) {
	p, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), limit)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	w := NewRowWriter(out, RowsAsRead)
	defer w.Abort()
	if err := w.Schema(p); err != nil {
		return 0, err
	}
	row := int64(1)
	for g := range p.RowGroups() {
		rows := make([]int64, 0, p.file.RowGroups()[g].NumRows())
		for range p.file.RowGroups()[g].NumRows() {
			rows = append(rows, row)
			row++
		}
		if err := w.Write(p, g, rows); err != nil {
			return 0, err
		}
	}
	return p.Rows(), w.Close()
}

// TestParquetDamagedKnown reads the damaged files of
// testdata/parquet/damaged.tsv, each an edit of a DuckDB file that once
// made a Parquet library hang, allocate gigabytes or die out of memory
// (found by fuzzing both libraries side by side). Each must read to its
// keys or to a *ParquetError, quickly and within its limit, and so must a
// copy of all its rows (every column decoded, as dedup copies them). The test runs
// in a child under a 4 GiB address-space limit, so that a reader that
// allocates what a file declares fails this test instead of taking the
// machine's memory.
func TestParquetDamagedKnown(t *testing.T) {
	if os.Getenv("FPDEDUP_TEST_DAMAGED_CHILD") == "" && !raceBuild {
		cmd := exec.Command(os.Args[0], "-test.run=^TestParquetDamagedKnown$", "-test.v")
		cmd.Env = append(os.Environ(), "FPDEDUP_TEST_DAMAGED_CHILD=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the child:\n%s", out)
		if err != nil {
			t.Fatalf("the child under a 4 GiB address space: %v", err)
		}
		return
	}
	if !raceBuild {
		if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: 4 << 30, Max: 4 << 30}); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 256 << 20 // the commands' default: what a page may declare is not the bound
	cases := forEachDamaged(t, func(name string, file []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := readParquetKeys(file, limit)
		cerr := copyParquet(file, limit)
		runtime.ReadMemStats(&after)
		var pe *ParquetError
		if err != nil && !errors.As(err, &pe) {
			t.Errorf("%s: not a *ParquetError: %T %v", name, err, err)
		}
		if cerr != nil && !errors.As(cerr, &pe) {
			t.Errorf("%s: copying its rows: not a *ParquetError: %T %v", name, cerr, cerr)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
			t.Errorf("%s: %d MiB allocated to read a %d KiB file", name, got>>20, len(file)>>10)
		}
		t.Logf("%s: %v", name, err)
	})
	if cases < 30 {
		t.Fatalf("%d cases", cases)
	}
}

// forEachDamaged calls fn with each damaged file of damaged.tsv (an edit
// of a fixture: keep seed[:a], then the hex bytes, then seed[b:]) and
// returns how many there were.
func forEachDamaged(t *testing.T, fn func(name string, file []byte)) int {
	t.Helper()
	dir := filepath.Join("..", "testdata", "parquet")
	f, err := os.Open(filepath.Join(dir, "damaged.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seeds := map[string][]byte{}
	cases := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		fs := strings.Split(sc.Text(), "\t")
		if len(fs) != 5 {
			t.Fatalf("damaged.tsv: %q", sc.Text())
		}
		name, seed := fs[0], fs[1]
		if seeds[seed] == nil {
			if seeds[seed], err = os.ReadFile(filepath.Join(dir, seed)); err != nil {
				t.Fatal(err)
			}
		}
		a, err1 := strconv.Atoi(fs[2])
		b, err2 := strconv.Atoi(fs[3])
		mid, err3 := hex.DecodeString(fs[4])
		if err := errors.Join(err1, err2, err3); err != nil || a > b || b > len(seeds[seed]) {
			t.Fatalf("damaged.tsv %s: %v", name, err)
		}
		fn(name, append(append(bytes.Clone(seeds[seed][:a]), mid...), seeds[seed][b:]...))
		cases++
	}
	return cases
}
