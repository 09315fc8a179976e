package ingest

import (
	"encoding/binary"
	"math/bits"

	"github.com/fpdedup/fpdedup/fpstore"
)

// xxh3Patched is XXH3-128 (xxh3.Hash128, as Hash.Sum takes it) of span
// with every byte from replaced by to, for 17 to 128 bytes, computed
// without writing the patched bytes anywhere: each word is patched in a
// register as it is loaded.
//
// Why: a key of adjacent csv columns joined by another separator (--key
// 1,2,3 --key-sep :, the usual recipe) copied with its delimiters patched
// byte by byte would be hashed by loads of words spanning those fresh
// stores, which the CPU cannot forward from its store buffer: each such
// load waits for the stores to reach the cache, and a ':' key would hash
// several times slower than the same bytes read in place. The steps and constants are those of XXH3's
// 17-128 byte path (zeebo/xxh3's hashAny128, the reference's
// XXH3_len_17to128_128b with the default secret); FuzzXXH3Patched and the
// Keyer fuzz targets check it against the library.
func xxh3Patched(span []byte, from, to byte) fpstore.Fingerprint {
	l := uint64(len(span))
	fromW := uint64(from) * lsb
	diff := uint64(from ^ to)
	word := func(i uint64) uint64 {
		w := binary.LittleEndian.Uint64(span[i : i+8])
		return w ^ zeroBytes(w^fromW)>>7*diff
	}
	// (l-1)/32+1 rounds, the innermost first, unrolled (a loop is slower on
	// the 33-byte keys of BenchmarkXXH3Patched).
	lo, hi := l*xxhPrime64_1, uint64(0)
	if l > 32 {
		if l > 64 {
			if l > 96 {
				lo, hi = xxhRound(lo, hi, word(48), word(56), word(l-64), word(l-56), 12)
			}
			lo, hi = xxhRound(lo, hi, word(32), word(40), word(l-48), word(l-40), 8)
		}
		lo, hi = xxhRound(lo, hi, word(16), word(24), word(l-32), word(l-24), 4)
	}
	lo, hi = xxhRound(lo, hi, word(0), word(8), word(l-16), word(l-8), 0)
	hi, lo = lo*xxhPrime64_1+hi*xxhPrime64_4+l*xxhPrime64_2, hi+lo
	return fpstore.Fingerprint{Hi: -xxh3Avalanche(hi), Lo: xxh3Avalanche(lo)}
}

// The XXH3 constants the 17-128 byte path uses: its primes and the first
// 128 bytes of the default secret, as little-endian words.
const (
	xxhPrime64_1 = 11400714785074694791
	xxhPrime64_2 = 14029467366897019727
	xxhPrime64_4 = 9650029242287828579
)

var xxhKey = [16]uint64{
	0xbe4ba423396cfeb8, 0x1cad21f72c81017c, 0xdb979083e96dd4de, 0x1f67b3b7a4a44072,
	0x78e5c0cc4ee679cb, 0x2172ffcc7dd05a82, 0x8e2443f7744608b8, 0x4c263a81e69035e0,
	0xcb00c391bb52283c, 0xa32e531b8b65d088, 0x4ef90da297486471, 0xd8acdea946ef1938,
	0x3f349ce33f76faa8, 0x1d4f0bc7c7bbdcf9, 0x3159b4cd4be0518a, 0x647378d9c97e9fc8,
}

// xxhRound mixes the front words i0, i1 and the back words b0, b1 into the
// accumulator, keyed by the secret's words k to k+3.
func xxhRound(lo, hi, i0, i1, b0, b1 uint64, k int) (uint64, uint64) {
	hi += mulFold64(b0^xxhKey[k+2], b1^xxhKey[k+3])
	hi ^= i0 + i1
	lo += mulFold64(i0^xxhKey[k], i1^xxhKey[k+1])
	lo ^= b0 + b1
	return lo, hi
}

func mulFold64(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

func xxh3Avalanche(x uint64) uint64 {
	x ^= x >> 37
	x *= 0x165667919e3779f9
	return x ^ x>>32
}
