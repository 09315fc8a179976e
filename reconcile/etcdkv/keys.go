package etcdkv

import (
	"fmt"

	"github.com/fpdedup/fpdedup/fpstore"
)

// Key widths: the online side's full SHA-256 in hex (the default), or its
// first 128 bits.
const (
	Hex64 = 64
	Hex32 = 32
)

// A KeyFormat is how fingerprints are spelled as keys: Prefix followed by
// exactly Hex lowercase hex digits, the first 32 of which are the
// fingerprint (the index holds SHA-256's first 16 bytes).
type KeyFormat struct {
	Prefix string
	Hex    int // Hex64 or Hex32; 0 means Hex64
}

// width is Hex with its default.
func (f KeyFormat) width() int {
	if f.Hex == 0 {
		return Hex64
	}
	return f.Hex
}

// Check says whether the format can be used.
func (f KeyFormat) Check() error {
	if w := f.width(); w != Hex64 && w != Hex32 {
		return fmt.Errorf("etcd key format: hex=%d: the width must be 64 (a whole SHA-256) or 32 (its first 128 bits)", f.Hex)
	}
	return nil
}

// Parse reads key as Prefix<hex>: ok is false for a key that is not under
// Prefix or whose rest is not exactly the width in lowercase hex.
func (f KeyFormat) Parse(key []byte) (fp fpstore.Fingerprint, ok bool) {
	p := f.Prefix
	if len(key) != len(p)+f.width() || string(key[:len(p)]) != p {
		return fp, false
	}
	h := key[len(p):]
	for i := 0; i < 16; i++ {
		v, ok := hexNibble(h[i])
		if !ok {
			return fp, false
		}
		fp.Hi = fp.Hi<<4 | v
	}
	for i := 16; i < 32; i++ {
		v, ok := hexNibble(h[i])
		if !ok {
			return fp, false
		}
		fp.Lo = fp.Lo<<4 | v
	}
	for _, c := range h[32:] {
		if _, ok := hexNibble(c); !ok {
			return fp, false
		}
	}
	return fp, true
}

// hexNibble reads one lowercase hex digit: upper case is refused, since
// "A" sorts between "9" and "a" and would break key order.
func hexNibble(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	}
	return 0, false
}

// Append appends Prefix and the hex of digest (at least Hex/2 bytes: the
// whole SHA-256 for Hex64) to dst: the key Create writes.
func (f KeyFormat) Append(dst []byte, digest []byte) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, f.Prefix...)
	for _, c := range digest[:f.width()/2] {
		dst = append(dst, digits[c>>4], digits[c&15])
	}
	return dst
}

// End is the first key after every key under Prefix (etcd's range end for
// a prefix); "\x00" (the whole keyspace) when Prefix is empty.
func (f KeyFormat) End() string {
	return prefixEnd(f.Prefix)
}

func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
