package rbloom

import (
	"encoding/binary"
	"math/bits"
)

// Seed64 is the seed of an item's first hash in a filter with OptForce64
// (every filter BF.RESERVE or BF.ADD makes); the second hash is seeded with
// the first.
const Seed64 = 0xc6a4a7935bd1e995

// Seed32 is the seed of the first hash in a filter without OptForce64 (one
// made by RedisBloom 1.x, or loaded from such a dump): 32-bit MurmurHash2,
// which the module still answers for such filters.
const Seed32 = 0x9747b28c

// Hash is the pair an item's bits derive from: bit i of a sub-filter is
// (A + i·B) mod M in uint64 arithmetic (Kirsch–Mitzenmacher double hashing),
// for i = 0 … hashes-1, M the sub-filter's modulus (Link.Modulus). One pair
// serves every sub-filter of a chain, so an item is hashed once per
// evaluation however many sub-filters it is tested against.
type Hash struct{ A, B uint64 }

// HashItem is the pair the module computes for item in a filter with these
// options: MurmurHash64A when OptForce64 is set, the legacy 32-bit
// MurmurHash2 (its results widened to uint64) otherwise.
func HashItem(options uint32, item []byte) Hash {
	if options&OptForce64 != 0 {
		a := Murmur64A(item, Seed64)
		return Hash{a, Murmur64A(item, a)}
	}
	a := Murmur2(item, Seed32)
	return Hash{uint64(a), uint64(Murmur2(item, a))}
}

// Murmur64A is Austin Appleby's MurmurHash64A (public domain): the data read
// as little-endian 64-bit words, the tail bytes folded in low byte first.
// Written from the published algorithm; TestMurmur64A pins it to the
// module through BF.EXISTS and to fixed vectors.
func Murmur64A(data []byte, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ uint64(len(data))*m
	for len(data) >= 8 {
		k := binary.LittleEndian.Uint64(data)
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
		data = data[8:]
	}
	if len(data) > 0 {
		for i := len(data) - 1; i >= 0; i-- {
			h ^= uint64(data[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// Murmur2 is Austin Appleby's 32-bit MurmurHash2 (public domain), the hash
// of filters without OptForce64.
func Murmur2(data []byte, seed uint32) uint32 {
	const m = 0x5bd1e995
	const r = 24
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	if len(data) > 0 {
		for i := len(data) - 1; i >= 0; i-- {
			h ^= uint32(data[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// Bit is the offset of bit i of h in a sub-filter of modulus mod, and the
// module's own order within a byte: offset p is bit p%8 of byte p/8
// counting from the least significant (the opposite of SETBIT's order, in
// which l2bloom stores its bitmaps).
func (h Hash) Bit(i uint32, mod uint64) uint64 { return (h.A + uint64(i)*h.B) % mod }

// isSet reports whether bit p of a sub-filter's bytes is set, in the
// module's order (least significant bit first).
func isSet(b []byte, p uint64) bool { return b[p>>3]&(1<<(p&7)) != 0 }

// setBit sets bit p, answering 1 if it was not set, else 0.
func setBit(b []byte, p uint64) uint64 {
	x := b[p>>3]
	b[p>>3] = x | 1<<(p&7)
	return uint64(^x>>(p&7)) & 1
}

// ones counts the bits set in b.
func ones(b []byte) uint64 {
	var c int
	for len(b) >= 8 {
		c += bits.OnesCount64(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for _, x := range b {
		c += bits.OnesCount8(x)
	}
	return uint64(c)
}
