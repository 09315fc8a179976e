package pipeline

import (
	"fmt"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
)

// blockedBloom is the bounded mode's filter over every fingerprint a
// shard has seen: fpstore's cache-line blocked bloom (one block, one cache
// miss a probe; the same bits and formula as a segment's filter), in
// huge-page memory outside the Go heap, sized here for the shard's key
// count. Not safe for concurrent use: one shard owner has one.
type blockedBloom struct {
	mem    []byte
	blocks [][8]uint64
	keys   int // inserted
}

// bloomBitsPerKey at capacity: 12 bits (1.5 bytes) a key, about 0.5%
// false positives by fpstore.BloomFPR; a segment's filter has 10, but a
// dedup answers "maybe seen" with disk reads, so fewer are worth a bit.
const bloomBitsPerKey = 12

func newBlockedBloom(capacity int) (*blockedBloom, error) {
	n := fpstore.BloomBlocks(capacity, bloomBitsPerKey)
	mem, err := hugemem.Alloc(n * 64)
	if err != nil {
		return nil, fmt.Errorf("cannot allocate the pre-filter: %w", err)
	}
	return &blockedBloom{mem: mem, blocks: hugemem.Slice[[8]uint64](mem)}, nil
}

func (b *blockedBloom) free() { hugemem.Free(b.mem) }

// capacity is the key count the filter was sized for.
func (b *blockedBloom) capacity() int {
	return len(b.blocks) * fpstore.BloomBlockBits / bloomBitsPerKey
}

func (b *blockedBloom) block(fp fpstore.Fingerprint) *[8]uint64 {
	return &b.blocks[fpstore.BloomBlock(fp, uint64(len(b.blocks)))]
}

func (b *blockedBloom) add(fp fpstore.Fingerprint) {
	fpstore.BloomAdd(b.block(fp), fp)
	b.keys++
}

func (b *blockedBloom) mayContain(fp fpstore.Fingerprint) bool {
	return fpstore.BloomTest(b.block(fp), fp)
}
