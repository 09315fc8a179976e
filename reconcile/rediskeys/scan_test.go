package rediskeys

import (
	"math"
	"testing"
)

func TestScanBound(t *testing.T) {
	for _, c := range []struct {
		n             int64
		count         int
		values, calls int64
	}{
		{0, 1000, 4*1000 + 65536, 4 + 6710 + 64},
		{90, 1000, 4*1090 + 65536, 4 + 6710 + 64},
		{10_000_000, 1000, 4*10_001_000 + 65536, 4*10_001 + 6710 + 64},
		{100, 10, 4*110 + 65536, 4*11 + 671088 + 64},
		{-1, 0, 4 + 65536, 4 + 6710886 + 64},
		// A server that says more than Redis can hold: no overflow.
		{1 << 62, 1000, 4*(1<<32+1000) + 65536, 4*((1<<32)/1000+1) + 6710 + 64},
		{math.MaxInt64, math.MaxInt, 4*(1<<32+1<<31) + 65536, 4*3 + 64},
	} {
		v, k := scanBound(c.n, c.count)
		if v != c.values || k != c.calls {
			t.Errorf("scanBound(%d, %d) = %d, %d; want %d, %d", c.n, c.count, v, k, c.values, c.calls)
		}
	}
}
