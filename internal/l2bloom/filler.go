package l2bloom

// Filler sets the bits of keys in the bitmaps of some of a layout's
// shards. The bits of one key land at random in a shard, so setting them
// as the keys come misses the cache at every bit once the bitmaps outgrow
// it; a Filler gathers each shard's offsets in a small buffer first and
// sets a buffer's worth at a time, within one shard's bitmap
// (BenchmarkFiller: about twice as fast as setting them one by one for 16
// shards of 8 MiB).
type Filler struct {
	loc  Locator
	slot []int32    // a shard's place in maps, -1: not filled
	maps [][]byte   // the bitmaps, in SETBIT order
	bufs [][]uint64 // offsets not yet set, by place
	keys []int64    // keys added, by place
}

// fillerBuffer is the offsets a shard's buffer holds: 128 KiB, so that the
// buffers of a few hundred shards stay small beside their bitmaps.
const fillerBuffer = 16 << 10

// NewFiller fills maps[i] as shard shards[i]'s bitmap (each ShardBytes
// long), from keys added with Add; call Flush before reading them.
func NewFiller(l Layout, shards []uint64, maps [][]byte) *Filler {
	f := &Filler{loc: l.Locator(), slot: make([]int32, l.Shards), maps: maps,
		bufs: make([][]uint64, len(shards)), keys: make([]int64, len(shards))}
	for i := range f.slot {
		f.slot[i] = -1
	}
	for i, s := range shards {
		f.slot[s] = int32(i)
		f.bufs[i] = make([]uint64, 0, fillerBuffer)
	}
	return f
}

// Wants reports whether the fingerprint with this hi half falls in a
// shard being filled. Small enough to be inlined in a scan's loop, where
// most keys belong to other shards and cost only this test.
func (f *Filler) Wants(hi uint64) bool { return f.slot[f.loc.Shard(hi)] >= 0 }

// Add sets the bits of the fingerprint (hi, lo) when its shard is one
// being filled.
func (f *Filler) Add(hi, lo uint64) {
	if i := f.slot[f.loc.Shard(hi)]; i >= 0 {
		f.add(i, hi, lo)
	}
}

func (f *Filler) add(i int32, hi, lo uint64) {
	f.keys[i]++
	b := f.bufs[i]
	if len(b)+f.loc.k > cap(b) {
		f.flush(int(i))
		b = f.bufs[i]
	}
	n := len(b)
	b = b[:n+f.loc.k]
	f.loc.Bits(hi, lo, b[n:])
	f.bufs[i] = b
}

func (f *Filler) flush(i int) {
	b := f.maps[i]
	for _, p := range f.bufs[i] {
		Set(b, p)
	}
	f.bufs[i] = f.bufs[i][:0]
}

// Flush sets the bits still buffered.
func (f *Filler) Flush() {
	for i := range f.bufs {
		f.flush(i)
	}
}

// Keys is the number of keys added to the i-th shard being filled.
func (f *Filler) Keys(i int) int64 { return f.keys[i] }
