package ingest

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestEightDigits(t *testing.T) {
	if testing.Short() {
		t.Skip("10^8 values")
	}
	var want [8]byte
	for v := range uint32(1e8) {
		x := eightDigits(v)
		w := v
		for i := 7; i >= 0; i-- {
			want[i] = byte(w % 10)
			w /= 10
		}
		for i := range 8 {
			if byte(x>>(8*i)) != want[i] {
				t.Fatalf("eightDigits(%d) = %016x, want digits %v", v, x, want)
			}
		}
	}
}

func TestAppendIntMatchesStrconv(t *testing.T) {
	ints := []int64{0, 1, -1, 9, 10, 11, 99, 100, 101, -10, -99, -100, math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32, 1767229737488}
	uints := []uint64{0, math.MaxUint64, math.MaxUint32}
	for p := uint64(1); p < math.MaxUint64/10; p *= 10 {
		uints = append(uints, p-1, p, p+1, 2*p, 9*p, 10*p-1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		u := r.Uint64() >> r.IntN(64)
		uints = append(uints, u)
		ints = append(ints, int64(u), -int64(u))
	}
	prefix := []byte("k:")
	for _, u := range uints {
		if got, want := string(appendUint(prefix, u)), string(strconv.AppendUint(prefix, u, 10)); got != want {
			t.Fatalf("appendUint(%d) = %q, want %q", u, got, want)
		}
	}
	for _, x := range ints {
		if got, want := string(appendInt(prefix, x)), string(strconv.AppendInt(prefix, x, 10)); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", x, got, want)
		}
	}
}

// BenchmarkAppendInt renders 13-digit millisecond timestamps, as the
// reference events' key has, into a buffer too large for the cache, as a
// row group's key text is.
func BenchmarkAppendInt(b *testing.B) {
	buf := make([]byte, 0, 64<<20)
	for _, bc := range []struct {
		name   string
		append func([]byte, int64) []byte
	}{
		{"strconv", func(b []byte, x int64) []byte { return strconv.AppendInt(b, x, 10) }},
		{"swar", appendInt},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf = buf[:0]
			for i := range b.N {
				if len(buf) > cap(buf)-32 {
					buf = buf[:0]
				}
				buf = bc.append(buf, 1767229737488+int64(i)*7919)
			}
		})
	}
}
