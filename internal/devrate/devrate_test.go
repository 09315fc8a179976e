package devrate

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
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
	entries, err := readCache(cachePath())
	if err != nil {
		t.Fatal(err)
	}
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

// TestCacheOnlyARegularFile: the cache is read only from a regular file of
// at most maxCache bytes, opened without blocking; anything else (a FIFO,
// which blocked every query for ever, a link to /dev/zero, which grew the
// process until it died, a directory, a huge file) is not used, with a
// *CacheError saying why, and is never written through or replaced.
func TestCacheOnlyARegularFile(t *testing.T) {
	good := []byte(`{"8:1": {"random_reads_per_s": 5, "seq_bytes_per_s": 6, "measured": "2026-01-01T00:00:00Z", "file": "x", "method": 3}}`)
	for _, c := range []struct {
		name    string
		make    func(t *testing.T, path string)
		entries int    // entries read
		problem string // in the CacheError, "" for none
		kept    bool   // writeCache leaves it as it is
	}{
		{"missing", func(*testing.T, string) {}, 0, "", false},
		{"regular", func(t *testing.T, p string) { write(t, p, good) }, 1, "", false},
		{"damaged", func(t *testing.T, p string) { write(t, p, []byte("{not json")) }, 0, "", false},
		{"link to a regular file", func(t *testing.T, p string) {
			write(t, p+".real", good)
			link(t, filepath.Base(p)+".real", p)
		}, 1, "", false},
		{"FIFO", func(t *testing.T, p string) {
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, 0, "is not a regular file (a FIFO)", true},
		{"link to /dev/zero", func(t *testing.T, p string) { link(t, "/dev/zero", p) }, 0, "is not a regular file (a character device)", true},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, 0, "is not a regular file (a directory)", true},
		{"over maxCache", func(t *testing.T, p string) { write(t, p, make([]byte, maxCache+1)) }, 0, "bytes, over the", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FPDEDUP_DEVICE", "")
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			path := cachePath()
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			c.make(t, path)
			before, _ := os.Lstat(path)
			entries, err := readCache(path)
			var ce *CacheError
			switch {
			case c.problem == "" && err != nil:
				t.Errorf("readCache: %v", err)
			case c.problem != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), c.problem)):
				t.Errorf("readCache: %v, want a CacheError saying %q", err, c.problem)
			case len(entries) != c.entries:
				t.Errorf("readCache: %d entries, want %d", len(entries), c.entries)
			}
			if perr := CacheProblem(); (perr == nil) != (c.problem == "") {
				t.Errorf("CacheProblem: %v", perr)
			}
			t.Setenv("FPDEDUP_DEVICE", "rand=1,seq=1")
			if perr := CacheProblem(); perr != nil {
				t.Errorf("CacheProblem with FPDEDUP_DEVICE (the cache is not read): %v", perr)
			}
			werr := writeCache(path, map[string]cacheEntry{"1:2": {Rates: Rates{1, 2}, Method: method}})
			after, _ := os.Lstat(path)
			if c.kept {
				if werr == nil || after == nil || before.Mode() != after.Mode() || !os.SameFile(before, after) {
					t.Errorf("writeCache over it: %v; %v became %v", werr, before.Mode(), after.Mode())
				}
				return
			}
			if werr != nil {
				t.Fatalf("writeCache: %v", werr)
			}
			if got, err := readCache(path); err != nil || got["1:2"].Random != 1 {
				t.Errorf("read back: %v, %v", got, err)
			}
			if before != nil && before.Mode()&os.ModeSymlink != 0 && after.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link was replaced, not its target")
			}
		})
	}
}

// TestForCacheAFIFO: For with the cache a FIFO nobody writes returns (it
// blocked in the cache's open on f13b27f), measures, and leaves the FIFO.
func TestForCacheAFIFO(t *testing.T) {
	t.Setenv("FPDEDUP_DEVICE", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path := bigFile(t)
	cache := cachePath()
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(cache, 0o644); err != nil {
		t.Fatal(err)
	}
	evict(t, path)
	if _, from := For(path); from != FromMeasured {
		t.Errorf("from %s, want %s", from, FromMeasured)
	}
	if st, err := os.Lstat(cache); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the cache FIFO is now %v (%v)", st.Mode(), err)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
