// Package pagecache tells which pages of a mapped file are in memory, and
// drops a file from the page cache and reads its pages cold (for the cold
// figures of benchmarks).
package pagecache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Drop asks the kernel to evict path's pages (POSIX_FADV_DONTNEED) and
// reports the fraction still resident after it (mincore): near 1 on tmpfs,
// where the page cache is the storage, or when another process maps the
// file. A cold figure is only worth what that fraction says.
func Drop(path string) (resident float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	in, err := Resident(m, vec)
	if err != nil {
		return 0, err
	}
	return float64(in) / float64(len(vec)), nil
}

// Resident is how many pages of b, a page-aligned part of a mapping, are
// in memory (mincore); vec holds a byte a page of b.
func Resident(b, vec []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	// x/sys/unix has no Mincore wrapper.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		return 0, e
	}
	in := 0
	for _, v := range vec[:(len(b)+os.Getpagesize()-1)/os.Getpagesize()] {
		in += int(v & 1)
	}
	return in, nil
}

// ProcessReadBytes is what this process has had read from storage so far:
// /proc/self/io's read_bytes, the page cache misses of its faults and
// reads.
func ProcessReadBytes() (int64, error) {
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(io)) {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("pagecache: no read_bytes in /proc/self/io")
}

// ErrNoColdPage: ColdPages.Read found only pages in memory.
var ErrNoColdPage = errors.New("pagecache: no page of the file is out of memory")

// ColdPages reads single pages of a file that are not in the page cache,
// with pread on a descriptor advised POSIX_FADV_RANDOM, as a cold lookup
// reads its page: the device's own read, for a benchmark to time beside
// its lookups, in the same rhythm. A read timed back to back with others
// (fio's depth-1 figure) can be half as long on a virtual disk as one that
// follows any other work.
type ColdPages struct {
	f     *os.File
	m     []byte
	vec   []byte
	buf   []byte
	rng   *rand.Rand
	pages int64
}

// OpenColdPages opens path for ColdPages.Read, choosing pages from seed.
func OpenColdPages(path string, seed uint64) (*ColdPages, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	page := int64(os.Getpagesize())
	c := &ColdPages{f: f, vec: make([]byte, 1), rng: rand.New(rand.NewPCG(seed, 1)), pages: st.Size() / page}
	if c.pages == 0 {
		f.Close()
		return nil, fmt.Errorf("pagecache: %s holds no whole page", path)
	}
	if c.m, err = unix.Mmap(int(f.Fd()), 0, int(c.pages*page), unix.PROT_READ, unix.MAP_SHARED); err != nil {
		f.Close()
		return nil, err
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	c.buf = make([]byte, page)
	return c, nil
}

// Read reads one page that is not in memory (of up to 64 chosen at
// random) and reports how long the pread took.
func (c *ColdPages) Read() (time.Duration, error) {
	page := int64(len(c.buf))
	for range 64 {
		p := c.rng.Int64N(c.pages)
		in, err := Resident(c.m[p*page:(p+1)*page], c.vec)
		if err != nil {
			return 0, err
		}
		if in > 0 {
			continue
		}
		t := time.Now()
		n, err := unix.Pread(int(c.f.Fd()), c.buf, p*page)
		d := time.Since(t)
		if err != nil {
			return 0, fmt.Errorf("pagecache: reading %s at %d: %w", c.f.Name(), p*page, err)
		}
		if n != len(c.buf) {
			return 0, fmt.Errorf("pagecache: reading %s at %d: %d bytes, not a page", c.f.Name(), p*page, n)
		}
		return d, nil
	}
	return 0, ErrNoColdPage
}

// Close releases the file and its mapping.
func (c *ColdPages) Close() error {
	err := unix.Munmap(c.m)
	return errors.Join(err, c.f.Close())
}
