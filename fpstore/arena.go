package fpstore

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/hugemem"
)

// arena is anonymous memory for fingerprints, outside the Go heap: the GC
// neither scans nor frees it, and it is mapped with MADV_HUGEPAGE, so
// filling it costs one page fault per 2 MiB instead of one per 4 KiB:
// growing Go slices spends more of a build's CPU time in memmove, page
// clearing and faults than hashing does. Address space
// is reserved up front (MAP_NORESERVE); only pages touched count in RSS.
//
// An arena belongs to one goroutine.
type arena struct {
	mem  []byte
	used int
}

func newArena(size int) (*arena, error) {
	mem, err := hugemem.Alloc(int(alignUp(uint64(max(size, 64<<10)), PageSize)))
	if err != nil {
		return nil, err
	}
	return &arena{mem: mem}, nil
}

// alloc returns room for n fingerprints, or nil when the arena is full.
func (a *arena) alloc(n int) []Fingerprint {
	size := 16 * n
	if a.used+size > len(a.mem) {
		return nil
	}
	p := unsafe.Pointer(&a.mem[a.used])
	a.used += size
	return unsafe.Slice((*Fingerprint)(p), n)[:0]
}

// reset forgets every allocation; the pages stay mapped for reuse.
func (a *arena) reset() { a.used = 0 }

func (a *arena) free() {
	if a.mem != nil {
		hugemem.Free(a.mem)
		a.mem = nil
	}
}

// hugeBuffers hands out large byte buffers mapped with MADV_HUGEPAGE and
// unmaps them all at once. Touching fresh memory a 4 KiB fault at a time
// costs many times what huge-page faults cost for the same bytes, so the
// writer's big reused buffers
// (pending fingerprints, FlatBuffers builders) live here rather than on the
// Go heap, which Linux backs with small pages under THP=madvise.
// Safe for concurrent use.
type hugeBuffers struct {
	mu   sync.Mutex
	maps [][]byte
}

// get returns n bytes, or a heap slice if mapping fails.
func (h *hugeBuffers) get(n int) []byte {
	size := int(alignUp(uint64(max(n, 1)), PageSize))
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	h.mu.Lock()
	h.maps = append(h.maps, mem)
	h.mu.Unlock()
	return mem[:n:n]
}

// fingerprints returns an empty slice with room for n fingerprints.
func (h *hugeBuffers) fingerprints(n int) []Fingerprint {
	b := h.get(16 * n)
	return unsafe.Slice((*Fingerprint)(unsafe.Pointer(unsafe.SliceData(b))), n)[:0]
}

// free unmaps every buffer; none may be used after.
func (h *hugeBuffers) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.maps {
		_ = unix.Munmap(m)
	}
	h.maps = nil
}
