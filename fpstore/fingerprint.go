package fpstore

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// Fingerprint is a 128-bit key fingerprint. Its order is that of an unsigned
// 128-bit big-endian number: Hi first, then Lo, the order of their hex. In an index
// file it is stored as two little-endian uint64 (FORMAT.md "Fingerprint"), so a
// mapped vector of them is read as a []Fingerprint without copying.
type Fingerprint struct {
	Hi, Lo uint64
}

// Compare returns -1, 0 or +1 as a is below, equal to or above b.
func (a Fingerprint) Compare(b Fingerprint) int {
	switch {
	case a.Hi < b.Hi:
		return -1
	case a.Hi > b.Hi:
		return 1
	case a.Lo < b.Lo:
		return -1
	case a.Lo > b.Lo:
		return 1
	}
	return 0
}

// Less reports whether a sorts before b.
func (a Fingerprint) Less(b Fingerprint) bool {
	return a.Hi < b.Hi || (a.Hi == b.Hi && a.Lo < b.Lo)
}

// String gives the 32 lowercase hex digits that xxh128sum and
// `sha256sum | cut -c1-32` print for the same key.
func (a Fingerprint) String() string {
	return string(a.AppendHex(make([]byte, 0, 32)))
}

const hexDigits = "0123456789abcdef"

// AppendHex appends the 32-digit lowercase hex form to dst.
func (a Fingerprint) AppendHex(dst []byte) []byte {
	for s := 60; s >= 0; s -= 4 {
		dst = append(dst, hexDigits[(a.Hi>>uint(s))&0xf])
	}
	for s := 60; s >= 0; s -= 4 {
		dst = append(dst, hexDigits[(a.Lo>>uint(s))&0xf])
	}
	return dst
}

// ErrBadHex is returned for text that is not a 32-digit hex fingerprint.
var ErrBadHex = errors.New("not a 32-digit hex fingerprint")

// ParseHex reads a fingerprint from exactly 32 hex digits (either case). A
// 64-digit SHA-256 hex digest is accepted too and cut to its first 128 bits,
// as online systems that store whole digests are compared on those.
func ParseHex(b []byte) (Fingerprint, error) {
	if len(b) != 32 && len(b) != 64 {
		return Fingerprint{}, fmt.Errorf("%w: %d characters", ErrBadHex, len(b))
	}
	var raw [16]byte
	if _, err := hex.Decode(raw[:], b[:32]); err != nil {
		return Fingerprint{}, fmt.Errorf("%w: %v", ErrBadHex, err)
	}
	if len(b) == 64 {
		var rest [16]byte
		if _, err := hex.Decode(rest[:], b[32:]); err != nil {
			return Fingerprint{}, fmt.Errorf("%w: %v", ErrBadHex, err)
		}
	}
	return FromBytes(raw[:]), nil
}

// FromBytes reads the first 16 bytes of b as a big-endian 128-bit number.
func FromBytes(b []byte) Fingerprint {
	_ = b[15]
	var f Fingerprint
	for i := 0; i < 8; i++ {
		f.Hi = f.Hi<<8 | uint64(b[i])
		f.Lo = f.Lo<<8 | uint64(b[8+i])
	}
	return f
}

// bits returns the n bits (n <= 64) starting at bit position start (0 = most
// significant) as an unsigned number; bits past position 127 read as zero.
func (a Fingerprint) bits(start, n uint) uint64 {
	if n == 0 {
		return 0
	}
	var top uint64
	switch {
	case start == 0:
		top = a.Hi
	case start < 64:
		top = a.Hi<<start | a.Lo>>(64-start)
	case start < 128:
		top = a.Lo << (start - 64)
	}
	return top >> (64 - n)
}
