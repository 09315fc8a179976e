package devrate

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/pagecache"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rates
		ok   bool
	}{
		{"rand=60000,seq=3e9", Rates{60000, 3e9}, true},
		{"seq=1000000", Rates{Default.Random, 1e6}, true},
		{"rand=5", Rates{5, Default.Seq}, true},
		{"rand=0", Default, false},
		{"rand=-1", Default, false},
		{"rand=NaN", Default, false},
		{"seq=+Inf", Default, false},
		{"iops=5", Default, false},
		{"rand", Default, false},
		{"", Default, false},
	} {
		got, err := Parse(c.in, Default)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// bigFile is a file large enough to measure on, in a directory on a real
// file system (the test is skipped where O_DIRECT is refused: tmpfs).
func bigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i * 7)
	}
	for range minMeasured >> 20 {
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	evict(t, path)
	if _, err := Measure(path, 250*time.Millisecond); err != nil {
		t.Skipf("cannot measure here (%v)", err)
	}
	return path
}

// evict puts path out of the page cache, as the index a cold batch is
// planned on: only extents not in memory are measured (wholeRate). A
// measure evicts what it read, but pages another core still holds in its
// LRU batch can stay, and a test that measures again evicts first.
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestFor: measured once, then from the cache; a figure another method
// measured, and a damaged cache, are measured again; FPDEDUP_DEVICE wins
// over both; a file too small to measure on, on a device not measured
// yet, gives the defaults.
func TestFor(t *testing.T) {
	t.Setenv("FPDEDUP_DEVICE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := bigFile(t)
	evict(t, path)
	r, from := For(path)
	if from != FromMeasured || r.Random <= 0 || r.Seq <= 0 {
		t.Fatalf("first: %v from %s", r, from)
	}
	r2, from := For(path)
	if from != FromCache || r2 != r {
		t.Fatalf("second: %v from %s, want %v from the cache", r2, from, r)
	}
	// A figure cached by the first method (2 MiB reads in order from the
	// file's start, which a file just written serves from the host's
	// cache) is measured again.
	entries := readCache(cachePath())
	for dev, e := range entries {
		e.Method, e.Seq = 0, 10.7e9
		entries[dev] = e
	}
	if err := writeCache(cachePath(), entries); err != nil {
		t.Fatal(err)
	}
	evict(t, path)
	if r3, from := For(path); from != FromMeasured || r3.Seq == 10.7e9 {
		t.Fatalf("after a figure of the first method: %v from %s", r3, from)
	}
	if err := os.WriteFile(cachePath(), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	evict(t, path)
	if _, from := For(path); from != FromMeasured {
		t.Fatalf("after a damaged cache: from %s", from)
	}
	t.Setenv("FPDEDUP_DEVICE", "rand=1234,seq=5678")
	if r, from := For(path); from != FromEnv || r != (Rates{1234, 5678}) {
		t.Fatalf("with FPDEDUP_DEVICE: %v from %s", r, from)
	}
	t.Setenv("FPDEDUP_DEVICE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // nothing known of the device
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, from := For(small); from != FromDefault || r != Default {
		t.Fatalf("a small file: %v from %s", r, from)
	}
}

// resident is the share of path's pages in memory.
func resident(t *testing.T, path string) float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	in, err := pagecache.Resident(m, make([]byte, len(m)/4096))
	if err != nil {
		t.Fatal(err)
	}
	return float64(in) / float64(len(m)/4096)
}

// TestWholeRateLeavesCache: measuring the whole-read rate of a file out of
// memory leaves it out of memory; a file in memory is not measured (an
// error) and stays in memory.
func TestWholeRateLeavesCache(t *testing.T) {
	path := bigFile(t)
	evict(t, path)
	if r := resident(t, path); r > 0.01 {
		t.Skipf("%.0f%% of a file just evicted is in memory", 100*r)
	}
	seq, err := wholeRate(path, minMeasured, 100*time.Millisecond)
	if err != nil || seq <= 0 {
		t.Fatalf("wholeRate = %v, %v", seq, err)
	}
	if r := resident(t, path); r > 0.01 {
		t.Fatalf("after measuring, %.1f%% of the file is in memory", 100*r)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := wholeRate(path, minMeasured, 100*time.Millisecond); err == nil {
		t.Fatal("a file in memory measured")
	}
	if r := resident(t, path); r < 0.99 {
		t.Fatalf("a file in memory: %.1f%% stayed", 100*r)
	}
}

// FuzzParse: any text is refused or gives rates that are positive and
// finite (a plan divides by them), never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"rand=60000,seq=3e9", "seq=1e6", "rand=NaN", "seq=+Inf", "rand=1e400", "rand=0x10", "rand=1,rand=2", ",", "rand==1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s, Default)
		if err != nil {
			if r != Default {
				t.Fatalf("Parse(%q) refused with %v but gave %v", s, err, r)
			}
			return
		}
		for _, v := range []float64{r.Random, r.Seq} {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("Parse(%q) = %v", s, r)
			}
		}
	})
}
