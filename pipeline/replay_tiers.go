package pipeline

import (
	"fmt"
	"math"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/l2bloom"
)

// The simulated online tiers of Replay, and the hash derivations that
// place a key in them. Every position comes from the key's 128-bit
// fingerprint (hi, lo): XXH3-128 of the key bytes by default (what
// `printf %s KEY | xxh128sum` prints, hi first), or the first 128 bits of
// SHA-256 with --hash sha256, so a team can compute any key's positions in
// a line of its own code:
//
//	L1 bit        lo mod SIZE
//	L2 shard      hi mod N
//	L2 bit j      (lo + j·hi) mod 2^64 mod M,   j = 0 … K-1, in that shard
//
// The L2 bits are Kirsch–Mitzenmacher double hashing (Guava's
// MURMUR128_MITZ_64 is the same with murmur3's halves and the sign bit
// cleared). The name of this derivation is ReplayHashScheme.
const ReplayHashScheme = "fp128-km: L1 bit = lo mod SIZE; L2 shard = hi mod N; L2 bit j = (lo + j*hi) mod 2^64 mod M, j = 0..K-1"

// BloomFormula is the textbook false-positive rate of a bloom filter of m
// bits holding n keys with k hash functions: (1 - e^(-kn/m))^k.
func BloomFormula(n, m float64, k int) float64 { return l2bloom.Formula(n, m, k) }

// fillRate follows BloomFormula as keys are added one at a time, without
// an exp or a pow an event: 1 - e^(-kn/m) is 1 - q with q multiplied by
// e^(-k/m) at each key (rounding adds ~n·2^-53 relatively), and the k-th
// power is k products.
type fillRate struct {
	q, step float64
	k       int
}

func newFillRate(m uint64, k int) fillRate {
	return fillRate{q: 1, step: math.Exp(-float64(k) / float64(m)), k: k}
}

func (r *fillRate) add()   { r.q *= r.step }
func (r *fillRate) reset() { r.q = 1 }

// rate is the formula at the current fill.
func (r *fillRate) rate() float64 {
	p := 1 - r.q
	f := p
	for i := 1; i < r.k; i++ {
		f *= p
	}
	return f
}

// l1Bloom is the per-process bloom: SIZE bits, one hash, emptied at every
// window boundary. Emptying clears the words set in the window when they
// are few (a 1 s TTL means 86,400 windows a day), all of them otherwise.
type l1Bloom struct {
	mem     []byte
	words   []uint64
	mod     l2bloom.Modulo
	touched []uint32 // words set in this window, while not full
	full    bool     // too many to list: clear every word
	n       uint64   // keys added in this window
	rate    fillRate
	peak    uint64 // the most keys a window held
}

func newL1Bloom(bits uint64) (*l1Bloom, error) {
	words := (bits + 63) / 64
	if words > math.MaxUint32 {
		return nil, fmt.Errorf("an L1 of %d bits is too large (at most 2^38)", bits)
	}
	mem, err := hugemem.Alloc(int(words * 8))
	if err != nil {
		return nil, fmt.Errorf("cannot allocate the L1 bloom (%d bits): %w", bits, err)
	}
	return &l1Bloom{mem: mem, words: hugemem.Slice[uint64](mem), mod: l2bloom.NewModulo(bits), rate: newFillRate(bits, 1)}, nil
}

func (b *l1Bloom) free() {
	if b != nil {
		hugemem.Free(b.mem)
		b.mem, b.words = nil, nil
	}
}

func (b *l1Bloom) bytes() int64 { return int64(len(b.mem)) }

// bit is fp's word and mask.
func (b *l1Bloom) bit(fp fpstore.Fingerprint) (uint64, uint64) {
	i := b.mod.Of(fp.Lo)
	return i >> 6, 1 << (i & 63)
}

func (b *l1Bloom) set(w, mask uint64) {
	if b.words[w] == 0 && !b.full {
		b.touched = append(b.touched, uint32(w))
		if len(b.touched) > len(b.words)/8 {
			b.full, b.touched = true, b.touched[:0]
		}
	}
	b.words[w] |= mask
	b.n++
	b.rate.add()
	b.peak = max(b.peak, b.n)
}

// reset empties the bloom for a new window.
func (b *l1Bloom) reset() {
	if b.full {
		clear(b.words)
	} else {
		for _, w := range b.touched {
			b.words[w] = 0
		}
	}
	b.touched, b.full, b.n = b.touched[:0], false, 0
	b.rate.reset()
}

// l2Bloom is the sharded bloom: N shards of M bits, K bits a key in the
// key's shard, never emptied. The shards are one array (shard s is words
// s·wps … (s+1)·wps-1) in huge pages.
type l2Bloom struct {
	mem   []byte
	words []uint64
	loc   l2bloom.Locator
	m     uint64 // bits a shard
	wps   uint64 // words per shard
	k     int
	n     []uint64   // keys added, per shard
	rates []fillRate // per shard
}

// l2Bytes is the memory of an L2 of shards × bits.
func l2Bytes(shards, bits uint64) int64 { return int64(shards * ((bits + 63) / 64) * 8) }

func newL2Bloom(shards, bits uint64, k int) (*l2Bloom, error) {
	wps := (bits + 63) / 64
	mem, err := hugemem.Alloc(int(l2Bytes(shards, bits)))
	if err != nil {
		return nil, fmt.Errorf("cannot allocate the L2 bloom (%d shards of %d bits): %w", shards, bits, err)
	}
	b := &l2Bloom{mem: mem, words: hugemem.Slice[uint64](mem), loc: l2bloom.Layout{Shards: shards, Bits: bits, K: k}.Locator(), m: bits, wps: wps, k: k,
		n: make([]uint64, shards), rates: make([]fillRate, shards)}
	for s := range b.rates {
		b.rates[s] = newFillRate(bits, k)
	}
	return b, nil
}

func (b *l2Bloom) free() {
	if b != nil {
		hugemem.Free(b.mem)
		b.mem, b.words = nil, nil
	}
}

func (b *l2Bloom) bytes() int64 { return int64(len(b.mem)) }

// positions writes fp's K bits, as indexes into the whole array, to pos,
// and returns its shard.
func (b *l2Bloom) positions(fp fpstore.Fingerprint, pos []uint64) uint64 {
	s := b.loc.Shard(fp.Hi)
	base := s * b.wps * 64
	b.loc.Bits(fp.Hi, fp.Lo, pos)
	for j := range pos {
		pos[j] += base
	}
	return s
}

// testAndSet sets the bits at pos and reports whether they were all set
// already: the key is "seen" (and setting them changed nothing), or it is
// accepted and now added.
func (b *l2Bloom) testAndSet(pos []uint64) bool {
	all := true
	for _, p := range pos {
		w, mask := p>>6, uint64(1)<<(p&63)
		if b.words[w]&mask == 0 {
			all = false
			b.words[w] |= mask
		}
	}
	return all
}

// finalRate is the formula at the final fill, averaged over the shards:
// the rate the next day's first event would meet.
func (b *l2Bloom) finalRate() float64 {
	var sum float64
	for _, n := range b.n {
		sum += BloomFormula(float64(n), float64(b.m), b.k)
	}
	return sum / float64(len(b.n))
}
