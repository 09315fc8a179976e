package reconciletest

import (
	"encoding/hex"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RefBloom is the L2 bloom's reference, written here from DESIGN's words and not from
// the product's code: shard = hi mod N; bit j = (lo + j·hi) mod 2^64 mod M
// (uint64 arithmetic wraps mod 2^64); bit b is Redis bit offset b, the
// high bit of byte b/8 first.
type RefBloom struct {
	Shards, M uint64   // the layout: shards, bits a shard
	K         int      // bits a key
	Bytes     [][]byte // each shard's bytes, as Redis holds them (none: Places alone)
}

// NewRefBloom is an empty reference of the layout.
func NewRefBloom(shards, m uint64, k int) *RefBloom {
	b := &RefBloom{Shards: shards, M: m, K: k}
	for range shards {
		b.Bytes = append(b.Bytes, make([]byte, (m+7)/8))
	}
	return b
}

// Places are fp's shard and bit offsets.
func (b *RefBloom) Places(fp [2]uint64) (uint64, []uint64) {
	var pos []uint64
	for j := range uint64(b.K) {
		pos = append(pos, (fp[1]+j*fp[0])%b.M)
	}
	return fp[0] % b.Shards, pos
}

// Add sets fp's bits.
func (b *RefBloom) Add(fp [2]uint64) {
	s, pos := b.Places(fp)
	for _, p := range pos {
		b.Bytes[s][p/8] |= 0x80 >> (p % 8)
	}
}

// Has reports whether fp's bits are all set.
func (b *RefBloom) Has(fp [2]uint64) bool {
	s, pos := b.Places(fp)
	for _, p := range pos {
		if b.Bytes[s][p/8]&(0x80>>(p%8)) == 0 {
			return false
		}
	}
	return true
}

// Ones is the bits set in shard s.
func (b *RefBloom) Ones(s int) int64 {
	var n int
	for _, c := range b.Bytes[s] {
		n += bits.OnesCount8(c)
	}
	return int64(n)
}

// BloomTruth builds an index of n keys (the default hash, xxh3: a bloom
// takes any) and returns its fingerprints, as dump prints them.
func BloomTruth(t *testing.T, dir string, n int) (hexes []string, fps [][2]uint64) {
	t.Helper()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "event-%d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys.txt"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	Fpdedup(t, dir, nil, "build", "-o", "truth.fpx", "keys.txt").Want(t, 0)
	hexes = Dump(t, dir, "truth.fpx")
	for _, h := range hexes {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 16 {
			t.Fatalf("dump printed %q", h)
		}
		var fp [2]uint64
		for i := range 8 {
			fp[0] = fp[0]<<8 | uint64(b[i])
			fp[1] = fp[1]<<8 | uint64(b[8+i])
		}
		fps = append(fps, fp)
	}
	if len(fps) != n {
		t.Fatalf("%d fingerprints, want %d", len(fps), n)
	}
	return hexes, fps
}
