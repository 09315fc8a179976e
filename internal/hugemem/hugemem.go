// Package hugemem maps anonymous memory with transparent huge pages, for
// the large pointer-free arrays of fingerprints that builds, merges and the
// dedup seen-set fill.
//
// Why: the Go heap is backed by small pages under THP=madvise, and
// touching fresh memory a 4 KiB fault at a time costs many times what
// huge-page faults cost for the same bytes (see fpstore's arena). The memory is outside the Go heap: the GC neither scans nor
// frees it, so callers Free it, and nothing in it may point into the heap.
package hugemem

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapped and peak are the bytes Alloc has mapped and not yet freed, now
// and at most since ResetPeak: the plan's shares off the Go heap (tables,
// blooms, sort arenas, a bloom audit's passes), as --stats-json reports
// their peak.
var mapped, peak atomic.Int64

// Peak is the most bytes mapped at once since ResetPeak (or the start).
func Peak() int64 { return peak.Load() }

// ResetPeak starts the peak again from what is mapped now.
func ResetPeak() { peak.Store(mapped.Load()) }

// Alloc returns n zeroed bytes mapped with MADV_HUGEPAGE. Address space is
// reserved up front (MAP_NORESERVE); only touched pages count in RSS.
func Alloc(n int) ([]byte, error) {
	size := (max(n, 1) + 4095) &^ 4095
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	for now := mapped.Add(int64(size)); ; {
		old := peak.Load()
		if now <= old || peak.CompareAndSwap(old, now) {
			break
		}
	}
	return mem[:n:n], nil
}

// Free unmaps memory from Alloc. b must not be used after.
func Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	full := unsafe.Slice(unsafe.SliceData(b), (cap(b)+4095)&^4095)
	if unix.Munmap(full) == nil {
		mapped.Add(-int64(len(full)))
	}
}

// Slice views memory from Alloc as n values of T (T must hold no pointers).
func Slice[T any](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/size)
}
