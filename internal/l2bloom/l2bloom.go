// Package l2bloom is the one definition of the online L2 tier, a sharded
// bloom filter: which shard and which bits a fingerprint has, how a shard
// is stored in Redis (plain string keys, SETBIT order), and the rates and
// sizes of such a bloom. replay simulates the tier and reconcile audits and
// repairs the live one through it, so that both always agree on where a
// key's bits are.
//
// A fingerprint (hi, lo) goes to shard hi mod N; its bit j, for j = 0 …
// K-1, is (lo + j·hi) mod 2^64 mod M in that shard (the "fp128-km"
// scheme: Kirsch–Mitzenmacher double hashing on the fingerprint's halves).
package l2bloom

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/internal/units"
)

// Scheme names the position scheme in reports.
const Scheme = "fp128-km"

// The bounds of a layout.
const (
	MaxShards = 1 << 20
	MaxK      = 32
	MaxBits   = 1 << 43 // 1 TiB a shard
	// SegmentBits is the most bits one Redis string holds (512 MiB); a
	// larger shard is stored as several strings KEY:0, KEY:1, ….
	SegmentBits = 1 << 32
)

// Layout is a sharded bloom: Shards shards of Bits bits, K bits a key.
type Layout struct {
	Shards uint64
	Bits   uint64
	K      int
}

// Check refuses a layout out of bounds.
func (l Layout) Check() error {
	switch {
	case l.Shards == 0 || l.Shards > MaxShards:
		return fmt.Errorf("shards=%d: want 1 to %d", l.Shards, MaxShards)
	case l.Bits == 0 || l.Bits > MaxBits:
		return fmt.Errorf("bits=%d: want 1 bit to 1 TiB", l.Bits)
	case l.K < 1 || l.K > MaxK:
		return fmt.Errorf("k=%d: want 1 to %d hashes", l.K, MaxK)
	}
	return nil
}

// String is the layout as replay's --l2 takes it.
func (l Layout) String() string {
	return fmt.Sprintf("shards=%d,bits=%d,k=%d", l.Shards, l.Bits, l.K)
}

// Locator finds a fingerprint's shard and bits in a layout.
type Locator struct {
	shards, bits Modulo
	k            int
}

// Locator is the layout's position function.
func (l Layout) Locator() Locator {
	return Locator{shards: NewModulo(l.Shards), bits: NewModulo(l.Bits), k: l.K}
}

// Shard is the shard of the fingerprint (hi, lo).
func (p Locator) Shard(hi uint64) uint64 { return p.shards.Of(hi) }

// Bits writes the K bit offsets of the fingerprint (hi, lo) within its
// shard to pos (len(pos) is K).
func (p Locator) Bits(hi, lo uint64, pos []uint64) {
	h := lo
	for j := range pos {
		pos[j] = p.bits.Of(h)
		h += hi
	}
}

// Modulo is x mod m, a mask when m is a power of two (the usual sizes),
// where a 64-bit division would cost most of a lookup.
type Modulo struct{ m, mask uint64 }

// NewModulo is x mod m; m > 0.
func NewModulo(m uint64) Modulo {
	if m&(m-1) == 0 {
		return Modulo{m: m, mask: m - 1}
	}
	return Modulo{m: m}
}

// Of is x mod m.
func (d Modulo) Of(x uint64) uint64 {
	if d.mask != 0 || d.m == 1 {
		return x & d.mask
	}
	return x % d.m
}

// M is the modulus.
func (d Modulo) M() uint64 { return d.m }

// Segments is the number of Redis strings a shard is stored in.
func (l Layout) Segments() uint64 { return (l.Bits + SegmentBits - 1) / SegmentBits }

// SegmentBytes is the length of segment seg of a shard, in bytes: a whole
// 512 MiB but for the last, which holds the rest of the bits rounded up to
// a byte.
func (l Layout) SegmentBytes(seg uint64) int64 {
	bits := min(l.Bits-seg*SegmentBits, SegmentBits)
	return int64((bits + 7) / 8)
}

// ShardBytes is a shard's size in bytes, all segments together.
func (l Layout) ShardBytes() int64 { return int64((l.Bits + 7) / 8) }

// Template names the Redis keys of the shards: its one '*' is the shard
// number ("l2:bf:{*}" gives l2:bf:{0} … l2:bf:{N-1}; the braces make a
// Cluster hash tag, so a shard's segments share its slot).
type Template string

// ErrTemplate is a template without exactly one '*'.
var ErrTemplate = errors.New("a bloom key template holds exactly one '*', where the shard number goes (l2:bf:{*})")

// ParseTemplate checks a template.
func ParseTemplate(s string) (Template, error) {
	if strings.Count(s, "*") != 1 {
		return "", ErrTemplate
	}
	return Template(s), nil
}

// Key is the Redis key of segment seg of shard s: the template's key for a
// shard of one segment, KEY:seg for a shard of several.
func (l Layout) Key(t Template, s, seg uint64) string {
	k := strings.Replace(string(t), "*", strconv.FormatUint(s, 10), 1)
	if l.Segments() > 1 {
		k += ":" + strconv.FormatUint(seg, 10)
	}
	return k
}

// IsSet reports whether bit off of a Redis string is set, in SETBIT and
// GETBIT order: bit 0 is the high bit of byte 0.
func IsSet(b []byte, off uint64) bool { return b[off>>3]&(0x80>>(off&7)) != 0 }

// Set sets bit off of b, in SETBIT order.
func Set(b []byte, off uint64) { b[off>>3] |= 0x80 >> (off & 7) }

// Count is the number of bits set in b below bit n, in SETBIT order (the
// last byte of a shard may hold bits past M, which do not count).
func Count(b []byte, n uint64) int64 {
	var c int
	whole := b[:n/8]
	for len(whole) >= 8 {
		c += bits.OnesCount64(binary.LittleEndian.Uint64(whole))
		whole = whole[8:]
	}
	for _, x := range whole {
		c += bits.OnesCount8(x)
	}
	if rest := n % 8; rest > 0 {
		c += bits.OnesCount8(b[n/8] & byte(0xff<<(8-rest)))
	}
	return int64(c)
}

// Formula is the textbook false-positive rate of a bloom of m bits holding
// n keys with k hash functions: (1 - e^(-kn/m))^k.
func Formula(n, m float64, k int) float64 {
	if n <= 0 || m <= 0 {
		return 0
	}
	return math.Pow(-math.Expm1(-float64(k)*n/m), float64(k))
}

// BitsFor is the bits a shard needs for n keys spread over shards shards
// to meet the false-positive rate fpr with k hashes: the smallest m with
// Formula(n/shards, m, k) <= fpr, from m = -k·n / ln(1 - fpr^(1/k)).
func BitsFor(n, shards uint64, k int, fpr float64) uint64 {
	if n == 0 || shards == 0 || fpr <= 0 || fpr >= 1 || k < 1 {
		return 0
	}
	per := float64(n) / float64(shards)
	m := -float64(k) * per / math.Log1p(-math.Pow(fpr, 1/float64(k)))
	return uint64(math.Ceil(m))
}

// ParseShards reads a shard count.
func ParseShards(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > MaxShards {
		return 0, fmt.Errorf("shards=%s: want 1 to %d", s, MaxShards)
	}
	return n, nil
}

// ParseK reads the bits a key.
func ParseK(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxK {
		return 0, fmt.Errorf("k=%s: want 1 to %d hashes", s, MaxK)
	}
	return n, nil
}

// ParseBits reads a bloom size in bits: a count (1000000, 1M = 10^6), a
// power of two (2^20), or bytes with a unit (128KiB, 64MiB, 1GB).
func ParseBits(s string) (uint64, error) {
	var b uint64
	switch {
	case strings.HasPrefix(s, "2^"):
		e, err := strconv.Atoi(s[2:])
		if err != nil || e < 0 || e > 43 {
			return 0, fmt.Errorf("%q: want 2^0 to 2^43 bits", s)
		}
		b = 1 << e
	case strings.HasSuffix(s, "B"):
		n, err := units.ParseSize(s)
		if err != nil {
			return 0, err
		}
		if n > MaxBits/8 {
			return 0, fmt.Errorf("%q: want 1 bit to 1 TiB", s)
		}
		b = uint64(n) * 8
	default:
		n, err := units.ParseCount(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a size in bits (1000000, 1M, 2^20, or bytes: 128KiB)", s)
		}
		b = uint64(n)
	}
	if b == 0 || b > MaxBits {
		return 0, fmt.Errorf("%q: want 1 bit to 1 TiB", s)
	}
	return b, nil
}
