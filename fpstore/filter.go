package fpstore

import (
	"math"
	"math/bits"
)

// Segment filters are cache-line blocked bloom filters: a key sets
// BloomHashes bits in one 512-bit block, so a probe reads one cache line.
// Chosen over a binary fuse8 filter (xorfilter) because it builds several
// times faster, which keeps a build and a merge (which rebuilds every
// filter) near their floors, and a probe misses the cache once instead of
// three times. The price is space: more bits a key for a higher false
// positive rate than fuse8's (FORMAT.md, "Filter (blocked bloom)", "Why
// this filter", has the figures).
const (
	// BloomBlockBits is the block: one 64-byte cache line.
	BloomBlockBits = 512
	// BloomHashes is the bits set per key (k).
	BloomHashes = 6
	// bloomBitsPerKey sizes a segment's filter: ceil(count·10/512) blocks.
	bloomBitsPerKey = 10
)

// BloomBlocks is the number of blocks for n keys at bitsPerKey.
func BloomBlocks(n, bitsPerKey int) int {
	return max((n*bitsPerKey+BloomBlockBits-1)/BloomBlockBits, 1)
}

// BloomBlock picks a key's block among n: a multiply-shift of Lo, which is
// independent of the prefix bits (Hi's top) that chose the segment.
func BloomBlock(fp Fingerprint, n uint64) uint64 {
	hi, _ := bits.Mul64(fp.Lo, n)
	return hi
}

// bloomPositions mixes the whole fingerprint into the 9-bit positions
// (taken from the top of the product, where every input bit counts), so
// that neither a segment's shared prefix nor a dedup shard's low bits of Hi
// leave a position constant.
func bloomPositions(fp Fingerprint) uint64 {
	return (fp.Hi ^ bits.RotateLeft64(fp.Lo, 32)) * 0x9e3779b97f4a7c15
}

// BloomAdd sets fp's bits in its block.
func BloomAdd(blk *[8]uint64, fp Fingerprint) {
	h := bloomPositions(fp)
	for k := 0; k < BloomHashes; k++ {
		h = bits.RotateLeft64(h, 9)
		bit := h & 511
		blk[bit>>6] |= 1 << (bit & 63)
	}
}

// BloomTest reports whether fp's bits are all set in its block.
func BloomTest(blk *[8]uint64, fp Fingerprint) bool {
	h := bloomPositions(fp)
	for k := 0; k < BloomHashes; k++ {
		h = bits.RotateLeft64(h, 9)
		bit := h & 511
		if blk[bit>>6]&(1<<(bit&63)) == 0 {
			return false
		}
	}
	return true
}

// BloomFPR is the blocked-bloom formula at a given fill: the keys in a
// block are Poisson with mean λ = keys/blocks, and a block holding i keys
// lets an absent key through with probability (1-(1-1/512)^(k·i))^k.
func BloomFPR(keys, blocks int) float64 {
	if blocks == 0 || keys == 0 {
		return 0
	}
	lambda := float64(keys) / float64(blocks)
	var sum float64
	p := math.Exp(-lambda)
	for i := 0; i < 4*int(lambda)+64; i++ {
		if i > 0 {
			p *= lambda / float64(i)
		}
		sum += p * math.Pow(1-math.Pow(1-1.0/BloomBlockBits, float64(BloomHashes*i)), BloomHashes)
	}
	return sum
}
