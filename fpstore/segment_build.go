package fpstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"
	"unsafe"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/fpdedup/fpdedup/schema"
)

// node is a node of the binary prefix trie: the fingerprints whose first
// Bits bits equal those of Prefix (the rest of Prefix is zero).
type node struct {
	Prefix Fingerprint
	Bits   uint8
}

func nodeOf(fp Fingerprint, depth uint) node {
	return node{Prefix: fp.truncate(depth), Bits: uint8(depth)}
}

func (n node) contains(fp Fingerprint) bool {
	return fp.truncate(uint(n.Bits)) == n.Prefix
}

// truncate keeps the first n bits and zeroes the rest.
func (a Fingerprint) truncate(n uint) Fingerprint {
	switch {
	case n == 0:
		return Fingerprint{}
	case n < 64:
		return Fingerprint{Hi: a.Hi &^ (^uint64(0) >> n)}
	case n == 64:
		return Fingerprint{Hi: a.Hi}
	case n < 128:
		return Fingerprint{Hi: a.Hi, Lo: a.Lo &^ (^uint64(0) >> (n - 64))}
	}
	return a
}

// directoryBits sizes the bucket directory: a bucket of 16 to 32
// fingerprints on average (256-512 bytes, a few adjacent cache lines) keeps
// the directory at 0.125-0.25 bytes a key, so with the 16-byte fingerprint
// and the 1.25-byte filter (10 bits) an index stays under 17.5 bytes a key.
func directoryBits(count int) uint8 {
	if count < 32 {
		return 0
	}
	return uint8(bits.Len(uint(count/16)) - 1)
}

// buildDirectory gives, for each bucket of the directory bits after the
// node's prefix, the index of its first fingerprint, plus a final count.
func buildDirectory(n node, fps []Fingerprint) []uint32 {
	return fillDirectory(nil, n, fps)
}

// fillDirectory is buildDirectory into dst's memory when it is large
// enough.
func fillDirectory(dst []uint32, n node, fps []Fingerprint) []uint32 {
	dirBits := directoryBits(len(fps))
	dir := slices.Grow(dst[:0], (1<<dirBits)+1)[:(1<<dirBits)+1]
	b := 0
	for i, fp := range fps {
		for bucket := int(fp.bits(uint(n.Bits), uint(dirBits))); b <= bucket; b++ {
			dir[b] = uint32(i)
		}
	}
	for ; b < len(dir); b++ {
		dir[b] = uint32(len(fps))
	}
	return dir
}

// segmentBuilder builds segment buffers; it keeps scratch memory between
// segments, so one builder serves one goroutine.
type segmentBuilder struct {
	// fbs recycles FlatBuffers builders (and so their buffers) once their
	// segment is written: faults on fresh pages are costly, and a new
	// builder per segment makes them a large share of a build's system
	// time.
	fbs  chan *flatbuffers.Builder
	huge *hugeBuffers // backs new builders when set

	filter []byte
	dir    []uint32
}

func (sb *segmentBuilder) builder(size int) *flatbuffers.Builder {
	select {
	case fb := <-sb.fbs:
		if cap(fb.Bytes) >= size {
			fb.Reset()
			return fb
		}
	default:
	}
	if sb.huge == nil {
		return flatbuffers.NewBuilder(size)
	}
	// A builder over our own buffer: Reset makes the whole buffer its room.
	// Room for the largest head, so that it is reused for every later one.
	fb := flatbuffers.NewBuilder(0)
	fb.Bytes = sb.huge.get(max(size, maxHeadBytes))
	fb.Reset()
	return fb
}

// maxHeadBytes bounds a segment buffer without its fingerprints (see
// build): the largest filter (10 bits a key) and directory (4 bytes per
// 16 keys), three stand-in fingerprints and the table. Below 2 MiB, the
// mapping gets no huge page, so only what a head touches is resident.
const maxHeadBytes = SegmentMax*5/4 + SegmentMax/4 + 16*3 + 4096

// release hands a written segment's builder back for reuse.
func (sb *segmentBuilder) release(seg *builtSegment) {
	if seg.fb != nil {
		select {
		case sb.fbs <- seg.fb:
		default:
		}
	}
	*seg = builtSegment{}
}

// builtSegment is a segment's bytes as they go in the file: the FlatBuffers
// buffer, which is head then tail, then crcs: zero padding to 4 bytes and
// the page CRC table.
type builtSegment struct {
	fb     *flatbuffers.Builder // owns head
	head   []byte
	tail   []byte // the fingerprints' bytes, aliasing the caller's slice (nil when head is all)
	crcs   []byte
	length uint64 // of the FlatBuffers buffer alone
	ref    segmentRef
}

// build makes the segment for node n holding fps (sorted, unique, all in n).
func (sb *segmentBuilder) build(n node, fps []Fingerprint) (builtSegment, error) {
	count := len(fps)
	if count == 0 || count > SegmentMax {
		panic(fmt.Sprintf("BUG: segment of %d fingerprints", count))
	}
	dirBits := directoryBits(count)
	// Scratch reused from segment to segment: the filter and directory
	// are copied into the buffer, and a fresh filter a segment would be
	// most of a merge's garbage.
	dir := fillDirectory(sb.dir, n, fps)
	sb.dir = dir

	nblocks := BloomBlocks(count, bloomBitsPerKey)
	if cap(sb.filter) < 64*nblocks {
		sb.filter = make([]byte, 64*nblocks)
	}
	filter := sb.filter[:64*nblocks]
	clear(filter)
	blocks := unsafe.Slice((*[8]uint64)(unsafe.Pointer(unsafe.SliceData(filter))), nblocks)
	for _, fp := range fps {
		BloomAdd(&blocks[BloomBlock(fp, uint64(nblocks))], fp)
	}

	// The fingerprints are not copied into the buffer: it is built with a
	// stand-in vector of count%4 of them (its length word then set to
	// count), and the segment is the buffer without the stand-in's bytes,
	// followed by fps as they are. The vector is created first, so it lies
	// last, and everything before it is the same bytes either way: a
	// FlatBuffers buffer grows from its end, offsets are relative, and
	// every padding depends on the distance to the end modulo at most 64,
	// which 16*(count - count%4) does not change. The copy would cost a
	// merge CPU time and 16 bytes a key of buffer memory.
	stand := count % 4
	fb := sb.builder(16*stand + len(filter) + 4*len(dir) + 256)
	// Created first, so it lies last in the buffer: the small table, the
	// directory and the filter come first, in the pages a lookup reads first.
	fpsOff := createFingerprintVector(fb, fps[:stand])
	binary.LittleEndian.PutUint32(fb.Bytes[fb.Head():], uint32(count))
	fb.Prep(64, len(filter)) // blocks on cache lines (segments are page aligned)
	filterOff := fb.CreateByteVector(filter)
	schema.SegmentStartDirectoryVector(fb, len(dir))
	for i := len(dir) - 1; i >= 0; i-- {
		fb.PlaceUint32(dir[i])
	}
	dirOff := fb.EndVector(len(dir))

	schema.SegmentStart(fb)
	schema.SegmentAddPrefixHi(fb, n.Prefix.Hi)
	schema.SegmentAddPrefixLo(fb, n.Prefix.Lo)
	schema.SegmentAddCount(fb, uint64(count))
	schema.SegmentAddDirectory(fb, dirOff)
	schema.SegmentAddFilter(fb, filterOff)
	schema.SegmentAddFingerprints(fb, fpsOff)
	schema.SegmentAddPrefixBits(fb, n.Bits)
	schema.SegmentAddDirectoryBits(fb, dirBits)
	schema.SegmentAddFilterKind(fb, schema.FilterKindBlockedBloom512)
	schema.SegmentAddFilterHashes(fb, BloomHashes)
	fb.FinishWithFileIdentifier(schema.SegmentEnd(fb), []byte(FileIdentifier))
	finished := fb.FinishedBytes()
	head := finished[:len(finished)-16*stand]
	tail := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(fps))), 16*count)

	hl := uint64(len(head))
	length := hl + uint64(len(tail))
	pages := int((length + PageSize - 1) / PageSize)
	// The buffer is handed over as it is (no copy), with its builder.
	crcs := make([]byte, alignUp(length, 4)-length, alignUp(length, 4)-length+uint64(4*pages))
	for p := 0; p < pages; p++ {
		from, to := uint64(p)*PageSize, min(uint64(p+1)*PageSize, length)
		var c uint32
		if from < hl {
			c = crc32.Update(c, castagnoli, head[from:min(to, hl)])
		}
		if to > hl {
			c = crc32.Update(c, castagnoli, tail[max(from, hl)-hl:to-hl])
		}
		crcs = binary.LittleEndian.AppendUint32(crcs, c)
	}
	return builtSegment{
		fb:     fb,
		head:   head,
		tail:   tail,
		crcs:   crcs,
		length: length,
		ref: segmentRef{
			node:     n,
			length:   length,
			count:    uint64(count),
			first:    fps[0],
			last:     fps[count-1],
			pagesCRC: crc32c(crcs[alignUp(length, 4)-length:]),
		},
	}, nil
}

// createFingerprintVector writes fps as a FlatBuffers vector of the
// Fingerprint struct with one copy. The generated code's way, two
// PlaceUint64 calls per element, is a large share of a build's segment
// time; a []Fingerprint in memory on a little-endian machine already has
// the struct's bytes (hi, lo as little-endian uint64), so it is copied as a
// byte vector whose length word is then set to the element count.
func createFingerprintVector(fb *flatbuffers.Builder, fps []Fingerprint) flatbuffers.UOffsetT {
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(fps))), 16*len(fps))
	fb.Prep(8, len(raw)) // struct alignment of the elements
	off := fb.CreateByteVector(raw)
	binary.LittleEndian.PutUint32(fb.Bytes[fb.Head():], uint32(len(fps)))
	return off
}
