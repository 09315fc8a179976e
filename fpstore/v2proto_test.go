//go:build v2proto

package fpstore

// A test-only prototype of a candidate format v2 segment encoding, to decide
// by measurement whether it pays (the issue: ≤ 14.5 B/key at 1e7 keys and
// ≤ 13.5 at 1e9, lookups and a full decode within 10% of v1). It did not
// pay and was not adopted: docs/FORMAT.md, "A remainder format was measured
// and not adopted", has the figures. Nothing here is used by the product. The benchmarks read v1's benchIndex file and
// map the prototype's arrays from a scratch file beside it (v2Map), so
// both are read from page-cache mappings.
//
// Encoding of one segment (node prefix of p bits, n sorted fingerprints):
//
//   - d bits after the prefix are the bucket b of a key; the remaining
//     w = 128−p−d bits are its remainder, stored at a fixed R = ceil(w/8)
//     bytes a key, n·R bytes in key order, then 16 zero bytes of padding.
//     Byte order: little-endian, least significant byte first, so a
//     remainder is (Lo, Hi) = (load64(off) & mLo, load64(off+8) & mHi):
//     two native unaligned loads and two ANDs on amd64, and (when w ≥ 64,
//     always at index scale) Lo needs no mask at all.
//   - H: a bit vector of n + 2^d bits (little-endian bit order in uint64
//     words), bit b_i + i set for key i (Elias–Fano upper bits: bucket sizes
//     in unary, each bucket ended by a zero). Zero number j (0-based) ends
//     bucket j, so bucket b's first bit is at pos(b) = select0(b−1)+1
//     (pos(0) = 0), its keys are [pos(b)−b, pos(b)−b+run) where run is the
//     number of ones from pos(b), and equivalently its end is
//     select0(b)−b.
//   - samples: samples[k] = pos(k·S), one uint32 every S zeros (S = 2^sShift);
//     pos(b) is found from samples[b/S] by skipping b mod S zeros with
//     popcounts over 64-bit words, then an in-word select (broadword).
//   - d: the one minimising R·n + (n+2^d)/8 + 4·ceil(2^d/S) over d with
//     mean bucket load n/2^d ≤ 2 (d from its minimum to +8, ties to the
//     smaller).
//   - filters, optional: v1's blocked bloom (filter.go) at 10 or 8 bits a key.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// v2SShift is the default sample rate: one sample every 2^8 = 256 zeros.
const v2SShift = 8

// v2Seg is one segment in the prototype encoding.
type v2Seg struct {
	prefix  Fingerprint
	p, d, w uint // prefix, bucket and remainder bits (p+d+w = 128)
	r       uint64
	n       int
	mLo     uint64 // remainder masks
	mHi     uint64
	// b's place in the fingerprint: Hi |= b<<shHi | b>>shHiR, Lo |= b<<shLo
	// (Go shifts by ≥ 64 give 0).
	shHi, shHiR, shLo uint
	sShift            uint
	hbits             uint64 // n + 2^d
	zq                uint64 // bits per zero, Q16 (batched lookups' guess)
	h                 []uint64
	samples           []uint32
	rem               []byte // n·R + 16
	f10, f8           [][8]uint64
}

// v2Costs gives a segment's bytes by part under the rule's accounting.
func v2Costs(n int, p, d, sShift uint) (rem, h, samples int) {
	w := 128 - p - d
	r := int(w+7) / 8
	nb := 1 << d
	return n * r, (n + nb + 7) / 8, 4 * ((nb + (1 << sShift) - 1) >> sShift)
}

// v2ChooseD is the rule: the d minimising remainders + H + samples subject
// to n/2^d ≤ 2; ties go to the smaller d.
func v2ChooseD(n int, p, sShift uint) uint {
	dmin := uint(0)
	for n > 2<<dmin {
		dmin++
	}
	dmin = min(dmin, 128-p)
	best, bestCost := dmin, math.MaxInt
	for d := dmin; d <= dmin+8 && d <= 128-p && d <= 30; d++ {
		a, b, c := v2Costs(n, p, d, sShift)
		if a+b+c < bestCost {
			best, bestCost = d, a+b+c
		}
	}
	return best
}

func v2Masks(w uint) (mLo, mHi uint64) {
	switch {
	case w >= 128:
		return ^uint64(0), ^uint64(0)
	case w >= 64:
		return ^uint64(0), 1<<(w-64) - 1
	}
	return 1<<w - 1, 0
}

// v2BuildSeg encodes fps (sorted, unique, all in nd) with d bucket bits
// (d < 0: the rule's) and one sample every 2^sShift zeros; with filters,
// the 10- and 8-bit blooms too.
func v2BuildSeg(nd node, fps []Fingerprint, d int, sShift uint, filters bool) v2Seg {
	p := uint(nd.Bits)
	s := v2Seg{prefix: nd.Prefix, p: p, n: len(fps), sShift: sShift}
	if d < 0 {
		s.d = v2ChooseD(len(fps), p, sShift)
	} else {
		s.d = uint(d)
	}
	s.w = 128 - p - s.d
	s.r = uint64(s.w+7) / 8
	s.mLo, s.mHi = v2Masks(s.w)
	if s.w >= 64 {
		s.shHi, s.shHiR, s.shLo = s.w-64, 64, 64
	} else {
		s.shHi, s.shHiR, s.shLo = 64, 64-s.w, s.w
	}
	nb := uint64(1) << s.d
	s.hbits = uint64(len(fps)) + nb
	s.zq = (s.hbits << 16) / nb
	s.h = make([]uint64, s.hbits/64+2) // a spare zero word for the batched touches
	s.rem = make([]byte, len(fps)*int(s.r)+16)
	for i, fp := range fps {
		q := fp.bits(p, s.d) + uint64(i)
		s.h[q>>6] |= 1 << (q & 63)
		// In key order: a write's spill past R bytes is zero and is
		// overwritten by the next key's.
		off := uint64(i) * s.r
		binary.LittleEndian.PutUint64(s.rem[off:], fp.Lo&s.mLo)
		binary.LittleEndian.PutUint64(s.rem[off+8:], fp.Hi&s.mHi)
	}
	s.samples = v2Samples(s.h, s.hbits, nb, sShift)
	if filters {
		s.f10 = v2Bloom(fps, bloomBitsPerKey)
		s.f8 = v2Bloom(fps, 8)
	}
	return s
}

// v2Samples gives pos(k·S) for k < ceil(nb/S) from H.
func v2Samples(h []uint64, hbits, nb uint64, sShift uint) []uint32 {
	out := make([]uint32, 1, (nb+(1<<sShift)-1)>>sShift)
	mask := uint64(1)<<sShift - 1
	z := uint64(0) // zeros seen
	for wi := uint64(0); wi*64 < hbits; wi++ {
		x := ^h[wi]
		if rest := hbits - wi*64; rest < 64 {
			x &= 1<<rest - 1
		}
		for ; x != 0; x &= x - 1 {
			// zero z ends bucket z: bucket z+1 starts after it
			z++
			if z&mask == 0 && z < nb {
				out = append(out, uint32(wi*64+uint64(bits.TrailingZeros64(x))+1))
			}
		}
	}
	return out
}

func v2Bloom(fps []Fingerprint, bitsPerKey int) [][8]uint64 {
	f := make([][8]uint64, BloomBlocks(len(fps), bitsPerKey))
	for _, fp := range fps {
		BloomAdd(&f[BloomBlock(fp, uint64(len(f)))], fp)
	}
	return f
}

// v2Load reads 8 bytes at off (the array is padded by 16 bytes).
func v2Load(b []byte, off uint64) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off))
}

// v2SelectInByte[v | j<<8] is the position of the j-th (0-based) one of v.
var v2SelectInByte = func() (t [2048]uint8) {
	for v := 0; v < 256; v++ {
		for j := 0; j < 8; j++ {
			t[v|j<<8] = 8
			for b, c := 0, 0; b < 8; b++ {
				if v>>b&1 == 1 {
					if c == j {
						t[v|j<<8] = uint8(b)
						break
					}
					c++
				}
			}
		}
	}
	return t
}()

// v2Select64 is the position of the r-th (0-based) one of x, r <
// popcount(x): broadword byte counts, then a table for the byte.
func v2Select64(x, r uint64) uint64 {
	const l8, h8 = 0x0101010101010101, 0x8080808080808080
	s := x - (x>>1)&0x5555555555555555
	s = s&0x3333333333333333 + (s>>2)&0x3333333333333333
	s = (s + s>>4) & 0x0f0f0f0f0f0f0f0f
	s *= l8 // byte i: the ones in bytes 0..i
	// Bytes whose running count is ≤ r lie wholly before the r-th one.
	k := uint64(bits.OnesCount64(((r*l8|h8)-s)&h8)) << 3
	prev := (s << 8 >> k) & 0xff
	return k + uint64(v2SelectInByte[(x>>k&0xff)|(r-prev)<<8])
}

// v2Select64Loop is the same by clearing r ones.
func v2Select64Loop(x, r uint64) uint64 {
	for ; r > 0; r-- {
		x &= x - 1
	}
	return uint64(bits.TrailingZeros64(x))
}

// bucketPos is pos(b), the position in H of bucket b's first bit.
func (s *v2Seg) bucketPos(b uint64) uint64 {
	return s.bucketPosFrom(uint64(s.samples[b>>s.sShift]), b&(1<<s.sShift-1))
}

// bucketPosFrom skips r zeros from sample position pos.
func (s *v2Seg) bucketPosFrom(pos, r uint64) uint64 {
	return s.bucketPosW(pos, r, s.h[pos>>6])
}

// bucketPosW is bucketPosFrom given w0 = H's word at pos.
func (s *v2Seg) bucketPosW(pos, r, w0 uint64) uint64 {
	if r == 0 {
		return pos
	}
	wi := pos >> 6
	x := ^w0 &^ (1<<(pos&63) - 1) // zeros at or after pos
	for {
		c := uint64(bits.OnesCount64(x))
		if r <= c {
			return wi<<6 + v2Select64(x, r-1) + 1
		}
		r -= c
		wi++
		x = ^s.h[wi]
	}
}

// run is the number of ones from position pos: a bucket's size.
func (s *v2Seg) run(pos uint64) uint64 {
	wi := pos >> 6
	c := uint64(bits.TrailingZeros64(^(s.h[wi] >> (pos & 63))))
	if c < 64-pos&63 {
		return c
	}
	for {
		wi++
		t := uint64(bits.TrailingZeros64(^s.h[wi]))
		c += t
		if t < 64 {
			return c
		}
	}
}

// match searches keys [i, i+cnt) (a bucket) for fp's remainder.
func (s *v2Seg) match(i, cnt uint64, fp Fingerprint) bool {
	tLo, tHi := fp.Lo&s.mLo, fp.Hi&s.mHi
	off := i * s.r
	for ; cnt > 0; cnt-- {
		hi := v2Load(s.rem, off+8) & s.mHi
		lo := v2Load(s.rem, off) & s.mLo
		if hi == tHi && lo == tLo {
			return true
		}
		if hi > tHi || (hi == tHi && lo > tLo) {
			return false
		}
		off += s.r
	}
	return false
}

func (s *v2Seg) filter(v int) [][8]uint64 {
	switch v {
	case 10:
		return s.f10
	case 8:
		return s.f8
	}
	return nil
}

// contains answers for fp, which must lie in the segment's node; f is the
// filter in front (nil: none, the remainders are an exact filter).
// As v1 loads the filter block and the directory entry together, the
// sample and its H word are loaded before the filter is tested.
func (s *v2Seg) contains(fp Fingerprint, f [][8]uint64) bool {
	b := fp.bits(s.p, s.d)
	sp := uint64(s.samples[b>>s.sShift])
	w0 := s.h[sp>>6]
	if f != nil && !BloomTest(&f[BloomBlock(fp, uint64(len(f)))], fp) {
		return false
	}
	pos := s.bucketPosW(sp, b&(1<<s.sShift-1), w0)
	return s.match(pos-b, s.run(pos), fp)
}

// decode hands out the segment's fingerprints in order, rebuilt into buf
// (chunks of len(buf)), walking H word by word.
func (s *v2Seg) decode(buf []Fingerprint, fn func([]Fingerprint)) {
	k, i, off := 0, uint64(0), uint64(0)
	rem := s.rem
	if s.w >= 64 && s.p <= 64 && len(buf) >= 64 {
		// Index scale: Lo is the remainder's first 8 bytes as they are;
		// a word's keys (at most 64) go to buf unchecked.
		base := unsafe.Pointer(unsafe.SliceData(rem))
		pHi, sh, mHi, r := s.prefix.Hi, s.shHi&63, s.mHi, s.r
		lastOff := uint64(len(rem) - 8)
		var ahead uint64
		defer func() { v2AheadSink += ahead }()
		for wi, x := range s.h {
			if k > len(buf)-64 {
				fn(buf[:k])
				k = 0
			}
			o := (*Fingerprint)(unsafe.Pointer(&buf[k]))
			ahead += *(*uint64)(unsafe.Add(base, min(off+v2Ahead, lastOff)))
			c := bits.OnesCount64(x)
			b0 := uint64(wi)<<6 - i
			for j := uint64(0); x != 0; j++ {
				b := b0 + uint64(bits.TrailingZeros64(x)) - j
				x &= x - 1
				q := unsafe.Add(base, off)
				o.Hi = pHi | b<<sh | *(*uint64)(unsafe.Add(q, 8))&mHi
				o.Lo = *(*uint64)(q)
				o = (*Fingerprint)(unsafe.Add(unsafe.Pointer(o), 16))
				off += r
			}
			k += c
			i += uint64(c)
		}
	} else {
		for wi, x := range s.h {
			base := uint64(wi) << 6
			for ; x != 0; x &= x - 1 {
				b := base + uint64(bits.TrailingZeros64(x)) - i
				buf[k] = Fingerprint{
					Hi: s.prefix.Hi | b<<s.shHi | b>>s.shHiR | v2Load(rem, off+8)&s.mHi,
					Lo: s.prefix.Lo | b<<s.shLo | v2Load(rem, off)&s.mLo,
				}
				i++
				off += s.r
				if k++; k == len(buf) {
					fn(buf)
					k = 0
				}
			}
		}
	}
	if k > 0 {
		fn(buf[:k])
	}
}

// v2Ahead: the decode loads the remainder bytes this far ahead once per H
// word (~24 keys, ~300 bytes at 1e7 keys), an independent load that
// starts the next lines' misses early: 4.9 -> 2.8 ns a key at 10M keys
// (no touch; 128..4096 bytes ahead tried, 192-384 best).
const v2Ahead = 256

var v2AheadSink uint64

// bytes is the segment's size by part.
func (s *v2Seg) bytes() (rem, h, samples, f10, f8 int) {
	return len(s.rem), 8 * len(s.h), 4 * len(s.samples), 64 * len(s.f10), 64 * len(s.f8)
}

// v2Index is a whole index: the 2^p nodes of one depth p ≤ 63.
type v2Index struct {
	p    uint
	n    int
	segs []v2Seg
	// v1, when set, is a v1 index of the same segments: its find routes
	// lookups, so that v1 and v2 pay the same for it in benchmarks.
	v1 *Index
}

// seg is the segment for fp (the benchmarks' keys all have one).
func (x *v2Index) seg(fp Fingerprint) *v2Seg {
	if x.v1 != nil {
		return &x.segs[x.v1.find(fp)]
	}
	return &x.segs[fp.Hi>>(64-x.p)]
}

// v2BuildIndex splits sorted unique fps at the smallest depth whose nodes
// hold at most segMax each.
func v2BuildIndex(fps []Fingerprint, segMax int, sShift uint) *v2Index {
	p := uint(0)
	for ; p < 63; p++ {
		most, run := 0, 0
		for i := range fps {
			if i > 0 && fps[i].Hi>>(64-p) == fps[i-1].Hi>>(64-p) {
				run++
			} else {
				run = 1
			}
			most = max(most, run)
		}
		if most <= segMax {
			break
		}
	}
	x := &v2Index{p: p, n: len(fps), segs: make([]v2Seg, 1<<p)}
	lo := 0
	for t := range x.segs {
		hi := lo
		for hi < len(fps) && fps[hi].Hi>>(64-p) == uint64(t) {
			hi++
		}
		nd := node{Prefix: Fingerprint{Hi: uint64(t) << (64 - p)}, Bits: uint8(p)}
		x.segs[t] = v2BuildSeg(nd, fps[lo:hi], -1, sShift, true)
		lo = hi
	}
	return x
}

// withSamples is x with its samples at another rate (H, remainders and
// filters shared).
func (x *v2Index) withSamples(sShift uint) *v2Index {
	y := &v2Index{p: x.p, n: x.n, segs: slices.Clone(x.segs), v1: x.v1}
	for i := range y.segs {
		s := &y.segs[i]
		s.sShift = sShift
		s.samples = v2Samples(s.h, s.hbits, 1<<s.d, sShift)
	}
	return y
}

// v2Map copies the arrays of xs' segments (an array shared by several
// once) into a file at path, maps it as v1's Open maps an index
// (read-only, MAP_SHARED, MADV_RANDOM) and points the segments at the
// mapping: v1 and v2 are then read from the same kind of memory (page
// cache of the same file system; the Go heap's pages behave differently
// here: a plain read of 10M []Fingerprint on the heap took 1.7 ns a key,
// of v1's mapping 1.1).
func v2Map(path string, xs ...*v2Index) (unmap func() error, err error) {
	type part struct {
		src []byte
		at  int
	}
	var parts []part
	at := map[unsafe.Pointer]int{}
	size := 0
	add := func(b []byte) {
		p := unsafe.Pointer(unsafe.SliceData(b))
		if _, ok := at[p]; ok || len(b) == 0 {
			return
		}
		size = (size + 63) &^ 63 // cache lines, as v1's filter blocks
		at[p] = size
		parts = append(parts, part{b, size})
		size += len(b)
	}
	for _, x := range xs {
		for i := range x.segs {
			s := &x.segs[i]
			add(v2Bytes(s.samples))
			add(v2Bytes(s.h))
			add(s.rem)
			add(v2Bytes(s.f10))
			add(v2Bytes(s.f8))
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, p := range parts {
		if _, err := f.WriteAt(p.src, int64(p.at)); err != nil {
			return nil, err
		}
	}
	if err := f.Truncate(int64(max(size, 1))); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil { // no writeback while measuring
		return nil, err
	}
	data, err := unix.Mmap(int(f.Fd()), 0, max(size, 1), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(data, unix.MADV_RANDOM)
	for _, x := range xs {
		for i := range x.segs {
			s := &x.segs[i]
			s.samples = v2Rebase(data, at, s.samples)
			s.h = v2Rebase(data, at, s.h)
			s.rem = v2Rebase(data, at, s.rem)
			s.f10 = v2Rebase(data, at, s.f10)
			s.f8 = v2Rebase(data, at, s.f8)
		}
	}
	return func() error { return unix.Munmap(data) }, nil
}

func v2Bytes[T any](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
}

func v2Rebase[T any](data []byte, at map[unsafe.Pointer]int, s []T) []T {
	if len(s) == 0 {
		return s
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&data[at[unsafe.Pointer(unsafe.SliceData(s))]])), len(s))
}

func (x *v2Index) contains(fp Fingerprint, v int) bool {
	s := x.seg(fp)
	return s.contains(fp, s.filter(v))
}

// sizes are the index's bytes a key by part.
func (x *v2Index) sizes() (rem, h, samples, f10, f8 float64) {
	var a, b, c, d, e int
	for i := range x.segs {
		a1, b1, c1, d1, e1 := x.segs[i].bytes()
		a, b, c, d, e = a+a1, b+b1, c+c1, d+d1, e+e1
	}
	n := float64(x.n)
	return float64(a) / n, float64(b) / n, float64(c) / n, float64(d) / n, float64(e) / n
}

// decode hands out every fingerprint in order in chunks of len(buf).
func (x *v2Index) decode(buf []Fingerprint, fn func([]Fingerprint)) {
	for i := range x.segs {
		x.segs[i].decode(buf, fn)
	}
}

// containsBatch is v1's ContainsBatch for the prototype: groups of
// groupSize keys whose stages each issue independent loads (filter blocks
// and samples; H words; remainders), the filter skipped after a group most
// of whose keys passed it, as v1 does.
func (x *v2Index) containsBatch(fps []Fingerprint, found []bool, v int) uint64 {
	var g v2Group
	g.useFilter = v != 0
	for base := 0; base < len(fps); base += groupSize {
		end := min(base+groupSize, len(fps))
		g.run(x, fps[base:end], found[base:end], v)
		g.useFilter = v != 0 && g.passed*4 < (end-base)*3
	}
	return g.sink
}

type v2Group struct {
	useFilter bool
	passed    int
	seg       [groupSize]*v2Seg
	b         [groupSize]uint64
	pos       [groupSize]uint64 // sample position, then the bucket's first key
	cnt       [groupSize]uint64
	sink      uint64
}

func (g *v2Group) run(x *v2Index, fps []Fingerprint, found []bool, v int) {
	g.passed = 0
	var sink uint64
	// Stage 1: segment, bucket, sample (independent loads), and the filter
	// blocks when used.
	for i, fp := range fps {
		found[i] = false
		s := x.seg(fp)
		g.seg[i] = s
		b := fp.bits(s.p, s.d)
		g.b[i] = b
		g.pos[i] = uint64(s.samples[b>>s.sShift])
		if g.useFilter {
			f := s.filter(v)
			sink += f[BloomBlock(fp, uint64(len(f)))][0]
		}
	}
	if g.useFilter {
		for i, fp := range fps {
			s := g.seg[i]
			f := s.filter(v)
			if !BloomTest(&f[BloomBlock(fp, uint64(len(f)))], fp) {
				g.seg[i] = nil
				continue
			}
			g.passed++
		}
	}
	// Stage 2: H's words at the sample and where the bucket is expected
	// (the zeros are spread evenly), loads alone.
	for i := range fps {
		if s := g.seg[i]; s != nil {
			sp := g.pos[i]
			est := min((sp+((g.b[i]&(1<<s.sShift-1))*s.zq)>>16)>>6, uint64(len(s.h)-1))
			sink += s.h[sp>>6] + s.h[est]
		}
	}
	// Stage 3: the bucket's keys.
	for i := range fps {
		if s := g.seg[i]; s != nil {
			b := g.b[i]
			pos := s.bucketPosFrom(g.pos[i], b&(1<<s.sShift-1))
			g.pos[i], g.cnt[i] = pos-b, s.run(pos)
		}
	}
	// Stage 4: the first remainder's bytes, loads alone.
	for i := range fps {
		if s := g.seg[i]; s != nil && g.cnt[i] > 0 {
			off := g.pos[i] * s.r
			sink += v2Load(s.rem, off) + v2Load(s.rem, off+8)
		}
	}
	g.sink += sink
	// Stage 5: compare.
	for i, fp := range fps {
		if s := g.seg[i]; s != nil && g.cnt[i] > 0 {
			found[i] = s.match(g.pos[i], g.cnt[i], fp)
		}
	}
}

// ---- correctness ----

func v2Add(a Fingerprint, k uint64) Fingerprint {
	lo, c := bits.Add64(a.Lo, k, 0)
	return Fingerprint{a.Hi + c, lo}
}

func v2Sub(a Fingerprint, k uint64) Fingerprint {
	lo, c := bits.Sub64(a.Lo, k, 0)
	return Fingerprint{a.Hi - c, lo}
}

// v2InNode is fp with its first p bits replaced by nd's prefix.
func v2InNode(nd node, fp Fingerprint) Fingerprint {
	m := Fingerprint{^uint64(0), ^uint64(0)}.truncate(uint(nd.Bits))
	return Fingerprint{nd.Prefix.Hi | fp.Hi&^m.Hi, nd.Prefix.Lo | fp.Lo&^m.Lo}
}

func v2SortUnique(fps []Fingerprint) []Fingerprint {
	slices.SortFunc(fps, Fingerprint.Compare)
	return slices.Compact(fps)
}

// v2CheckSeg checks a segment against its keys: decode, the bucket
// formula for every bucket (small d), and membership of every key, their
// neighbours inside the node and random keys of the node.
func v2CheckSeg(t *testing.T, name string, s *v2Seg, nd node, fps []Fingerprint, r *rand.Rand) {
	t.Helper()
	for _, chunk := range []int{7, 64, 100} { // the general path, the fast one
		var got []Fingerprint
		s.decode(make([]Fingerprint, chunk), func(c []Fingerprint) { got = append(got, c...) })
		if !slices.Equal(got, fps) {
			t.Fatalf("%s: decode by %d gives %d keys, want %d (or they differ)", name, chunk, len(got), len(fps))
		}
	}
	if s.d <= 16 {
		start := uint64(0)
		k := 0
		for b := uint64(0); b < 1<<s.d; b++ {
			cnt := uint64(0)
			for k < len(fps) && fps[k].bits(s.p, s.d) == b {
				k++
				cnt++
			}
			pos := s.bucketPos(b)
			if pos-b != start || s.run(pos) != cnt {
				t.Fatalf("%s: bucket %d: pos %d, keys [%d,+%d), want [%d,+%d)", name, b, pos, pos-b, s.run(pos), start, cnt)
			}
			start += cnt
		}
	}
	set := make(map[Fingerprint]bool, len(fps))
	for _, fp := range fps {
		set[fp] = true
	}
	var probe []Fingerprint
	for _, fp := range fps {
		probe = append(probe, fp, v2Add(fp, 1), v2Sub(fp, 1))
	}
	for range 200 {
		probe = append(probe, v2InNode(nd, Fingerprint{r.Uint64(), r.Uint64()}))
	}
	probe = append(probe, nd.Prefix, v2InNode(nd, Fingerprint{^uint64(0), ^uint64(0)}))
	for _, fp := range probe {
		if !nd.contains(fp) {
			continue
		}
		for _, v := range []int{0, 8, 10} {
			if s.contains(fp, s.filter(v)) != set[fp] {
				t.Fatalf("%s: contains(%s) with filter %d = %v, want %v", name, fp, v, !set[fp], set[fp])
			}
		}
	}
}

func TestV2ProtoSelect64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []uint64{1, 1 << 63, ^uint64(0), 0x8000000000000001, 0xff00, 0x00ff00ff00ff00ff}
	for range 2000 {
		words = append(words, r.Uint64(), r.Uint64()&r.Uint64()&r.Uint64(), r.Uint64()|r.Uint64())
	}
	for _, x := range words {
		for k := uint64(0); k < uint64(bits.OnesCount64(x)); k++ {
			want := v2Select64Loop(x, k)
			if got := v2Select64(x, k); got != want || x>>want&1 != 1 || bits.OnesCount64(x&(1<<want-1)) != int(k) {
				t.Fatalf("select64(%#x, %d) = %d, loop %d", x, k, got, want)
			}
		}
	}
}

// TestV2ProtoEdges: n = 0, 1, 2, all keys in one bucket, keys at the
// node's extremes, p from 0 to 128, d forced to 0 and to the rule's, every
// sample rate from 1 to 256.
func TestV2ProtoEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range []uint{0, 1, 4, 13, 37, 60, 63, 64, 65, 100, 120, 126, 127, 128} {
		nd := nodeOf(Fingerprint{r.Uint64(), r.Uint64()}, p)
		lowest := nd.Prefix
		highest := v2InNode(nd, Fingerprint{^uint64(0), ^uint64(0)})
		rnd := func(k int) []Fingerprint {
			var out []Fingerprint
			for range k {
				out = append(out, v2InNode(nd, Fingerprint{r.Uint64(), r.Uint64()}))
			}
			return v2SortUnique(out)
		}
		// All in one bucket: the first p+20 bits shared (at most 128).
		oneBucket := func(k int) []Fingerprint {
			base := v2InNode(nd, Fingerprint{r.Uint64(), r.Uint64()})
			m := Fingerprint{^uint64(0), ^uint64(0)}.truncate(min(p+20, 128))
			var out []Fingerprint
			for range k {
				out = append(out, Fingerprint{base.Hi&m.Hi | r.Uint64()&^m.Hi, base.Lo&m.Lo | r.Uint64()&^m.Lo})
			}
			return v2SortUnique(out)
		}
		sets := map[string][]Fingerprint{
			"empty":      nil,
			"one":        rnd(1),
			"two":        rnd(2),
			"lowest":     {lowest},
			"highest":    {highest},
			"extremes":   v2SortUnique([]Fingerprint{lowest, v2Add(lowest, 1), v2Sub(highest, 1), highest}),
			"random":     rnd(1000),
			"oneBucket":  oneBucket(200),
			"extremes+r": v2SortUnique(append(rnd(500), lowest, highest)),
		}
		for name, fps := range sets {
			fps = slices.DeleteFunc(fps, func(fp Fingerprint) bool { return !nd.contains(fp) })
			for _, d := range []int{-1, 0, 3} {
				if d > int(128-p) {
					continue
				}
				for _, sh := range []uint{0, 2, 6, 8} {
					s := v2BuildSeg(nd, fps, d, sh, true)
					v2CheckSeg(t, fmt.Sprintf("p=%d %s (n=%d) d=%d(%d) S=%d", p, name, len(fps), d, s.d, 1<<sh), &s, nd, fps, r)
				}
			}
		}
	}
}

// TestV2ProtoIndex: 1e5 random keys as one segment (p = 0) and split
// (p = 5), and clustered keys; every variant, single and batched, and the
// decode, against a map.
func TestV2ProtoIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	random := make([]Fingerprint, 100_000)
	for i := range random {
		random[i] = Fingerprint{r.Uint64(), r.Uint64()}
	}
	random = v2SortUnique(random)
	// Clustered: runs of consecutive keys and keys sharing long prefixes.
	var clustered []Fingerprint
	for range 200 {
		base := Fingerprint{r.Uint64(), r.Uint64()}
		for k := range uint64(100) {
			clustered = append(clustered, v2Add(base, k*uint64(1+r.IntN(3))), Fingerprint{base.Hi, r.Uint64()})
		}
	}
	clustered = v2SortUnique(clustered)
	for _, tc := range []struct {
		name   string
		fps    []Fingerprint
		segMax int
	}{{"random/p0", random, SegmentMax}, {"random/split", random, 4096}, {"clustered", clustered, SegmentMax}, {"clustered/split", clustered, 1000}} {
		x := v2BuildIndex(tc.fps, tc.segMax, v2SShift)
		for _, y := range []*v2Index{x, x.withSamples(6)} {
			var got []Fingerprint
			y.decode(make([]Fingerprint, 1000), func(c []Fingerprint) { got = append(got, c...) })
			if !slices.Equal(got, tc.fps) {
				t.Fatalf("%s: decode differs", tc.name)
			}
			set := make(map[Fingerprint]bool, len(tc.fps))
			for _, fp := range tc.fps {
				set[fp] = true
			}
			var probe []Fingerprint
			for i, fp := range tc.fps {
				probe = append(probe, fp)
				if i%7 == 0 {
					probe = append(probe, v2Add(fp, 1), v2Sub(fp, 1), Fingerprint{r.Uint64(), r.Uint64()})
				}
			}
			r.Shuffle(len(probe), func(i, j int) { probe[i], probe[j] = probe[j], probe[i] })
			found := make([]bool, len(probe))
			for _, v := range []int{0, 8, 10} {
				y.containsBatch(probe, found, v)
				for i, fp := range probe {
					if found[i] != set[fp] || (i%5 == 0 && y.contains(fp, v) != set[fp]) {
						t.Fatalf("%s (p=%d) filter %d: %s found %v, want %v", tc.name, y.p, v, fp, found[i], set[fp])
					}
				}
			}
		}
		if tc.name == "random/split" && x.p != 5 {
			t.Fatalf("random/split: p = %d, want 5", x.p)
		}
	}
}

// ---- sizes ----

// v2Analytic is the B/key of an index of N uniformly random keys: the
// depth p and segment size n a trie of SegmentMax nodes gives, d and R by
// the rule, and bytes a key by part.
type v2Row struct {
	N, n                         float64
	p, d, w, R                   uint
	rem, h, samples, f10, f8, f6 float64
	v1                           float64
}

func v2Analytic(N float64, sShift uint) v2Row {
	p := uint(0)
	for N/math.Ldexp(1, int(p)) > SegmentMax {
		p++
	}
	n := int(math.Round(N / math.Ldexp(1, int(p))))
	d := v2ChooseD(n, p, sShift)
	a, b, c := v2Costs(n, p, d, sShift)
	fn := float64(n)
	row := v2Row{N: N, n: fn, p: p, d: d, w: 128 - p - d, R: (128 - p - d + 7) / 8,
		rem: float64(a) / fn, h: float64(b) / fn, samples: float64(c) / fn,
		f10: float64(64*BloomBlocks(n, 10)) / fn, f8: float64(64*BloomBlocks(n, 8)) / fn, f6: float64(64*BloomBlocks(n, 6)) / fn}
	// v1 for reference: fingerprints, directory, 10-bit filter.
	row.v1 = 16 + float64(4*(int(1)<<directoryBits(n)+1))/fn + row.f10
	return row
}

// TestV2ProtoSizes prints the analytic B/key table (go test -v -run
// V2ProtoSizes) and checks it against a built index.
func TestV2ProtoSizes(t *testing.T) {
	for _, sh := range []uint{8, 6} {
		t.Logf("S=%d: N, p, n/seg, d, w, R | rem H samples | A (none)  B (bloom10)  C (bloom8)  [bloom6]  | v1", 1<<sh)
		for _, N := range []float64{1e7, 1e8, 1e9, 1e10} {
			r := v2Analytic(N, sh)
			a := r.rem + r.h + r.samples
			t.Logf("  %.0e  p=%-2d n=%-7.0f d=%-2d w=%-3d R=%-2d | %5.2f %5.3f %5.3f | %6.3f  %6.3f  %6.3f  [%6.3f]  | %6.3f",
				N, r.p, r.n, r.d, r.w, r.R, r.rem, r.h, r.samples, a, a+r.f10, a+r.f8, a+r.f6, r.v1)
		}
	}
	// d/R chosen per segment size and depth.
	var sb strings.Builder
	sb.WriteString("d/R chosen (S=256) for n keys at depth p:\n        n:")
	ns := []int{1000, 10_000, 100_000, 250_000, 500_000, 625_000, 781_250, 976_562, 1 << 20}
	for _, n := range ns {
		fmt.Fprintf(&sb, " %8d", n)
	}
	for _, p := range []uint{0, 4, 7, 10, 14} {
		fmt.Fprintf(&sb, "\n   p=%-3d   ", p)
		for _, n := range ns {
			d := v2ChooseD(n, p, v2SShift)
			fmt.Fprintf(&sb, " %8s", fmt.Sprintf("%d/%d", d, (128-p-d+7)/8))
		}
	}
	t.Log(sb.String())
	// The formula against a built segment (H is stored in whole words plus
	// one spare, remainders with 16 bytes of padding).
	r := rand.New(rand.NewPCG(7, 8))
	fps := make([]Fingerprint, 100_000)
	for i := range fps {
		fps[i] = Fingerprint{r.Uint64(), r.Uint64()}
	}
	fps = v2SortUnique(fps)
	s := v2BuildSeg(node{}, fps, -1, v2SShift, true)
	a, b, c := v2Costs(len(fps), 0, s.d, v2SShift)
	ra, rb, rc, _, _ := s.bytes()
	if ra-a != 16 || rb-b < 0 || rb-b > 16 || rc != c {
		t.Fatalf("built segment %d/%d/%d bytes, rule's accounting %d/%d/%d", ra, rb, rc, a, b, c)
	}
}

// ---- benchmarks ----

// BenchmarkV2Proto measures v1 (benchIndex's file: Contains, ContainsBatch,
// Scan) and the prototype (built in memory from the same keys) side by
// side, warm. Each sub-benchmark does a fixed amount of work, so run it
// once:
//
//	nice -n 5 go test ./fpstore -run '^$' -bench 'V2Proto' -benchtime 1x
//
// (FPDEDUP_BENCH_KEYS sets the keys, default 10M.) The figures are custom
// metrics (B/key, p50-ns…, ns/key); a side-by-side table is logged too.
func BenchmarkV2Proto(b *testing.B) {
	path, _ := benchIndex()
	defer os.RemoveAll(filepath.Dir(path))
	if _, err := os.Stat(path); err != nil {
		b.Skipf("benchIndex's file is gone (BenchmarkLookup removes it): run -bench V2Proto alone: %v", err)
	}
	keys := v2BenchKeys()
	x, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	// Touch every v1 page, and check that the keys are v1's.
	k := 0
	if err := x.Scan(func(fps []Fingerprint) error {
		if !slices.Equal(fps, keys[k:k+len(fps)]) {
			return fmt.Errorf("v1 keys %d.. differ from the regenerated ones", k)
		}
		k += len(fps)
		return nil
	}); err != nil || k != len(keys) {
		b.Fatalf("v1 index: %v (%d keys, want %d)", err, k, len(keys))
	}
	t0 := time.Now()
	v2 := v2BuildIndex(keys, SegmentMax, v2SShift)
	// Same segments as v1's: then v2 lookups route with v1's find.
	same := len(x.foot.segments) == len(v2.segs)
	for i := 0; same && i < len(v2.segs); i++ {
		same = x.foot.segments[i].node == node{Prefix: v2.segs[i].prefix, Bits: uint8(v2.segs[i].p)}
	}
	if same {
		v2.v1 = x
	} else {
		b.Logf("v1's segments are not v2's: v2 routes by its top %d bits", v2.p)
	}
	v2s64 := v2.withSamples(6)
	b.Logf("%d keys; v1: %d segments; v2: p=%d, %d segments, built in %v", len(keys), x.Segments(), v2.p, len(v2.segs), time.Since(t0).Round(time.Millisecond))
	unmap, err := v2Map(filepath.Join(filepath.Dir(path), "v2proto.bin"), v2, v2s64)
	if err != nil {
		b.Fatal(err)
	}
	defer unmap()
	// Touch everything of v2 once.
	var sink uint64
	v2.decode(make([]Fingerprint, 4096), func(c []Fingerprint) { sink += c[0].Lo })
	for _, y := range []*v2Index{v2, v2s64} {
		for i := range y.segs {
			s := &y.segs[i]
			for _, f := range [][][8]uint64{s.f10, s.f8} {
				for j := range f {
					sink += f[j][0]
				}
			}
			for _, v := range s.samples {
				sink += uint64(v)
			}
		}
	}
	dr := map[string]int{}
	for i := range v2.segs {
		s := &v2.segs[i]
		dr[fmt.Sprintf("n≈%dk d=%d w=%d R=%d", (s.n+500)/1000, s.d, s.w, s.r)]++
	}
	b.Logf("v2 segments (S=256): %v", dr)

	var table []string
	logf := func(format string, a ...any) { table = append(table, fmt.Sprintf(format, a...)) }
	defer func() { b.Log("side by side (shared machine: indicative only)\n" + strings.Join(table, "\n")) }()

	b.Run("size", func(b *testing.B) {
		rem, h, smp, f10, f8 := v2.sizes()
		_, _, smp64, _, _ := v2s64.sizes()
		a := rem + h + smp
		v1 := float64(x.Size()) / float64(len(keys))
		logf("B/key: v1 %.3f | v2 A %.3f  B %.3f  C %.3f  (rem %.3f H %.3f samples %.4f [S=64: %.4f] bloom10 %.3f bloom8 %.3f)", v1, a, a+f10, a+f8, rem, h, smp, smp64, f10, f8)
		for _, m := range []struct {
			name string
			v    float64
		}{{"v1", v1}, {"v2A", a}, {"v2B", a + f10}, {"v2C", a + f8}, {"v2A-S64", rem + h + smp64}} {
			b.Run(m.name, func(b *testing.B) { b.ReportMetric(m.v, "B/key") })
		}
	})

	type impl struct {
		name  string
		one   func(Fingerprint) bool
		batch func([]Fingerprint, []bool)
	}
	impls := []impl{
		{"v1", func(fp Fingerprint) bool {
			ok, err := x.Contains(fp)
			if err != nil {
				panic(err)
			}
			return ok
		}, func(fps []Fingerprint, found []bool) {
			if err := x.ContainsBatch(fps, found); err != nil {
				panic(err)
			}
		}},
		// v1 without the fault guard and the public wrapper: what a v2
		// reader would have to add too.
		{"v1core", func(fp Fingerprint) bool {
			i := x.find(fp)
			if i < 0 {
				return false
			}
			s, _ := x.segment(i)
			ok, _ := s.contains(fp)
			return ok
		}, nil},
	}
	for _, v := range []struct {
		name string
		x    *v2Index
		f    int
	}{{"v2A", v2, 0}, {"v2B", v2, 10}, {"v2C", v2, 8}, {"v2A-S64", v2s64, 0}} {
		impls = append(impls, impl{v.name,
			func(fp Fingerprint) bool { return v.x.contains(fp, v.f) },
			func(fps []Fingerprint, found []bool) { sink += v.x.containsBatch(fps, found, v.f) }})
	}

	r := rand.New(rand.NewPCG(25, 26))
	b.Run("single", func(b *testing.B) {
		const per, rounds = 200_000, 4
		kinds := []string{"present", "absent"}
		set := func(kind string, n int) []Fingerprint {
			out := make([]Fingerprint, n)
			for i := range out {
				if kind == "present" {
					out[i] = keys[r.IntN(len(keys))]
				} else {
					out[i] = Fingerprint{r.Uint64(), r.Uint64()}
				}
			}
			return out
		}
		lat := map[string][]time.Duration{}
		for _, kind := range kinds {
			for _, m := range impls { // warm-up
				for _, fp := range set(kind, 20_000) {
					if m.one(fp) != (kind == "present") {
						b.Fatalf("%s: wrong answer for %s key %s", m.name, kind, fp)
					}
				}
			}
			for round := range rounds {
				ks := set(kind, per/rounds)
				for j := range impls {
					m := impls[(j+round)%len(impls)]
					l := lat[kind+"/"+m.name]
					for _, fp := range ks {
						t := time.Now()
						ok := m.one(fp)
						l = append(l, time.Since(t))
						if ok != (kind == "present") {
							b.Fatalf("%s: wrong answer for %s key %s", m.name, kind, fp)
						}
					}
					lat[kind+"/"+m.name] = l
				}
			}
		}
		logf("single lookups, ns p50/p90/p99 (incl. ~20-30 ns of time.Now):")
		for _, kind := range kinds {
			for _, m := range impls {
				l := lat[kind+"/"+m.name]
				slices.Sort(l)
				q := func(f float64) float64 { return float64(l[int(f*float64(len(l)-1))].Nanoseconds()) }
				logf("  %-7s %-8s %4.0f %4.0f %5.0f", kind, m.name, q(.5), q(.9), q(.99))
				b.Run(kind+"/"+m.name, func(b *testing.B) {
					b.ReportMetric(q(.5), "p50-ns")
					b.ReportMetric(q(.9), "p90-ns")
					b.ReportMetric(q(.99), "p99-ns")
				})
			}
		}
	})

	b.Run("batch", func(b *testing.B) {
		present := slices.Clone(keys)
		r.Shuffle(len(present), func(i, j int) { present[i], present[j] = present[j], present[i] })
		absent := make([]Fingerprint, len(keys))
		for i := range absent {
			absent[i] = Fingerprint{r.Uint64(), r.Uint64()}
		}
		const chunk = 1 << 20
		found := make([]bool, chunk)
		logf("batched lookups (%d keys each, interleaved by 1M), ns/key:", len(keys))
		for _, kind := range []struct {
			name string
			fps  []Fingerprint
		}{{"present", present}, {"absent", absent}} {
			took := map[string]time.Duration{}
			hits := map[string]int{}
			for c, base := 0, 0; base < len(kind.fps); c, base = c+1, base+chunk {
				end := min(base+chunk, len(kind.fps))
				for j := range impls {
					m := impls[(j+c)%len(impls)]
					if m.batch == nil {
						continue
					}
					t := time.Now()
					m.batch(kind.fps[base:end], found[:end-base])
					took[m.name] += time.Since(t)
					for _, f := range found[:end-base] {
						if f {
							hits[m.name]++
						}
					}
				}
			}
			for _, m := range impls {
				if m.batch == nil {
					continue
				}
				if (kind.name == "present" && hits[m.name] != len(keys)) || hits[m.name] != hits["v1"] {
					b.Fatalf("%s %s: %d found, v1 %d", m.name, kind.name, hits[m.name], hits["v1"])
				}
				ns := float64(took[m.name].Nanoseconds()) / float64(len(kind.fps))
				logf("  %-7s %-8s %6.1f", kind.name, m.name, ns)
				b.Run(kind.name+"/"+m.name, func(b *testing.B) { b.ReportMetric(ns, "ns/key") })
			}
		}
	})

	b.Run("decode", func(b *testing.B) {
		buf := make([]Fingerprint, 1024)
		sum := func(fps []Fingerprint) {
			var s uint64
			for _, f := range fps {
				s += f.Hi ^ f.Lo
			}
			sink += s
		}
		passes := []struct {
			name string
			run  func()
		}{
			{"v1-scan", func() { _ = x.Scan(func([]Fingerprint) error { return nil }) }},
			{"v1-scan+read", func() { _ = x.Scan(func(fps []Fingerprint) error { sum(fps); return nil }) }},
			// v1's layout on the Go heap instead of the mapping
			{"heap16+read", func() { sum(keys) }},
			{"v2-decode+read", func() { v2.decode(buf, sum) }},
			{"v2-decode", func() { v2.decode(buf, func([]Fingerprint) {}) }},
		}
		best := map[string]time.Duration{}
		for round := range 3 {
			for j := range passes {
				pass := passes[(j+round)%len(passes)]
				t := time.Now()
				pass.run()
				if d := time.Since(t); best[pass.name] == 0 || d < best[pass.name] {
					best[pass.name] = d
				}
			}
		}
		logf("sequential decode, ns/key (best of 3 interleaved passes):")
		for _, pass := range passes {
			ns := float64(best[pass.name].Nanoseconds()) / float64(len(keys))
			logf("  %-15s %5.2f", pass.name, ns)
			b.Run(pass.name, func(b *testing.B) { b.ReportMetric(ns, "ns/key") })
		}
	})
	if sink == 42 {
		b.Log("")
	}
}

// v2BenchKeys regenerates benchIndex's keys (same generator, same seed).
func v2BenchKeys() []Fingerprint {
	n := 10_000_000
	if s := os.Getenv("FPDEDUP_BENCH_KEYS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	r := rand.New(rand.NewPCG(21, 22))
	step := ^uint64(0) / uint64(n)
	keys := make([]Fingerprint, n)
	for i := range keys {
		keys[i] = Fingerprint{uint64(i)*step + r.Uint64N(step), r.Uint64()}
	}
	return keys
}

// BenchmarkV2ProtoSelect64: the in-word select, broadword against a loop,
// on random words and ranks (fixed work: 1M selects a pass).
func BenchmarkV2ProtoSelect64(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	const n = 1 << 20
	xs, rs := make([]uint64, n), make([]uint64, n)
	for i := range xs {
		xs[i] = r.Uint64() | 1
		rs[i] = uint64(r.IntN(bits.OnesCount64(xs[i])))
	}
	for _, f := range []struct {
		name string
		fn   func(x, r uint64) uint64
	}{{"broadword", v2Select64}, {"loop", v2Select64Loop}} {
		b.Run(f.name, func(b *testing.B) {
			var s uint64
			t := time.Now()
			for range b.N {
				for i := range xs {
					// dependent chain, as in a lookup
					s += f.fn(xs[i]|(s&1)<<1, rs[i])
				}
			}
			b.ReportMetric(float64(time.Since(t).Nanoseconds())/float64(b.N*n), "ns/select")
			if s == 1 {
				b.Log("")
			}
		})
	}
}
