package ingest

import (
	"encoding/binary"
	"math/bits"
)

// appendUint and appendInt are strconv.AppendUint and AppendInt in base
// 10, eight digits at a time in one 64-bit word (SWAR): rendering Parquet
// integer keys with strconv was 11% of count's CPU and 10% of build's
// (profiles of both on the 10M reference events), most of the key columns'
// decoding after zstd.
func appendUint(b []byte, u uint64) []byte {
	if u < 1e8 {
		return appendUpTo8(b, uint32(u))
	}
	if u < 1e16 {
		b = appendUpTo8(b, uint32(u/1e8))
		return binary.LittleEndian.AppendUint64(b, eightDigits(uint32(u%1e8))|ascii0s)
	}
	top, rest := u/1e16, u%1e16
	b = appendUpTo8(b, uint32(top))
	b = binary.LittleEndian.AppendUint64(b, eightDigits(uint32(rest/1e8))|ascii0s)
	return binary.LittleEndian.AppendUint64(b, eightDigits(uint32(rest%1e8))|ascii0s)
}

func appendInt(b []byte, x int64) []byte {
	if x < 0 {
		return appendUint(append(b, '-'), -uint64(x))
	}
	return appendUint(b, uint64(x))
}

const ascii0s = 0x3030303030303030 // '0' in each byte

// appendUpTo8 appends v < 10^8 without leading zeros.
func appendUpTo8(b []byte, v uint32) []byte {
	if v < 10 {
		return append(b, byte('0'+v))
	}
	x := eightDigits(v)
	lead := bits.TrailingZeros64(x) / 8 // the first byte is the first digit
	b = binary.LittleEndian.AppendUint64(b, (x|ascii0s)>>(8*lead))
	return b[:len(b)-lead]
}

// eightDigits is the 8 decimal digits of v < 10^8 (leading zeros
// included), a digit's value in each byte, most significant first in
// memory order (little-endian): v splits into two 4-digit halves in 32-bit
// lanes, each into 2-digit quarters in 16-bit lanes, each into digits, by
// multiply-and-shift divisions exact over the lanes' ranges
// (TestEightDigits checks them all).
func eightDigits(v uint32) uint64 {
	x := uint64(v/10000) | uint64(v%10000)<<32
	q := (x * 10486 >> 20) & 0x0000007F0000007F // /100 in each lane below 10^4
	x = q | (x-q*100)<<16
	q = (x * 103 >> 10) & 0x000F000F000F000F // /10 in each lane below 100
	return q | (x-q*10)<<8
}
