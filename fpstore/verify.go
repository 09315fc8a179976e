package fpstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// VerifyReport lists what Verify found wrong with an index it could
// recognise. An empty Problems means the index is sound.
type VerifyReport struct {
	Path         string
	Segments     int
	Fingerprints uint64
	Problems     []string
}

// maxProblems bounds a report on a badly damaged file.
const maxProblems = 100

func (r *VerifyReport) add(format string, a ...any) bool {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
	return len(r.Problems) < maxProblems
}

// Verify checks everything about the index at path: every checksum,
// padding, the FlatBuffers structure, order and uniqueness, counts, each
// fingerprint inside its segment's prefix, the trie rule of segment
// boundaries (at Open, which every reader goes through), the directory,
// and the filter (rebuilt and compared byte for byte, since it is
// canonical). What the readers hand out is checked by them too
// (readcheck.go): Verify adds the padding, the directory, the filter and
// the pages no reader reads. It returns an error only when the file is
// not an index, has an unsupported version, or cannot be read; damage of a
// recognised index (truncation included) goes into the report.
func Verify(path string) (*VerifyReport, error) {
	rep := &VerifyReport{Path: path}
	x, err := Open(path)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			// A problem is said of the report's Path, as the others are.
			rep.add("%s", strings.TrimPrefix(err.Error(), path+": "))
			return rep, nil
		}
		return nil, err
	}
	defer x.Close()
	rep.Segments = x.Segments()
	rep.Fingerprints = x.Len()
	err = x.guard(func() error {
		x.verifyAll(rep)
		return nil
	})
	if err != nil {
		rep.add("%v", err)
	}
	return rep, nil
}

func (x *Index) verifyAll(rep *VerifyReport) {
	x.readWhole()
	segs := x.foot.segments
	if i := slices.IndexFunc(x.data[28:60], func(b byte) bool { return b != 0 }); i >= 0 {
		rep.add("non-zero reserved header byte at offset %d", 28+i)
	}
	// Padding between the parts must be zero: the bytes are canonical.
	gapStart := uint64(HeaderSize)
	checkGap := func(end uint64) {
		if end > gapStart {
			if i := slices.IndexFunc(x.data[gapStart:end], func(b byte) bool { return b != 0 }); i >= 0 {
				rep.add("non-zero padding byte at offset %d", gapStart+uint64(i))
			}
		}
	}
	for _, s := range segs {
		checkGap(s.offset)
		gapStart = s.offset + s.length
		checkGap(s.pagesAt())
		gapStart = s.end()
	}
	footerAt := uint64(x.size) - TrailerSize - x.footerLen()
	checkGap(footerAt)
	// The footer is canonical too: where it starts and every byte of it.
	if want := alignUp(gapStart, 8); footerAt != want {
		rep.add("footer at offset %d, canonical offset %d", footerAt, want)
	}
	if want := encodeFooter(x.foot); !bytes.Equal(x.data[footerAt:footerAt+x.footerLen()], want) {
		rep.add("footer at offset %d is not the canonical encoding of its contents", footerAt)
	}

	var sb segmentBuilder
	for i, ref := range segs {
		if len(rep.Problems) >= maxProblems {
			return
		}
		s, err := x.segment(i)
		if err != nil {
			rep.add("%v", err)
			continue
		}
		if err := s.verifyRange(0, uint64(len(s.buf))); err != nil {
			// Name every bad page, not just the first.
			for p := uint64(0); p < ref.pages(); p++ {
				if err := s.verifyPage(p); err != nil && !rep.add("%v", err) {
					return
				}
			}
			continue
		}
		x.verifySegment(rep, i, s, &sb)
	}
}

func (x *Index) footerLen() uint64 {
	t, _ := decodeTrailer(x.data[x.size-TrailerSize:], x.size)
	return t.FooterLength
}

func (x *Index) verifySegment(rep *VerifyReport, i int, s *segment, sb *segmentBuilder) {
	ref := s.ref
	where := fmt.Sprintf("segment %d at offset %d", i, ref.offset)
	for k, fp := range s.fps {
		if !ref.node.contains(fp) {
			rep.add("%s: fingerprint %d (%s) outside the segment's prefix", where, k, fp)
			return
		}
		if k > 0 && !s.fps[k-1].Less(fp) {
			rep.add("%s: fingerprint %d (%s) not above the one before (order or uniqueness broken)", where, k, fp)
			return
		}
	}
	if len(s.fps) > 0 && (s.fps[0] != ref.first || s.fps[len(s.fps)-1] != ref.last) {
		rep.add("%s: first/last fingerprints differ from the footer's", where)
	}
	// The trie rule of the boundaries is the footer's alone: Open has
	// checked it (checkTrieRule), as every reader relies on it.
	// Directory and filter are canonical: rebuild the segment and compare.
	want, err := sb.build(ref.node, s.fps)
	if err != nil {
		rep.add("%s: cannot rebuild: %v", where, err)
		return
	}
	hl := len(want.head)
	if len(s.buf) != hl+len(want.tail) || !bytes.Equal(want.head, s.buf[:hl]) || !bytes.Equal(want.tail, s.buf[hl:]) {
		if !slices.Equal(s.dir, buildDirectory(ref.node, s.fps)) {
			rep.add("%s: bucket directory is inconsistent with the fingerprints", where)
		}
		for k, fp := range s.fps {
			if !BloomTest(&s.filter[BloomBlock(fp, uint64(len(s.filter)))], fp) {
				rep.add("%s: filter misses fingerprint %d (%s): it would answer absent", where, k, fp)
				break
			}
		}
		rep.add("%s: bytes differ from the canonical encoding of its fingerprints", where)
	}
}
