package rbloom

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// TestHashVectors: the hash pairs of fixed items, computed independently
// with this Python (the algorithms as Appleby published them, in Python's
// unbounded integers masked to 64 and 32 bits):
//
//	def mm64a(d, seed):
//	    m, r, M = 0xc6a4a7935bd1e995, 47, 2**64-1
//	    h = (seed ^ len(d)*m) & M
//	    for i in range(len(d)//8):
//	        k = int.from_bytes(d[8*i:8*i+8], 'little')
//	        k = k*m & M; k ^= k >> r; k = k*m & M
//	        h ^= k; h = h*m & M
//	    if len(d) % 8: h ^= int.from_bytes(d[len(d)//8*8:], 'little'); h = h*m & M
//	    h ^= h >> r; h = h*m & M; h ^= h >> r
//	    return h
//	def mm2(d, seed):
//	    m, r, M = 0x5bd1e995, 24, 2**32-1
//	    h = (seed ^ len(d)) & M
//	    for i in range(len(d)//4):
//	        k = int.from_bytes(d[4*i:4*i+4], 'little')
//	        k = k*m & M; k ^= k >> r; k = k*m & M
//	        h = h*m & M; h ^= k
//	    if len(d) % 4: h ^= int.from_bytes(d[len(d)//4*4:], 'little'); h = h*m & M
//	    h ^= h >> 13; h = h*m & M; h ^= h >> 15
//	    return h
//	a = mm64a(item, 0xc6a4a7935bd1e995); b = mm64a(item, a)
//	a2 = mm2(item, 0x9747b28c); b2 = mm2(item, a2)
func TestHashVectors(t *testing.T) {
	for _, c := range []struct {
		item   string
		a, b   uint64
		a2, b2 uint32
	}{
		{"", 0x1ab11ea5a7b2c56e, 0xbbddcb5ab56dd547, 0x106e08d9, 0x456d9087},
		{"a", 0x4292cee227b9150a, 0x7e9b527031f50c11, 0xa2d0b27c, 0x2e36e8b4},
		{"abc", 0xca52f3863690cd7b, 0x492e507dc7ce3d23, 0x1c94221b, 0x08e2b515},
		{"hello world", 0xbae8fb35317acde1, 0xa5c3078260d44436, 0x48d0c363, 0x76aefdba},
		{"0123456789abcdef0", 0x64e08134eb3a4633, 0x0cd8a9cd5913ff62, 0x6eac3c7e, 0xa7985343},
		{strings.Repeat("\xff", 15), 0x5ab08c61456f74ff, 0xebc8eff5ed53f67e, 0xc8467529, 0x50ba0f4a},
	} {
		if h := HashItem(OptForce64|OptNoRound, []byte(c.item)); h != (Hash{c.a, c.b}) {
			t.Errorf("HashItem(force64, %q) = %#x, want {%#x %#x}", c.item, h, c.a, c.b)
		}
		if h := HashItem(OptNoRound, []byte(c.item)); h != (Hash{uint64(c.a2), uint64(c.b2)}) {
			t.Errorf("HashItem(32-bit, %q) = %#x, want {%#x %#x}", c.item, h, c.a2, c.b2)
		}
	}
}

// TestItemBitsAgainstModule: one item added to an empty filter sets
// exactly the bits (A + i·B) mod bits, i < hashes, least significant bit
// of a byte first, in the module's own dump.
func TestItemBitsAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	ctx := context.Background()
	for i, item := range []string{"", "a", "hello world", "0123456789abcdef0", "l2:{user:42}:evt:9f3a", strings.Repeat("x", 200)} {
		key := fmt.Sprintf("bits%d", i)
		if err := c.Do(ctx, "BF.RESERVE", key, "0.001", 1000+i*37, "NONSCALING").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "BF.ADD", key, item).Err(); err != nil {
			t.Fatal(err)
		}
		d := scandump(t, c, key)
		h, err := ParseHeader(d[0].data, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		l := h.Links[0]
		var got []uint64
		for _, ch := range d[1:] {
			for j, b := range ch.data {
				for bit := range 8 {
					if b&(1<<bit) != 0 {
						got = append(got, uint64(ch.iter-1-int64(len(ch.data))+int64(j))*8+uint64(bit))
					}
				}
			}
		}
		hash := h.Hash([]byte(item))
		var want []uint64
		for k := range l.Hashes {
			want = append(want, hash.Bit(k, l.Modulus()))
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: the module set bits %v, want %v", item, got, want)
		}
	}
}
