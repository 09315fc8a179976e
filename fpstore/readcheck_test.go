package fpstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The readers' rule (readcheck.go): Scan, the cursors, the merges over
// them and a stitch's page stream hand out only what Verify would accept,
// or return an ErrCorrupt error that names the file.

// readerTruth is what a sound reading of x gives: each segment's
// fingerprints, and whether they may be handed out at all: its
// fingerprint pages match their CRCs and the fingerprints are strictly
// ascending from the footer's first to its last. (Computed here from the
// mapping with plain loops, independently of readcheck.go.)
type readerTruth struct {
	x   *Index
	fps [][]Fingerprint
	ok  []bool
}

func truthOf(x *Index) readerTruth {
	tr := readerTruth{x: x, fps: make([][]Fingerprint, x.Segments()), ok: make([]bool, x.Segments())}
	for i, ref := range x.foot.segments {
		_ = x.guard(func() error {
			s, err := x.segment(i)
			if err != nil {
				return err
			}
			if err := s.verifyRange(s.fpsAt, s.fpsAt+16*uint64(len(s.fps))); err != nil {
				return err
			}
			fps := slices.Clone(s.fps)
			ok := len(fps) > 0 && fps[0] == ref.first && fps[len(fps)-1] == ref.last
			for k := 1; ok && k < len(fps); k++ {
				ok = fps[k-1].Less(fps[k])
			}
			tr.fps[i], tr.ok[i] = fps, ok
			return nil
		})
	}
	return tr
}

// want is what a reader over range r (whole: the index) must hand out if
// it returns no error, and whether it may return no error: every segment
// whose node meets r must be sound.
func (tr readerTruth) want(r Range) ([]Fingerprint, bool) {
	var out []Fingerprint
	rn := r.node()
	for i, ref := range tr.x.foot.segments {
		if !rn.contains(ref.node.Prefix) && !ref.node.contains(rn.Prefix) {
			continue
		}
		if !tr.ok[i] {
			return nil, false
		}
		for _, fp := range tr.fps[i] {
			if r.Contains(fp) {
				out = append(out, fp)
			}
		}
	}
	return out, true
}

// trieRuleHolds is Verify's check of the segment boundaries, on the
// footer alone: every segment below the root has a parent holding more
// than SegmentMax.
func trieRuleHolds(x *Index) bool {
	for _, ref := range x.foot.segments {
		if ref.node.Bits <= x.foot.rng.Bits {
			continue
		}
		p := nodeOf(ref.node.Prefix, uint(ref.node.Bits)-1)
		var held uint64
		for _, o := range x.foot.segments {
			if p.contains(o.first) {
				held += o.count
			}
		}
		if held <= SegmentMax {
			return false
		}
	}
	return true
}

// readerOutput is what one reader handed out before it ended.
type readerOutput struct {
	name    string
	rng     Range
	fps     []Fingerprint
	err     error
	segCopy int // readPages: the segment streamed, +1 (0: another reader)
}

func readCursorAll(c *Cursor) ([]Fingerprint, error) {
	var got []Fingerprint
	buf := make([]Fingerprint, 777)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
	}
}

// readAllWays reads x with every reader: Scan, the whole cursor, a range
// cursor per range, two- and three-way unions of x with itself
// (MergeCursors' two code paths), and each segment as a stitch copies it
// (readPages, one page at a time so that fingerprints straddle reads).
func readAllWays(x *Index, ranges []Range) []readerOutput {
	var outs []readerOutput
	var scanned []Fingerprint
	err := x.Scan(func(fps []Fingerprint) error {
		scanned = append(scanned, fps...)
		return nil
	})
	outs = append(outs, readerOutput{name: "Scan", fps: scanned, err: err})
	fps, err := readCursorAll(x.Cursor())
	outs = append(outs, readerOutput{name: "Cursor", fps: fps, err: err})
	for _, r := range ranges {
		fps, err := readCursorAll(x.RangeCursor(r))
		outs = append(outs, readerOutput{name: "RangeCursor " + r.String(), rng: r, fps: fps, err: err})
	}
	for _, k := range []int{2, 3} {
		var merged []Fingerprint
		cs := make([]*Cursor, k)
		for i := range cs {
			cs[i] = x.Cursor()
		}
		err := MergeCursors(cs, Union, func(fps []Fingerprint) error {
			merged = append(merged, fps...)
			return nil
		})
		outs = append(outs, readerOutput{name: fmt.Sprintf("MergeCursors of %d", k), fps: merged, err: err})
	}
	for i := range x.foot.segments {
		var s *segment
		err := x.guard(func() (err error) {
			s, err = x.segment(i)
			return err
		})
		if err == nil {
			c := x.Cursor()
			for p := uint64(0); p < s.ref.pages() && err == nil; p++ {
				_, err = c.readPages(s, p, p+1)
			}
		}
		outs = append(outs, readerOutput{name: fmt.Sprintf("readPages of segment %d", i), err: err, segCopy: i + 1})
	}
	return outs
}

// checkReaderRule checks outs against the rule: an error wraps ErrCorrupt
// and names the file; no error means exactly what a sound reading gives
// (strictly ascending, in the covered range and the reader's range, every
// segment met sound). It returns a description of the first breach.
func checkReaderRule(x *Index, tr readerTruth, outs []readerOutput) string {
	if !trieRuleHolds(x) {
		return "Open accepted segments that break the trie rule"
	}
	for _, o := range outs {
		if o.err != nil {
			if !errors.Is(o.err, ErrCorrupt) {
				return fmt.Sprintf("%s: %v: not ErrCorrupt", o.name, o.err)
			}
			if !strings.Contains(o.err.Error(), x.Path()) {
				return fmt.Sprintf("%s: %v: does not name the file", o.name, o.err)
			}
			continue
		}
		if o.segCopy > 0 {
			// A segment's page stream: no error only for a sound segment.
			if !tr.ok[o.segCopy-1] {
				return fmt.Sprintf("%s: no error on a segment out of order or off its footer's first/last", o.name)
			}
			continue
		}
		for i, fp := range o.fps {
			switch {
			case i > 0 && !o.fps[i-1].Less(fp):
				return fmt.Sprintf("%s: %s after %s without an error", o.name, fp, o.fps[i-1])
			case !x.Range().Contains(fp) || !o.rng.Contains(fp):
				return fmt.Sprintf("%s: %s outside the covered range %s or the reader's %s without an error", o.name, fp, x.Range(), o.rng)
			case x.find(fp) < 0:
				return fmt.Sprintf("%s: %s in no segment's node without an error", o.name, fp)
			}
		}
		want, ok := tr.want(o.rng)
		if !ok {
			return fmt.Sprintf("%s: no error, but a segment it reads is out of order or off its footer's first/last", o.name)
		}
		if !slices.Equal(o.fps, want) {
			return fmt.Sprintf("%s: %d fingerprints without an error, a sound reading gives %d", o.name, len(o.fps), len(want))
		}
	}
	return ""
}

// layoutOf opens a copy of data and returns, per segment, where its
// fingerprints and directory start in its buffer.
func layoutOf(t *testing.T, data []byte) (fpsAt, dirAt []uint64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "layout.fpx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for i := range x.foot.segments {
		s, err := x.segment(i)
		if err != nil {
			t.Fatal(err)
		}
		fpsAt, dirAt = append(fpsAt, s.fpsAt), append(dirAt, s.dirAt)
	}
	return fpsAt, dirAt
}

// putFP writes fp at file offset off as the format stores it.
func putFP(b []byte, off uint64, fp Fingerprint) {
	binary.LittleEndian.PutUint64(b[off:], fp.Hi)
	binary.LittleEndian.PutUint64(b[off+8:], fp.Lo)
}

// writeChecksummed writes a copy of data, changed by mutate and with
// every checksum recomputed, to a new file.
func writeChecksummed(t *testing.T, data []byte, mutate func(b []byte)) string {
	t.Helper()
	b := slices.Clone(data)
	mutate(b)
	path := filepath.Join(t.TempDir(), "damaged.fpx")
	if err := os.WriteFile(path, fixChecksums(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadersRefuseChecksummedDamage: fingerprints out of order, repeated,
// outside their node, or off the footer's first or last, in a file whose
// checksums all agree (FuzzChecksummedOpen found the first: the half-range
// cursors gave 291+0 fingerprints where the whole cursor gave 300, and
// dump printed them out of order with exit 0). Every reader that meets
// the damaged segment fails with ErrCorrupt naming the file, the segment
// and an offset; a range cursor that does not meet it reads its range
// right.
func TestReadersRefuseChecksummedDamage(t *testing.T) {
	f := getDamageFixture(t)
	fpsAt, _ := layoutOf(t, f.data)
	big := len(f.refs) - 1
	fpOf := func(seg, k int) Fingerprint {
		lo, _ := slices.BinarySearchFunc(f.fps, f.refs[seg].first, Fingerprint.Compare)
		return f.fps[lo+k]
	}
	at := func(seg, k int) uint64 { return f.refs[seg].offset + fpsAt[seg] + 16*uint64(k) }
	perChunk := cursorChunk / 16
	cases := []struct {
		name   string
		seg    int
		k      int // the fingerprint named in the error
		mutate func(b []byte)
	}{
		{"swap", 1, 501, func(b []byte) {
			putFP(b, at(1, 500), fpOf(1, 501))
			putFP(b, at(1, 501), fpOf(1, 500))
		}},
		{"repeat", 1, 501, func(b []byte) { putFP(b, at(1, 501), fpOf(1, 500)) }},
		{"outside node", 2, 300, func(b []byte) { putFP(b, at(2, 300), fpOf(0, 7)) }},
		{"first", 3, 0, func(b []byte) {
			fp := fpOf(3, 0)
			fp.Lo--
			putFP(b, at(3, 0), fp)
		}},
		{"last", big, int(f.refs[big].count) - 1, func(b []byte) {
			k := int(f.refs[big].count) - 1
			fp := fpOf(big, k)
			fp.Lo++
			putFP(b, at(big, k), fp)
		}},
		{"swap across cursor chunks", big, perChunk, func(b []byte) {
			putFP(b, at(big, perChunk-1), fpOf(big, perChunk))
			putFP(b, at(big, perChunk), fpOf(big, perChunk-1))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeChecksummed(t, f.data, tc.mutate)
			rep, err := Verify(path)
			if err != nil || len(rep.Problems) == 0 {
				t.Fatalf("Verify: %v %v: the damage is not damage", err, rep)
			}
			x, err := Open(path)
			if err != nil {
				t.Fatal(err) // the footer is untouched
			}
			defer x.Close()
			ref := f.refs[tc.seg]
			// A range inside the damaged segment's node, its own part
			// sorted (the node's last 1/4: the damage is elsewhere in
			// all but "last"); one disjoint from it.
			inside := Range{Bits: ref.node.Bits + 2, Index: ref.node.Prefix.Hi>>(64-ref.node.Bits-2) | 3}
			other := Range{Bits: 1, Index: 0}
			if tc.seg == 0 {
				other = Range{Bits: 1, Index: 1}
			}
			outs := readAllWays(x, []Range{inside, other})
			if msg := checkReaderRule(x, truthOf(x), outs); msg != "" {
				t.Fatal(msg)
			}
			wantErr := fmt.Sprintf("segment %d at offset %d: fingerprint %d ", tc.seg, ref.offset, tc.k)
			for _, o := range outs {
				switch {
				case o.rng == other:
					var want []Fingerprint
					for _, fp := range f.fps {
						if other.Contains(fp) {
							want = append(want, fp)
						}
					}
					if o.err != nil || !slices.Equal(o.fps, want) {
						t.Errorf("%s, away from the damage: %d fingerprints, %v; want %d", o.name, len(o.fps), o.err, len(want))
					}
				case o.segCopy > 0 && o.segCopy-1 != tc.seg:
					if o.err != nil {
						t.Errorf("%s, a sound segment: %v", o.name, o.err)
					}
				case o.err == nil:
					t.Errorf("%s: no error (%d fingerprints)", o.name, len(o.fps))
				case !strings.Contains(o.err.Error(), wantErr):
					t.Errorf("%s: %v; want it to name %q", o.name, o.err, wantErr)
				}
			}
		})
	}
}

// TestOpenRefusesTrieRuleBreak: a segment one level below the root whose
// parent (the root) holds fewer than SegmentMax fingerprints; everything
// else, checksums included, agrees.
func TestOpenRefusesTrieRuleBreak(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	fps := randomFPs(r, 500)
	for i := range fps {
		fps[i].Hi >>= 1 // all in node 0…
	}
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, sortUnique(fps), WriterOptions{})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := writeChecksummed(t, data, func(b []byte) {
		tr, err := decodeTrailer(b[len(b)-TrailerSize:], int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		foot, err := decodeFooter(b[tr.FooterOffset:tr.FooterOffset+tr.FooterLength], tr.FooterOffset, FormatVersion)
		if err != nil {
			t.Fatal(err)
		}
		foot.segments[0].node.Bits = 1
		enc := encodeFooter(foot)
		if uint64(len(enc)) != tr.FooterLength {
			t.Fatalf("footer of %d bytes, was %d", len(enc), tr.FooterLength)
		}
		copy(b[tr.FooterOffset:], enc)
	})
	_, err = Open(damaged)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "trie rule") || !strings.Contains(err.Error(), damaged) {
		t.Fatalf("Open: %v; want ErrCorrupt naming the file and the trie rule", err)
	}
	rep, err := Verify(damaged)
	if err != nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "trie rule") {
		t.Fatalf("Verify: %v %v", err, rep)
	}
}

// TestLookupChecksBucket: a directory whose entries for bucket b point at
// bucket b+1's fingerprints (checksums agreeing). A lookup of one of
// bucket b's fingerprints stops at one of another bucket: an error, not a
// wrong "absent".
func TestLookupChecksBucket(t *testing.T) {
	f := getDamageFixture(t)
	_, dirAt := layoutOf(t, f.data)
	seg := len(f.refs) - 1
	ref := f.refs[seg]
	x0, err := Open(writeChecksummed(t, f.data, func([]byte) {}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := x0.segment(seg)
	if err != nil {
		t.Fatal(err)
	}
	dir := slices.Clone(s.dir)
	fps := slices.Clone(s.fps)
	depth, dirBits := s.depth, s.dirBits
	x0.Close()
	b := uint64(1000)
	for dir[b+1] == dir[b] || dir[b+2] == dir[b+1] {
		b++ // buckets b and b+1 not empty
	}
	path := writeChecksummed(t, f.data, func(buf []byte) {
		at := ref.offset + dirAt[seg] + 4*b
		binary.LittleEndian.PutUint32(buf[at:], dir[b+1])
		binary.LittleEndian.PutUint32(buf[at+4:], dir[b+2])
	})
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	probe := fps[dir[b]:dir[b+1]]
	for _, fp := range probe {
		if fp.bits(depth, dirBits) != b {
			t.Fatalf("%s is not in bucket %d", fp, b)
		}
		ok, err := x.Contains(fp)
		if !ok && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Contains(%s): %v, %v: a wrong absent", fp, ok, err)
		}
	}
	found := make([]bool, len(probe))
	if err := x.ContainsBatch(probe, found); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("ContainsBatch: %v, want ErrCorrupt naming the file", err)
	}
}

// TestStitchRefusesChecksummedDamage: a stitch copies a partition's
// segments whole (merge of partitions); a copied segment out of order is
// an error, and nothing is published.
func TestStitchRefusesChecksummedDamage(t *testing.T) {
	f := getDamageFixture(t)
	dir := t.TempDir()
	// Partition 0/2 is the fixture's first segment (node 0…); 1/2 the
	// rest, more than SegmentMax, so its segments are copied.
	n0 := int(f.refs[0].count)
	p0, p1 := filepath.Join(dir, "p0.fpx"), filepath.Join(dir, "p1.fpx")
	writeIndex(t, p0, f.fps[:n0], WriterOptions{Spec: Spec{Hash: "xxh3"}, Range: Range{Bits: 1, Index: 0}, Threads: 1})
	writeIndex(t, p1, f.fps[n0:], WriterOptions{Spec: Spec{Hash: "xxh3"}, Range: Range{Bits: 1, Index: 1}, Threads: 1})
	sound, err := os.ReadFile(p1)
	if err != nil {
		t.Fatal(err)
	}
	fpsAt, _ := layoutOf(t, sound)
	x1, err := Open(p1)
	if err != nil {
		t.Fatal(err)
	}
	refs := slices.Clone(x1.foot.segments)
	x1.Close()
	if len(refs) != len(f.refs)-1 {
		t.Fatalf("partition 1/2 has %d segments, want %d", len(refs), len(f.refs)-1)
	}
	for _, tc := range []struct {
		seg, k int
	}{{0, 400}, {len(refs) - 1, 70_001}} {
		t.Run(fmt.Sprintf("segment %d", tc.seg), func(t *testing.T) {
			ref := refs[tc.seg]
			lo, _ := slices.BinarySearchFunc(f.fps, ref.first, Fingerprint.Compare)
			a, b := f.fps[lo+tc.k-1], f.fps[lo+tc.k]
			damaged := writeChecksummed(t, sound, func(buf []byte) {
				putFP(buf, ref.offset+fpsAt[tc.seg]+16*uint64(tc.k-1), b)
				putFP(buf, ref.offset+fpsAt[tc.seg]+16*uint64(tc.k), a)
			})
			xs := make([]*Index, 2)
			for i, p := range []string{p0, damaged} {
				if xs[i], err = Open(p); err != nil {
					t.Fatal(err)
				}
				defer xs[i].Close()
			}
			out := filepath.Join(t.TempDir(), "out.fpx")
			st, err := Merge(out, xs, MergeOptions{})
			want := fmt.Sprintf("segment %d at offset %d: fingerprint %d ", tc.seg, ref.offset, tc.k)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), damaged) || !st.Stitched {
				t.Fatalf("Merge: %+v, %v; want a stitch failing with ErrCorrupt naming %s and %q", st, err, damaged, want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a failed stitch published %s: %v", out, err)
			}
		})
	}
}
