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
// Why it exists: a key of adjacent csv columns joined by another separator
// (--key 1,2,3 --key-sep :, the usual recipe) was copied and its
// delimiters patched byte by byte, and the hash then loaded words spanning
// those fresh stores, which the CPU cannot forward from its store buffer:
// each such load waits for the stores to reach the cache. dedup --format
// csv --key 1,2,3 took 738 ms with ':' and 655 ms with ',' (no copy), 7
// shuffled runs; pprof put 20% of its CPU in hashAny128 against 5% for the
// same bytes in lines format. The steps and constants are those of XXH3's
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
	lo, hi := l*xxhPrime64_1, uint64(0)
	if l > 32 {
		if l > 64 {
			if l > 96 {
				in8, in7 := word(l-64), word(l-56)
				i6, i7 := word(48), word(56)
				hi += mulFold64(in8^xxhKey[14], in7^xxhKey[15])
				hi ^= i6 + i7
				lo += mulFold64(i6^xxhKey[12], i7^xxhKey[13])
				lo ^= in8 + in7
			}
			in6, in5 := word(l-48), word(l-40)
			i4, i5 := word(32), word(40)
			hi += mulFold64(in6^xxhKey[10], in5^xxhKey[11])
			hi ^= i4 + i5
			lo += mulFold64(i4^xxhKey[8], i5^xxhKey[9])
			lo ^= in6 + in5
		}
		in4, in3 := word(l-32), word(l-24)
		i2, i3 := word(16), word(24)
		hi += mulFold64(in4^xxhKey[6], in3^xxhKey[7])
		hi ^= i2 + i3
		lo += mulFold64(i2^xxhKey[4], i3^xxhKey[5])
		lo ^= in4 + in3
	}
	in2, in1 := word(l-16), word(l-8)
	i0, i1 := word(0), word(8)
	hi += mulFold64(in2^xxhKey[2], in1^xxhKey[3])
	hi ^= i0 + i1
	lo += mulFold64(i0^xxhKey[0], i1^xxhKey[1])
	lo ^= in2 + in1
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

func mulFold64(x, y uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return hi ^ lo
}

func xxh3Avalanche(x uint64) uint64 {
	x ^= x >> 37
	x *= 0x165667919e3779f9
	return x ^ x>>32
}
