package l2bloom

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFillerAgainstReference: the bitmaps a Filler fills for some shards
// equal the reference's (refBits, bits set one by one with SETBIT's
// order written out here), with enough keys to flush every buffer many
// times; the shards not asked for are left alone.
func TestFillerAgainstReference(t *testing.T) {
	for _, c := range []struct {
		l      Layout
		shards []uint64
		keys   int
	}{
		{Layout{16, 1 << 16, 3}, []uint64{0, 5, 15}, 200_000},
		{Layout{3, 1000003, 7}, []uint64{2, 0}, 50_000},
		{Layout{1, 77, 1}, []uint64{0}, 1000},
	} {
		r := rand.New(rand.NewPCG(3, uint64(c.keys)))
		maps := make([][]byte, len(c.shards))
		ref := make([][]byte, len(c.shards))
		want := make([]int64, len(c.shards))
		for i := range maps {
			maps[i] = make([]byte, c.l.ShardBytes())
			ref[i] = make([]byte, c.l.ShardBytes())
		}
		f := NewFiller(c.l, c.shards, maps)
		for range c.keys {
			fp := fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
			f.Add(fp.Hi, fp.Lo)
			s, pos := refBits(c.l, fp)
			if f.Wants(fp.Hi) != slices.Contains(c.shards, s) {
				t.Fatalf("%v: Wants(%x) = %v for shard %d", c.l, fp.Hi, f.Wants(fp.Hi), s)
			}
			for i, t := range c.shards {
				if t == s {
					want[i]++
					for _, p := range pos {
						ref[i][p/8] |= 1 << (7 - p%8)
					}
				}
			}
		}
		f.Flush()
		for i, s := range c.shards {
			if !bytes.Equal(maps[i], ref[i]) {
				t.Fatalf("%v: shard %d's bitmap differs from the reference", c.l, s)
			}
			if f.Keys(i) != want[i] {
				t.Fatalf("%v: shard %d: %d keys, want %d", c.l, s, f.Keys(i), want[i])
			}
		}
	}
}

// BenchmarkFiller: 1M keys into 16 shards of 8 MiB, through a Filler and
// bit by bit as they come.
func BenchmarkFiller(b *testing.B) {
	l := Layout{16, 1 << 26, 3}
	r := rand.New(rand.NewPCG(1, 2))
	fps := make([]fingerprint, 10<<20)
	for i := range fps {
		fps[i] = fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
	}
	all := make([]uint64, l.Shards)
	maps := make([][]byte, l.Shards)
	mem := make([]byte, int64(l.Shards)*l.ShardBytes()) // one block, as the rebuild's
	for i := range all {
		all[i] = uint64(i)
		maps[i] = mem[int64(i)*l.ShardBytes() : int64(i+1)*l.ShardBytes()]
	}
	b.Run("filler", func(b *testing.B) {
		for b.Loop() {
			f := NewFiller(l, all, maps)
			for _, fp := range fps {
				f.Add(fp.Hi, fp.Lo)
			}
			f.Flush()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(fps)), "ns/key")
	})
	b.Run("direct", func(b *testing.B) {
		loc := l.Locator()
		pos := make([]uint64, l.K)
		for b.Loop() {
			for _, fp := range fps {
				loc.Bits(fp.Hi, fp.Lo, pos)
				m := maps[loc.Shard(fp.Hi)]
				for _, p := range pos {
					Set(m, p)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(fps)), "ns/key")
	})
}
