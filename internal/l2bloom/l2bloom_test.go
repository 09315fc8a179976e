package l2bloom

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// fingerprint is a 128-bit fingerprint, hi and lo.
type fingerprint struct{ Hi, Lo uint64 }

// refBits is the scheme written out with big integers, as DESIGN words it:
// bit j = (lo + j·hi) mod 2^64 mod M; shard = hi mod N.
func refBits(l Layout, fp fingerprint) (shard uint64, pos []uint64) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	hi, lo := new(big.Int).SetUint64(fp.Hi), new(big.Int).SetUint64(fp.Lo)
	m := new(big.Int).SetUint64(l.Bits)
	for j := range l.K {
		v := new(big.Int).Mul(hi, big.NewInt(int64(j)))
		v.Add(v, lo)
		v.Mod(v, two64)
		v.Mod(v, m)
		pos = append(pos, v.Uint64())
	}
	return new(big.Int).Mod(hi, new(big.Int).SetUint64(l.Shards)).Uint64(), pos
}

func TestLocatorAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, l := range []Layout{
		{16, 1 << 33, 3}, {16, 8 << 30, 3}, {3, 1000003, 7}, {1, 1, 1}, {1 << 20, 1 << 43, 32}, {5, 3 << 32, 2},
	} {
		loc := l.Locator()
		pos := make([]uint64, l.K)
		for i := range 2000 {
			fp := fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
			if i == 0 {
				fp = fingerprint{Hi: math.MaxUint64, Lo: math.MaxUint64}
			}
			wantShard, wantPos := refBits(l, fp)
			loc.Bits(fp.Hi, fp.Lo, pos)
			if s := loc.Shard(fp.Hi); s != wantShard {
				t.Fatalf("%v: %v: shard %d, want %d", l, fp, s, wantShard)
			}
			for j := range pos {
				if pos[j] != wantPos[j] || pos[j] >= l.Bits {
					t.Fatalf("%v: %v: bit %d at %d, want %d", l, fp, j, pos[j], wantPos[j])
				}
			}
		}
	}
}

func TestKeysAndSegments(t *testing.T) {
	tm, err := ParseTemplate("l2:bf:{*}")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		l        Layout
		shard    uint64
		seg      uint64
		key      string
		segs     uint64
		segBytes int64
	}{
		{Layout{16, 1 << 33, 3}, 15, 1, "l2:bf:{15}:1", 2, 1 << 29},
		{Layout{16, 1 << 32, 3}, 0, 0, "l2:bf:{0}", 1, 1 << 29},
		{Layout{4, 1<<32 + 9, 3}, 2, 1, "l2:bf:{2}:1", 2, 2},
		{Layout{4, 1000, 3}, 3, 0, "l2:bf:{3}", 1, 125},
		{Layout{4, 1001, 3}, 3, 0, "l2:bf:{3}", 1, 126},
	} {
		if k := c.l.Key(tm, c.shard, c.seg); k != c.key {
			t.Errorf("%v: key of %d/%d is %q, want %q", c.l, c.shard, c.seg, k, c.key)
		}
		if n := c.l.Segments(); n != c.segs {
			t.Errorf("%v: %d segments, want %d", c.l, n, c.segs)
		}
		if b := c.l.SegmentBytes(c.seg); b != c.segBytes {
			t.Errorf("%v: segment %d has %d bytes, want %d", c.l, c.seg, b, c.segBytes)
		}
	}
	for _, bad := range []string{"l2:bf", "l2:*:*", ""} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("template %q accepted", bad)
		}
	}
}

// TestRedisBitOrder: bit 0 is the high bit of byte 0, as SETBIT key 0 1
// makes "\x80"; bit 9 is 0x40 of byte 1.
func TestRedisBitOrder(t *testing.T) {
	b := make([]byte, 2)
	Set(b, 0)
	Set(b, 9)
	if b[0] != 0x80 || b[1] != 0x40 {
		t.Fatalf("SETBIT order: % x", b)
	}
	for off := range uint64(16) {
		if IsSet(b, off) != (off == 0 || off == 9) {
			t.Fatalf("IsSet(%d) = %v", off, IsSet(b, off))
		}
	}
}

// TestCount: the bits set below n, whole words, bytes and a last partial
// byte alike; bits at n and past it do not count.
func TestCount(t *testing.T) {
	b := make([]byte, 21)
	for _, off := range []uint64{0, 7, 8, 63, 64, 100, 161, 162, 163, 167} {
		Set(b, off)
	}
	for _, c := range []struct {
		n    uint64
		want int64
	}{{0, 0}, {1, 1}, {8, 2}, {64, 4}, {65, 5}, {162, 7}, {163, 8}, {168, 10}} {
		if got := Count(b, c.n); got != c.want {
			t.Errorf("Count(b, %d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestBitsFor: the size it gives meets the rate, and one bit in a
// thousand less does not.
func TestBitsFor(t *testing.T) {
	for _, c := range []struct {
		n, shards uint64
		k         int
		fpr       float64
	}{
		{1e9, 16, 3, 0.01}, {1e6, 1, 7, 0.001}, {12345, 3, 1, 0.05}, {1e10, 16, 3, 1e-4},
	} {
		m := BitsFor(c.n, c.shards, c.k, c.fpr)
		per := float64(c.n) / float64(c.shards)
		if got := Formula(per, float64(m), c.k); got > c.fpr*(1+1e-9) {
			t.Errorf("%+v: %d bits give %g", c, m, got)
		}
		if got := Formula(per, float64(m)*0.999, c.k); got <= c.fpr {
			t.Errorf("%+v: %d bits are more than needed (%g at 0.999 of them)", c, m, got)
		}
	}
	if BitsFor(0, 16, 3, 0.01) != 0 || BitsFor(10, 16, 3, 0) != 0 {
		t.Error("BitsFor of nothing is not 0")
	}
}

func TestParseBits(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"2^33", 1 << 33, true}, {"1GiB", 8 << 30, true}, {"1M", 1e6, true}, {"1000003", 1000003, true},
		{"2^43", 1 << 43, true}, {"1TiB", 1 << 43, true},
		{"2^44", 0, false}, {"2TiB", 0, false}, {"0", 0, false}, {"2^", 0, false}, {"-1", 0, false}, {"x", 0, false},
	} {
		got, err := ParseBits(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseBits(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseBits(f *testing.F) {
	for _, s := range []string{"2^33", "1GiB", "1M", "9223372036854775807B", "2^-1", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBits(s)
		if err == nil && (b == 0 || b > MaxBits) {
			t.Fatalf("ParseBits(%q) = %d, out of bounds", s, b)
		}
		if err == nil {
			if (Layout{Shards: 1, Bits: b, K: 1}).Check() != nil {
				t.Fatalf("ParseBits(%q) = %d, which Check refuses", s, b)
			}
		}
	})
}
