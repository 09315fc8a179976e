package pipeline

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
)

// blockedBloom is a cache-line blocked bloom filter over fingerprints: a
// key sets bloomK bits in one 512-bit block, so a probe is one cache miss
// (DESIGN "Where the sharded bloom pre-filter pays"). The block comes from
// fp.Lo by multiply-shift; the bit positions from fp.Hi above the bits that
// choose a shard. Not safe for concurrent use: one shard owner has one.
type blockedBloom struct {
	mem    []byte
	blocks [][8]uint64
	keys   int // inserted
}

const (
	bloomK = 7
	// bloomBitsPerKey at capacity: ~12 bits (1.5 bytes) a key gives a
	// blocked-bloom false-positive rate of about 0.5% (bloomFPR).
	bloomBitsPerKey = 12
)

func newBlockedBloom(capacity int) (*blockedBloom, error) {
	n := max((capacity*bloomBitsPerKey+511)/512, 1)
	mem, err := hugemem.Alloc(n * 64)
	if err != nil {
		return nil, fmt.Errorf("cannot allocate the pre-filter: %w", err)
	}
	return &blockedBloom{mem: mem, blocks: hugemem.Slice[[8]uint64](mem)}, nil
}

func (b *blockedBloom) free() { hugemem.Free(b.mem) }

// capacity is the key count the filter was sized for.
func (b *blockedBloom) capacity() int { return len(b.blocks) * 512 / bloomBitsPerKey }

func (b *blockedBloom) block(fp fpstore.Fingerprint) *[8]uint64 {
	hi, _ := bits.Mul64(fp.Lo, uint64(len(b.blocks)))
	return &b.blocks[hi]
}

func (b *blockedBloom) add(fp fpstore.Fingerprint) {
	blk := b.block(fp)
	h := bloomBits(fp)
	for k := 0; k < bloomK; k++ {
		bit := h & 511
		blk[bit>>6] |= 1 << (bit & 63)
		h >>= 9
	}
	b.keys++
}

// bloomBits gives 64 bits for the 7 9-bit positions: Hi without its low
// byte (which picks shards) and the low byte of Lo (the block index comes
// from Lo's high bits).
func bloomBits(fp fpstore.Fingerprint) uint64 { return fp.Hi>>8 | fp.Lo<<56 }

func (b *blockedBloom) mayContain(fp fpstore.Fingerprint) bool {
	blk := b.block(fp)
	h := bloomBits(fp)
	for k := 0; k < bloomK; k++ {
		bit := h & 511
		if blk[bit>>6]&(1<<(bit&63)) == 0 {
			return false
		}
		h >>= 9
	}
	return true
}

// bloomFPR is the blocked-bloom formula at a given fill: the keys per block
// are Poisson with mean λ = keys/blocks, and a block holding i keys lets an
// absent key through with probability (1-(1-1/512)^(k·i))^k.
func bloomFPR(keys, blocks int) float64 {
	if blocks == 0 {
		return 1
	}
	lambda := float64(keys) / float64(blocks)
	var sum, p float64
	p = math.Exp(-lambda)
	for i := 0; i < 4*int(lambda)+64; i++ {
		if i > 0 {
			p *= lambda / float64(i)
		}
		sum += p * math.Pow(1-math.Pow(1-1.0/512, float64(bloomK*i)), bloomK)
	}
	return sum
}
