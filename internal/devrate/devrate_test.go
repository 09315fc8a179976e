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

	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/failpoint"
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

// TestCache: a figure measured and written is found again for the
// file's device; one another method measured, one older than maxAge and a
// damaged cache are not; a file too small to measure on is refused.
func TestCache(t *testing.T) {
	path := bigFile(t)
	cachePath := filepath.Join(t.TempDir(), "fpdedup", "devices.json")
	c, err := ReadCache(cachePath)
	if err != nil || !c.Writable() {
		t.Fatalf("no cache yet: %v, writable %v", err, c.Writable())
	}
	if _, ok := c.Lookup(path); ok {
		t.Fatal("a figure in an empty cache")
	}
	evict(t, path)
	r, err := Measure(path, 250*time.Millisecond)
	if err != nil || r.Random <= 0 || r.Seq <= 0 {
		t.Fatalf("Measure: %v, %v", r, err)
	}
	c.Add(path, r)
	if !c.Changed() {
		t.Fatal("Add did not change the cache")
	}
	if err := c.Write(nil); err != nil {
		t.Fatal(err)
	}
	c2, err := ReadCache(cachePath)
	if err != nil || c2.Changed() {
		t.Fatalf("read back: %v, changed %v", err, c2.Changed())
	}
	if got, ok := c2.Lookup(path); !ok || got != r {
		t.Fatalf("read back: %v %v, want %v", got, ok, r)
	}
	for name, edit := range map[string]func(*cacheEntry){
		"the first method":  func(e *cacheEntry) { e.Method = 0 },
		"older than maxAge": func(e *cacheEntry) { e.Measured = time.Now().Add(-maxAge - time.Hour) },
	} {
		c3, _ := ReadCache(cachePath)
		for dev, e := range c3.entries {
			edit(&e)
			c3.entries[dev] = e
		}
		if _, ok := c3.Lookup(path); ok {
			t.Errorf("a figure of %s was used", name)
		}
	}
	write(t, cachePath, []byte("{not json"))
	if c4, err := ReadCache(cachePath); err != nil || len(c4.entries) != 0 || !c4.Writable() {
		t.Fatalf("a damaged cache: %v, %d entries", err, len(c4.entries))
	}
	small := filepath.Join(t.TempDir(), "small")
	write(t, small, make([]byte, 1<<20))
	if _, err := Measure(small, 10*time.Millisecond); err == nil {
		t.Fatal("measured on a 1 MiB file")
	}
}

// TestWriteFaults fails each file operation of a cache's Write in turn
// (the fault seam every output goes through): each fails with the
// injected fault, leaves the old cache as it was and no temp or lock file
// beside it; the directory fsync after the rename fails with the new
// cache in place. It went through no seam on 9cdcd90.
func TestWriteFaults(t *testing.T) {
	ops := []failpoint.Op{failpoint.Create, failpoint.Write, failpoint.Sync, failpoint.Close, failpoint.Rename, failpoint.DirSync}
	dir := filepath.Join(t.TempDir(), "fpdedup")
	path := filepath.Join(dir, "devices.json")
	old := []byte(`{"1:1": {"random_reads_per_s": 1, "seq_bytes_per_s": 1, "measured": "2026-01-01T00:00:00Z", "file": "x", "method": 3}}` + "\n")
	reset := func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, path, old)
	}
	newCache := func() *Cache {
		c, err := ReadCache(path)
		if err != nil {
			t.Fatal(err)
		}
		c.Add(dir, Rates{5, 6})
		return c
	}
	reset()
	disarm := failpoint.Arm(0, ops...)
	err := newCache().Write(nil)
	n, log := disarm()
	if err != nil || n == 0 {
		t.Fatalf("clean write: %v; %d operations through the fault seam", err, n)
	}
	for i := int64(1); i <= n; i++ {
		reset()
		c := newCache()
		disarm := failpoint.Arm(i, ops...)
		err := c.Write(nil)
		disarm()
		dirSync := strings.HasPrefix(log[i-1], failpoint.DirSync.String())
		var fe *failpoint.Error
		if dirSync && !errors.Is(err, atomicfile.ErrNotDurable) || !dirSync && !errors.As(err, &fe) {
			t.Errorf("fault %d (%s): %v", i, log[i-1], err)
		}
		got, _ := os.ReadFile(path)
		if replaced := string(got) != string(old); replaced != dirSync {
			t.Errorf("fault %d (%s): cache replaced: %v", i, log[i-1], replaced)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "devices.json" {
				t.Errorf("fault %d (%s): %s left beside the cache", i, log[i-1], e.Name())
			}
		}
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
		kept    bool   // Write leaves it as it is
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
			path := filepath.Join(t.TempDir(), "devices.json")
			c.make(t, path)
			before, _ := os.Lstat(path)
			cache, err := ReadCache(path)
			entries := cache.entries
			var ce *CacheError
			switch {
			case c.problem == "" && err != nil:
				t.Errorf("ReadCache: %v", err)
			case c.problem != "" && (!errors.As(err, &ce) || !strings.Contains(err.Error(), c.problem)):
				t.Errorf("ReadCache: %v, want a CacheError saying %q", err, c.problem)
			case len(entries) != c.entries:
				t.Errorf("ReadCache: %d entries, want %d", len(entries), c.entries)
			}
			cache.entries = map[string]cacheEntry{"1:2": {Rates: Rates{1, 2}, Method: method}}
			werr := cache.Write(nil)
			after, _ := os.Lstat(path)
			if c.kept {
				if werr == nil || after == nil || before.Mode() != after.Mode() || !os.SameFile(before, after) {
					t.Errorf("Write over it: %v; %v became %v", werr, before.Mode(), after.Mode())
				}
				return
			}
			if werr != nil {
				t.Fatalf("Write: %v", werr)
			}
			if got, err := ReadCache(path); err != nil || got.entries["1:2"].Random != 1 {
				t.Errorf("read back: %v, %v", got, err)
			}
			if before != nil && before.Mode()&os.ModeSymlink != 0 && after.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link was replaced, not its target")
			}
		})
	}
}

// TestCacheAFIFO: a cache that is a FIFO nobody writes is read at once
// (it blocked in the cache's open on f13b27f) as empty, with a
// *CacheError, and left as it is by Write.
func TestCacheAFIFO(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "devices.json")
	if err := unix.Mkfifo(cache, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCache(cache)
	var ce *CacheError
	if !errors.As(err, &ce) || c.Writable() {
		t.Fatalf("ReadCache of a FIFO: %v, writable %v", err, c.Writable())
	}
	c.Add(cache, Rates{1, 2})
	if err := c.Write(nil); !errors.As(err, &ce) {
		t.Errorf("Write over a FIFO: %v", err)
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
