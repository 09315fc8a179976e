package fpstore

import (
	"encoding/binary"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/fpdedup/fpdedup/schema"
)

// segmentRef is the footer's record of one segment (schema.SegmentRef).
type segmentRef struct {
	node     node
	offset   uint64
	length   uint64
	count    uint64
	first    Fingerprint
	last     Fingerprint
	pagesCRC uint32
}

// pagesAt is the offset of the segment's page CRC table.
func (r segmentRef) pagesAt() uint64 { return r.offset + alignUp(r.length, 4) }

func (r segmentRef) pages() uint64 { return (r.length + PageSize - 1) / PageSize }

// end is the offset just past the page CRC table.
func (r segmentRef) end() uint64 { return r.pagesAt() + 4*r.pages() }

const segmentRefSize = 80 // schema.SegmentRef: see FORMAT.md "SegmentRef"

// footer is the decoded footer (FORMAT.md "Footer").
type footer struct {
	version      uint32
	spec         Spec
	rng          Range
	fingerprints uint64
	segments     []segmentRef
}

func encodeFooter(f footer) []byte {
	fb := flatbuffers.NewBuilder(1024 + segmentRefSize*len(f.segments))
	hash := fb.CreateString(f.spec.Hash)
	sep := fb.CreateString(f.spec.KeySep)
	keys := make([]flatbuffers.UOffsetT, len(f.spec.Key))
	for i, k := range f.spec.Key {
		keys[i] = fb.CreateString(k)
	}
	schema.SpecStartKeyVector(fb, len(keys))
	for i := len(keys) - 1; i >= 0; i-- {
		fb.PrependUOffsetT(keys[i])
	}
	keyVec := fb.EndVector(len(keys))
	var format flatbuffers.UOffsetT
	if f.spec.Format != "" {
		format = fb.CreateString(f.spec.Format)
	}
	schema.SpecStart(fb)
	if format != 0 {
		schema.SpecAddFormat(fb, format)
	}
	schema.SpecAddHash(fb, hash)
	schema.SpecAddHashBits(fb, 128)
	schema.SpecAddKey(fb, keyVec)
	schema.SpecAddKeySep(fb, sep)
	spec := schema.SpecEnd(fb)

	schema.FooterStartSegmentsVector(fb, len(f.segments))
	for i := len(f.segments) - 1; i >= 0; i-- {
		s := f.segments[i]
		schema.CreateSegmentRef(fb, s.node.Prefix.Hi, s.node.Prefix.Lo, s.offset, s.length, s.count,
			s.first.Hi, s.first.Lo, s.last.Hi, s.last.Lo, s.pagesCRC, s.node.Bits)
	}
	segs := fb.EndVector(len(f.segments))

	schema.FooterStart(fb)
	schema.FooterAddPartitionIndex(fb, f.rng.Index)
	schema.FooterAddFingerprints(fb, f.fingerprints)
	schema.FooterAddSpec(fb, spec)
	schema.FooterAddSegments(fb, segs)
	schema.FooterAddFormatVersion(fb, f.version)
	schema.FooterAddSegmentMax(fb, SegmentMax)
	schema.FooterAddPageSize(fb, PageSize)
	schema.FooterAddPartitionBits(fb, f.rng.Bits)
	fb.FinishWithFileIdentifier(schema.FooterEnd(fb), []byte(FileIdentifier))
	return fb.FinishedBytes()
}

// decodeFooter checks every offset of the footer buffer before reading it,
// then the manifest's own invariants against the file layout.
func decodeFooter(buf []byte, footerOffset uint64, headerVersion uint32) (footer, error) {
	bad := func(format string, a ...any) (footer, error) {
		return footer{}, fmt.Errorf("%w: footer at offset %d: %s", ErrCorrupt, footerOffset, fmt.Sprintf(format, a...))
	}
	t, err := rootTable(buf)
	if err != nil {
		return bad("%v", err)
	}
	// Footer fields: 0 format_version, 1 spec, 2 partition_bits,
	// 3 partition_index, 4 segment_max, 5 page_size, 6 fingerprints, 7 segments.
	var f footer
	f.version = t.u32(0, 0)
	f.rng = Range{Bits: t.u8(2, 0), Index: t.u64(3, 0)}
	f.fingerprints = t.u64(6, 0)
	if t.err != nil {
		return bad("%v", t.err)
	}
	if f.version != headerVersion {
		return bad("format version %d, header says %d", f.version, headerVersion)
	}
	if sm, ps := t.u32(4, 0), t.u32(5, 0); sm != SegmentMax || ps != PageSize {
		return bad("segment_max %d page_size %d", sm, ps)
	}
	if !f.rng.Valid() {
		return bad("invalid partition %d of 2^%d", f.rng.Index, f.rng.Bits)
	}
	st := t.table(1)
	f.spec.Hash = string(st.str(0))
	if hb := st.u16(1, 128); hb != 128 {
		return bad("hash width %d bits", hb)
	}
	for _, k := range st.strs(2) {
		f.spec.Key = append(f.spec.Key, string(k))
	}
	f.spec.KeySep = string(st.str(3))
	f.spec.Format = string(st.str(4))
	if st.err != nil || t.err != nil {
		return bad("spec: %v", firstErr(st.err, t.err))
	}
	raw := t.vector(7, segmentRefSize)
	if t.err != nil {
		return bad("segments: %v", t.err)
	}
	n := len(raw) / segmentRefSize
	f.segments = make([]segmentRef, n)
	var total uint64
	for i := range f.segments {
		b := raw[i*segmentRefSize:]
		le := binary.LittleEndian
		s := segmentRef{
			node:     node{Prefix: Fingerprint{le.Uint64(b[0:]), le.Uint64(b[8:])}, Bits: b[76]},
			offset:   le.Uint64(b[16:]),
			length:   le.Uint64(b[24:]),
			count:    le.Uint64(b[32:]),
			first:    Fingerprint{le.Uint64(b[40:]), le.Uint64(b[48:])},
			last:     Fingerprint{le.Uint64(b[56:]), le.Uint64(b[64:])},
			pagesCRC: le.Uint32(b[72:]),
		}
		switch {
		case s.node.Bits > 128 || s.node.Prefix != s.node.Prefix.truncate(uint(s.node.Bits)):
			return bad("segment %d: bad prefix", i)
		case s.count == 0 || s.count > SegmentMax:
			return bad("segment %d: count %d", i, s.count)
		case s.offset%PageSize != 0 || s.offset < PageSize || s.length < 16*s.count || s.length > 1<<31:
			return bad("segment %d: offset %d length %d", i, s.offset, s.length)
		case s.offset > footerOffset || s.end() > footerOffset:
			// (The first test: offset + length must not wrap around.)
			return bad("segment %d: [%d, %d) runs into the footer", i, s.offset, s.end())
		case i > 0 && s.offset < f.segments[i-1].end():
			return bad("segment %d: overlaps segment %d", i, i-1)
		case !s.node.contains(s.first) || !s.node.contains(s.last) || s.last.Less(s.first) || s.count == 1 && s.first != s.last:
			return bad("segment %d: first/last outside its prefix", i)
		case i > 0 && !f.segments[i-1].last.Less(s.first):
			return bad("segment %d: not after segment %d", i, i-1)
		case i > 0 && (f.segments[i-1].node.contains(s.first) || s.node.contains(f.segments[i-1].last)):
			// Trie nodes are disjoint or nested; sorted neighbours
			// that nest would make a lookup pick the wrong one.
			return bad("segment %d: its prefix overlaps segment %d's", i, i-1)
		case uint(s.node.Bits) < uint(f.rng.Bits) || !f.rng.Contains(s.first):
			return bad("segment %d: outside the covered range %s", i, f.rng)
		}
		total += s.count
		f.segments[i] = s
	}
	if total != f.fingerprints {
		return bad("segments hold %d fingerprints, footer says %d", total, f.fingerprints)
	}
	return f, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
