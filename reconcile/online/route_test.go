package online

import (
	"fmt"
	"hash/crc32"
	"testing"
)

// routeByCRC sends a key to crc32(key) mod 7, and "all" to no shard.
type routeByCRC struct{}

func (routeByCRC) Route(key []byte) int {
	if string(key) == "all" {
		return -1
	}
	return int(crc32.ChecksumIEEE(key) % 7)
}

// TestRouteItems: every item gets its router's shard plus one (0 where the
// router says none), over several goroutines' shares and a lone item.
func TestRouteItems(t *testing.T) {
	for _, n := range []int{0, 1, 100_003} {
		items := make([]Item, n)
		for i := range items {
			items[i].Key = fmt.Appendf(nil, "k%d", i)
		}
		if n > 1 {
			items[n/2].Key = []byte("all")
		}
		RouteItems(items, routeByCRC{})
		for i, it := range items {
			if want := (routeByCRC{}).Route(it.Key) + 1; int(it.Route) != want {
				t.Fatalf("%d items: item %d (%q) routed %d, want %d", n, i, it.Key, it.Route, want)
			}
		}
	}
}
