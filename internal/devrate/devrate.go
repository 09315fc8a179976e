// Package devrate tells how fast the device under a file reads: 4 KiB
// random reads a second with many in flight, and bytes a second read in
// 2 MiB extents, one a core at once, as a whole read of an index goes. A
// cold lookup batch prices its reads with them (fpstore's cold plan).
// Measure measures them on the file itself (the random reads with
// O_DIRECT; the extents through a mapping, only those not in memory, and
// evicted after: the page cache neither helps nor is disturbed); a Cache
// keeps what was measured, per device, in the user's cache directory.
// Whether and when to measure is the caller's to decide: this package
// reads no environment and writes nothing but the cache it is asked to.
package devrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// Rates are a device's read rates.
type Rates struct {
	Random float64 `json:"random_reads_per_s"` // 4 KiB random reads, depth 32
	Seq    float64 `json:"seq_bytes_per_s"`    // 2 MiB extents, one a core at once
}

// Default is what is assumed when nothing better is known: a local SSD of
// modest speed (fio: 28k 4 KiB reads a second at depth 32, 2 GB/s in
// 2 MiB reads), so that a plan made with it is not far off on one.
var Default = Rates{Random: 28000, Seq: 2e9}

// Parse reads rand=N,seq=BYTES (either or both) over base.
func Parse(s string, base Rates) (Rates, error) {
	r := base
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || !(f > 0) || math.IsInf(f, 0) {
			return base, fmt.Errorf("device rates %q: want rand=READS_PER_S,seq=BYTES_PER_S (positive numbers)", s)
		}
		switch k {
		case "rand":
			r.Random = f
		case "seq":
			r.Seq = f
		default:
			return base, fmt.Errorf("device rates %q: %q is neither rand nor seq", s, k)
		}
	}
	return r, nil
}

// maxAge is how long a cached figure is trusted.
const maxAge = 30 * 24 * time.Hour

// cacheEntry is a device's figure in the cache file.
type cacheEntry struct {
	Rates
	Measured time.Time `json:"measured"`
	File     string    `json:"file"` // the file it was measured on
	Method   int       `json:"method"`
}

// method names how Measure measures; a figure cached by another is
// measured again. The first, O_DIRECT 2 MiB reads in order from the
// file's start, wrote no method (0); 2 read them at random offsets (both
// read a file just written from the host's cache); 1 was never cached.
const method = 3

// Cache is the figures measured before, one a device, as read from the
// cache file. Not safe for concurrent use.
type Cache struct {
	path    string
	entries map[string]cacheEntry
	usable  bool // read from a regular file (or none): Write may replace it
	changed bool // Add since ReadCache
}

// CacheError says why the cache file is not used: it is not a regular
// file, or larger than any cache fpdedup writes. The rates are then
// measured each time, and the file is left as it is.
type CacheError struct {
	Path    string
	Problem string
}

func (e *CacheError) Error() string {
	return fmt.Sprintf("device cache %s %s: not used (remove it to cache the device's rates again)", e.Path, e.Problem)
}

// CachePath is $XDG_CACHE_HOME/fpdedup/devices.json (or ~/.cache/…), ""
// when there is no cache directory.
func CachePath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "fpdedup", "devices.json")
}

// maxCache bounds the cache file read: a device's entry is ~200 bytes, so
// this is thousands of devices, and a file larger is not one fpdedup wrote.
const maxCache = 1 << 20

// ReadCache reads the cache file at path ("": none). A missing or damaged
// one is empty (replaced by the next Write). One that is not a regular
// file (a FIFO, which would block the open and every read; a link to
// /dev/zero, which never ends) or is larger than maxCache is empty too,
// never written, and a *CacheError says so. The open does not block, and
// nothing is read past maxCache.
func ReadCache(path string) (*Cache, error) {
	c := &Cache{path: path, entries: map[string]cacheEntry{}}
	if path == "" {
		return c, nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		c.usable = true
		return c, nil
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return c, &CacheError{Path: path, Problem: "cannot be opened (" + err.Error() + ")"}
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return c, &CacheError{Path: path, Problem: "cannot be read (" + err.Error() + ")"}
	case !st.Mode().IsRegular():
		return c, &CacheError{Path: path, Problem: "is not a regular file (" + fileKind(st.Mode()) + ")"}
	case st.Size() > maxCache:
		c.usable = true // a regular file: the next Write replaces it
		return c, &CacheError{Path: path, Problem: fmt.Sprintf("is %d bytes, over the %d a cache holds", st.Size(), maxCache)}
	}
	c.usable = true
	b, err := io.ReadAll(io.LimitReader(f, maxCache+1))
	if err != nil || len(b) > maxCache || json.Unmarshal(b, &c.entries) != nil {
		c.entries = map[string]cacheEntry{} // replaced by the next Write
	}
	return c, nil
}

// Path is the cache file's path ("": none).
func (c *Cache) Path() string { return c.path }

// Writable reports whether Write may replace the cache file: there is
// one to write, and what is there now is a regular file or nothing.
func (c *Cache) Writable() bool { return c.path != "" && c.usable }

// Changed reports whether a figure was added since the cache was read.
func (c *Cache) Changed() bool { return c.changed }

// device names the device holding file, as the cache keys it.
func device(file string) (string, bool) {
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		return "", false
	}
	return fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), true
}

// Lookup is the figure cached for the device holding file: one measured
// the current way within the last month.
func (c *Cache) Lookup(file string) (Rates, bool) {
	dev, ok := device(file)
	if !ok {
		return Rates{}, false
	}
	e, ok := c.entries[dev]
	if ok && e.Method == method && time.Since(e.Measured) < maxAge && e.Random > 0 && e.Seq > 0 {
		return e.Rates, true
	}
	return Rates{}, false
}

// Add records r, measured now on file, for the device holding it.
func (c *Cache) Add(file string, r Rates) {
	if dev, ok := device(file); ok {
		c.entries[dev] = cacheEntry{Rates: r, Measured: time.Now().UTC(), File: file, Method: method}
		c.changed = true
	}
}

// Write publishes the cache whole, as every output is (atomicfile: a temp
// file beside it, fsynced and renamed, through the fault seam), with g
// when g commits or at once when g is nil, making its directory if need
// be; through a symlink, its target. A cache read from something other
// than a regular file is left alone: never written through, never
// replaced (a *CacheError).
func (c *Cache) Write(g *atomicfile.Group) error {
	if !c.Writable() {
		return &CacheError{Path: c.path, Problem: "is not a regular file"}
	}
	b, err := json.MarshalIndent(c.entries, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	target, through, err := atomicfile.Resolve(c.path)
	if err != nil {
		return err
	}
	if through {
		return &CacheError{Path: c.path, Problem: "is not a regular file"}
	}
	return atomicfile.WriteFile(g, target, append(b, '\n'))
}

func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return m.Type().String()
}

var measuring sync.Mutex

// minMeasured is the smallest file measured on: random reads over a
// smaller one land in the device's own cache and say nothing.
const minMeasured = 64 << 20

// depth is how many random reads are in flight at once, as fio's depth 32.
const depth = 32

// Measure reads path for about d twice: with O_DIRECT, 4 KiB at random
// aligned offsets, depth at once; then as a whole read of an index goes
// (fpstore's readWhole: each share of a batch faults in, through the
// mapping, the 2 MiB extents its keys land in, wherever they are): see
// wholeRate. O_DIRECT reads of 2 MiB measured 9.1 GB/s on a file just
// written, from the host's cache, where a whole read of an index went at
// 3.7: through the page cache the guest's own copying is the limit.
func Measure(path string, d time.Duration) (Rates, error) {
	measuring.Lock() // one at a time: two would share the device and halve each other
	defer measuring.Unlock()
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return Rates{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Rates{}, err
	}
	size := st.Size()
	if size < minMeasured {
		return Rates{}, fmt.Errorf("%s: %d bytes, too few to measure a device on", path, size)
	}
	random, err := medianOf(func() (float64, error) { return readAtRandom(f, size, 4096, depth, d/windows) })
	if err != nil {
		return Rates{}, err // O_DIRECT refused (EINVAL), or the file shrank
	}
	seq, err := medianOf(func() (float64, error) { return wholeRate(path, size, d/windows) })
	if err != nil {
		return Rates{}, err
	}
	return Rates{Random: random, Seq: seq}, nil
}

// windows is how many times each rate is measured, in as many slices of
// the time given: a virtual disk stalls now and then, one window reading
// a fiftieth of what the next does, and a figure is cached for a month.
const windows = 5

// medianOf is the median of windows measures, or the first error.
func medianOf(measure func() (float64, error)) (float64, error) {
	var rates [windows]float64
	for i := range rates {
		r, err := measure()
		if err != nil {
			return 0, err
		}
		rates[i] = r
	}
	slices.Sort(rates[:])
	return rates[windows/2], nil
}

// extent is what a fault reads ahead in a mapping advised MADV_HUGEPAGE.
const extent = 2 << 20

// wholeRate maps path and faults in 2 MiB extents at random, one a core
// at once, for about d, and returns the bytes a second of the time spent
// in the faults. Only extents with no page in memory are touched
// (mincore), and every extent that had none before is evicted after
// (POSIX_FADV_DONTNEED: a fault also reads ahead into the next one), so
// the page cache is left as it was found; a file mostly in memory has too
// few such extents to say anything (an error).
func wholeRate(path string, size int64, d time.Duration) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	_ = unix.Madvise(data, unix.MADV_HUGEPAGE) // as readWhole; refused without THP, which reads ahead anyway
	extents := size / extent
	vec := make([]byte, extent/4096)
	var out []int64 // extents with no page in memory
	for at := int64(0); at < extents*extent; at += extent {
		if absent(data[at:at+extent], vec) {
			out = append(out, at)
		}
	}
	workers := runtime.NumCPU()
	var mu sync.Mutex
	var busy time.Duration // in faults, all workers
	var sink atomic.Uint32
	var read atomic.Int64 // extents read, all workers
	start := time.Now()
	// A slice goes on past d until it has read minExtents (a device busy
	// with other work read 16 MiB in 50 ms only now and then, and a
	// measure that fails leaves the defaults), but not past maxSlice d.
	more := func() bool {
		el := time.Since(start)
		return el < d || read.Load() < minExtents && el < maxSlice*d
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			vec := make([]byte, extent/4096)
			var spent time.Duration
			for tries := 0; len(out) > 0 && more() && tries < 1<<16; tries++ {
				at := out[r.IntN(len(out))]
				if !absent(data[at:at+extent], vec) {
					continue // read already, or read ahead
				}
				t := time.Now()
				// The first touch faults the extent in; the last waits
				// for the rest where it came in small folios.
				sink.Add(uint32(data[at]) + uint32(data[at+extent-1]))
				spent += time.Since(t)
				read.Add(1)
			}
			mu.Lock()
			busy += spent
			mu.Unlock()
		}()
	}
	wg.Wait()
	// Unmapped first: the kernel does not evict pages a process maps.
	if err := unix.Munmap(data); err != nil {
		return 0, err
	}
	for _, at := range out {
		_ = unix.Fadvise(int(f.Fd()), at, extent, unix.FADV_DONTNEED)
	}
	n := read.Load()
	if n < minExtents || busy <= 0 {
		return 0, fmt.Errorf("%s: %d extents out of memory read, too few to measure on", path, n)
	}
	return float64(n*extent) / (busy.Seconds() / float64(workers)), nil
}

// minExtents is the fewest extents wholeRate measures on, and maxSlice
// how many times its time it may take to read them.
const (
	minExtents = 8
	maxSlice   = 20
)

// absent reports whether none of b's pages is in memory; vec has a byte
// a page of b.
func absent(b, vec []byte) bool {
	in, err := pagecache.Resident(b, vec)
	return err == nil && in == 0
}

// readAtRandom reads blocks of n bytes at random n-aligned offsets of f
// (size bytes) from workers goroutines for about d, and returns how many
// it read a second.
func readAtRandom(f *os.File, size int64, n, workers int, d time.Duration) (float64, error) {
	blocks := size / int64(n)
	var reads atomic.Int64
	var failed atomic.Pointer[error] // the first read that failed
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := aligned(n)
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for time.Since(start) < d {
				if _, err := f.ReadAt(buf, r.Int64N(blocks)*int64(n)); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return 0, *err
	}
	return float64(reads.Load()) / time.Since(start).Seconds(), nil
}

// aligned is n bytes at a 4096-byte boundary, as O_DIRECT needs.
func aligned(n int) []byte {
	b := make([]byte, n+4096)
	off := int((4096 - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4096) % 4096)
	return b[off : off+n]
}
