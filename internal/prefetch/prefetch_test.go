package prefetch

import (
	"testing"
	"unsafe"
)

// TestAddrs: addresses of live memory, nil, an unmapped page and a
// kernel address are all prefetched without a fault.
func TestAddrs(t *testing.T) {
	buf := make([]uint64, 1024)
	addrs := []uintptr{0, 0xdead0000, ^uintptr(0) &^ 63}
	for i := 0; i < len(buf); i += 8 {
		addrs = append(addrs, uintptr(unsafe.Pointer(&buf[i])))
	}
	Addrs(addrs)
	Addrs(nil)
	Addrs(addrs[:1])
}

func BenchmarkAddrs(b *testing.B) {
	buf := make([]uint64, 1<<20)
	addrs := make([]uintptr, 64)
	for i := range addrs {
		addrs[i] = uintptr(unsafe.Pointer(&buf[i*1024]))
	}
	for b.Loop() {
		Addrs(addrs)
	}
}
