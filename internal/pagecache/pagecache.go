// Package pagecache tells which pages of a mapped file are in memory, and
// drops a file from the page cache (for the cold figures of benchmarks).
package pagecache

import (
	"os"
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
