package fpstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzOpen writes arbitrary bytes to a file and opens it as an index. Open
// must fail with one of the package's sentinels or succeed; an opened index
// must answer Contains, ContainsBatch, Scan and Info without panicking,
// failing only with ErrCorrupt. Whatever Verify says, no reader (Scan, the
// whole and range cursors, MergeCursors, a stitch's page stream) may hand
// out what Verify would reject: each returns an ErrCorrupt error naming
// the file, or exactly what a sound reading gives (checkReaderRule). No
// lookup (Contains, Rank, ContainsBatch, a Set's) answers "absent" for a
// fingerprint that a segment holds and a lookup of it goes to, with no
// error (checkLookupRule). Where Verify finds nothing wrong, the index
// must be self-consistent (every scanned fingerprint found, random probes
// answered as the scanned set says) and canonical (rewriting its
// fingerprints gives the same bytes). Seeds: small sound indexes, and
// truncated and bit-flipped copies of them.
//
//	go test -run XXX -fuzz FuzzOpen -fuzztime 60s ./fpstore
func FuzzOpen(f *testing.F) {
	dir := addOpenSeeds(f)
	// One file, rewritten for each input: a worker runs inputs one at a
	// time, and a directory per input costs more than the test itself.
	path := filepath.Join(dir, "x.fpx")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFuzzedIndex(t, dir, path, data)
	})
}

// FuzzChecksummedOpen is FuzzOpen with every checksum of the input
// recomputed first (header, page CRC tables, footer, trailer), so that
// mutations reach the structure checks behind them: the footer and segment
// decoders, the FlatBuffers bounds checks, Verify's canonical rebuild, and
// the lookups' own checks (a seed with a bit flipped, checksums fixed,
// made Contains answer absent for a key its segment holds before them).
func FuzzChecksummedOpen(f *testing.F) {
	dir := addOpenSeeds(f)
	path := filepath.Join(dir, "x.fpx")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFuzzedIndex(t, dir, path, fixChecksums(data))
	})
}

// addOpenSeeds adds small sound indexes and truncated and bit-flipped
// copies of them; it returns a temp dir for the fuzz function.
func addOpenSeeds(f *testing.F) string {
	dir := f.TempDir()
	r := rand.New(rand.NewPCG(31, 32))
	for i, n := range []int{0, 1, 2, 40, 300} {
		path := filepath.Join(dir, "seed.fpx")
		opts := WriterOptions{}
		if i == 3 {
			opts = WriterOptions{Spec: Spec{Hash: "sha256", Key: []string{"a", "b"}, KeySep: ":"}}
		}
		fps := sortUnique(randomFPs(r, n))
		if i == 4 {
			// A partition: only fingerprints with the leading bits 01.
			opts.Range = Range{Bits: 2, Index: 1}
			for k := range fps {
				fps[k].Hi = fps[k].Hi>>2 | 1<<62
			}
			fps = sortUnique(fps)
		}
		writeIndex(f, path, fps, opts)
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if n == 0 {
			continue
		}
		for _, cut := range []int{len(b) - 1, len(b) - TrailerSize, len(b) / 2, PageSize, HeaderSize, 8} {
			f.Add(b[:cut])
		}
		for _, off := range []int{9, 60, 100, PageSize, PageSize + 5, len(b)/2 + 1, len(b) - 40, len(b) - 1} {
			c := slices.Clone(b)
			c[off] ^= 1 << (off % 8)
			f.Add(c)
		}
	}
	// Regression seeds from earlier fuzzing live in testdata/fuzz/.
	return dir
}

// checkFuzzedIndex writes data to path and checks what Open, the lookups,
// Scan, Info and Verify make of it.
func checkFuzzedIndex(t *testing.T, dir, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := Open(path)
	if err != nil {
		if !errors.Is(err, ErrNotIndex) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("Open: %v: not one of the package's sentinel errors", err)
		}
		rep, verr := Verify(path)
		if verr == nil && len(rep.Problems) == 0 {
			t.Fatalf("Open fails (%v) but Verify finds nothing wrong", err)
		}
		if verr != nil && errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open says damaged (%v) but Verify errs (%v) instead of reporting", err, verr)
		}
		return
	}
	defer x.Close()
	h := fnv.New64a()
	h.Write(data)
	rnd := rand.New(rand.NewPCG(h.Sum64(), 33))

	probes := make([]Fingerprint, 256)
	for i := range probes {
		probes[i] = Fingerprint{rnd.Uint64(), rnd.Uint64()}
	}
	answers := make([]bool, len(probes))
	containsErr := false
	for i, fp := range probes {
		ok, err := x.Contains(fp)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Contains: %v", err)
			}
			containsErr = true
		}
		answers[i] = ok
	}
	found := make([]bool, len(probes))
	if err := x.ContainsBatch(probes, found); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ContainsBatch: %v", err)
	}
	// The same probes read with pread (pread.go), batched and one by one,
	// in rounds of a few keys (the least buffers: every round's limit
	// reached, no directory held).
	x.forcePath.Store(uint32(pathPread))
	preadFound := make([]bool, len(probes))
	preadErr := x.ContainsBatch(probes, preadFound)
	if preadErr != nil && !errors.Is(preadErr, ErrCorrupt) {
		t.Fatalf("ContainsBatch (pread): %v", preadErr)
	}
	preadOne := make([]bool, len(probes))
	for i, fp := range probes[:32] {
		ok, err := x.Contains(fp)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Contains (pread): %v", err)
			}
			preadErr = err
		}
		preadOne[i] = ok
	}
	x.forcePath.Store(uint32(pathPlanned))
	if _, err := x.Info(1000); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Info: %v", err)
	}
	// Every streaming reader (Scan for dump; cursors, whole and over
	// ranges, for merge, reconcile and the dedup runs; MergeCursors; a
	// stitch's page stream), whatever Verify will say: an ErrCorrupt
	// error naming the file, or exactly what a sound reading gives. The
	// ranges: the two halves of the space, which together must give what
	// the whole cursor gives, and a narrower one, which lies inside one
	// segment of these small files.
	narrow := uint8(2 + rnd.IntN(7))
	ranges := []Range{{Bits: 1, Index: 0}, {Bits: 1, Index: 1}, {Bits: narrow, Index: rnd.Uint64N(1 << narrow)}}
	outs := readAllWays(x, ranges)
	if msg := checkReaderRule(x, truthOf(x), outs); msg != "" {
		t.Fatal(msg)
	}
	// Lookups never answer "absent" for what the index holds, through
	// the mapping or with pread.
	for _, p := range []readPath{pathPlanned, pathPread} {
		x.forcePath.Store(uint32(p))
		if msg := checkLookupRule(x); msg != "" {
			t.Fatalf("path %d: %s", p, msg)
		}
	}
	x.forcePath.Store(uint32(pathPlanned))
	scanned, scanErr := outs[0].fps, outs[0].err
	cursored, cursorErr := outs[1].fps, outs[1].err
	lo, loErr := outs[2].fps, outs[2].err
	hi, hiErr := outs[3].fps, outs[3].err
	if cursorErr == nil && loErr == nil && hiErr == nil && !slices.Equal(cursored, append(lo, hi...)) {
		t.Fatalf("the two half-range cursors give %d+%d fingerprints, the whole cursor %d, not the same", len(lo), len(hi), len(cursored))
	}

	rep, err := Verify(path)
	if err != nil {
		t.Fatalf("Open succeeds but Verify errs: %v", err)
	}
	if len(rep.Problems) > 0 {
		return
	}
	// A sound index: no lookup or reader may fail, and the answers must
	// agree with the fingerprints Scan gives.
	if scanErr != nil || containsErr || preadErr != nil {
		t.Fatalf("Verify finds nothing wrong, but Scan: %v, Contains failed: %v, pread: %v", scanErr, containsErr, preadErr)
	}
	for _, o := range outs {
		if o.err != nil {
			t.Fatalf("Verify finds nothing wrong, but %s: %v", o.name, o.err)
		}
	}
	if cursorErr != nil || !slices.Equal(cursored, scanned) {
		t.Fatalf("Verify finds nothing wrong, but the cursor gives %d fingerprints (%v), Scan %d", len(cursored), cursorErr, len(scanned))
	}
	if uint64(len(scanned)) != x.Len() {
		t.Fatalf("Scan gives %d fingerprints, Len %d", len(scanned), x.Len())
	}
	for i := 1; i < len(scanned); i++ {
		if !scanned[i-1].Less(scanned[i]) {
			t.Fatalf("Scan: %s after %s", scanned[i], scanned[i-1])
		}
	}
	inSet := func(fp Fingerprint) bool {
		_, ok := slices.BinarySearchFunc(scanned, fp, Fingerprint.Compare)
		return ok
	}
	for i, fp := range probes {
		if answers[i] != inSet(fp) || found[i] != inSet(fp) || preadFound[i] != inSet(fp) || i < 32 && preadOne[i] != inSet(fp) {
			t.Fatalf("%s: Contains %v, ContainsBatch %v, with pread %v and %v, in Scan %v", fp, answers[i], found[i], preadFound[i], preadOne[i], inSet(fp))
		}
	}
	all := make([]bool, len(scanned))
	if err := x.ContainsBatch(scanned, all); err != nil {
		t.Fatal(err)
	}
	for i, ok := range all {
		if !ok {
			t.Fatalf("scanned %s not found", scanned[i])
		}
	}
	// Canonical: the same fingerprints, spec and range give the same
	// bytes.
	again := filepath.Join(dir, "again.fpx")
	w, err := Create(again, WriterOptions{Spec: x.Spec(), Range: x.Range(), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(scanned...); err != nil {
		w.Abort()
		t.Fatalf("rewriting a verified index: %v", err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, data) {
		t.Fatalf("Verify passes a non-canonical file: rewriting it gives %d different bytes (%d before)", len(b), len(data))
	}
}

// checkLookupRule checks the lookups' rule (lookupcheck.go) on x: a
// fingerprint a segment holds (in its fingerprints vector, the segment
// that a lookup of it goes to, every page of the segment matching its CRC)
// is found, at its rank, or the lookup fails with ErrCorrupt naming the
// file: never "absent" with no error, whatever else is wrong with the
// segment. That holds for a segment of at most lookupCheckWhole
// fingerprints, which a fuzzer's are; lookups in a larger one see less
// (TestLookupsRefuseCraftedDamage). The oracle is the vector as it lies in
// the file, not Scan, which refuses a segment out of order. It returns a
// description of the first breach.
func checkLookupRule(x *Index) string {
	for i, ref := range x.foot.segments {
		if ref.count > lookupCheckWhole {
			continue
		}
		var held []Fingerprint
		var at []uint64 // held[k]'s index in the vector
		_ = x.guard(func() error {
			s, err := x.segment(i)
			if err != nil {
				return err // so are the lookups in it
			}
			for p := uint64(0); p < ref.pages(); p++ {
				end := min((p+1)*PageSize, ref.length)
				if crc32c(s.buf[p*PageSize:end]) != binary.LittleEndian.Uint32(s.crcs[4*p:]) {
					return nil
				}
			}
			for k, fp := range s.fps {
				if x.find(fp) == i {
					held, at = append(held, fp), append(at, uint64(k))
				}
			}
			return nil
		})
		if len(held) == 0 {
			continue
		}
		bad := func(what string, err error) string {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), x.Path()) {
				return fmt.Sprintf("%s: %v: not ErrCorrupt naming the file", what, err)
			}
			return ""
		}
		for k, fp := range held {
			if ok, err := x.Contains(fp); err != nil {
				if msg := bad("Contains", err); msg != "" {
					return msg
				}
			} else if !ok {
				return fmt.Sprintf("Contains(%s): absent with no error; segment %d holds it at %d", fp, i, at[k])
			}
			rank, ok, err := x.Rank(fp)
			switch {
			case err != nil:
				if msg := bad("Rank", err); msg != "" {
					return msg
				}
			case !ok:
				return fmt.Sprintf("Rank(%s): absent with no error; segment %d holds it at %d", fp, i, at[k])
			case rank != x.segRank[i]+at[k]:
				return fmt.Sprintf("Rank(%s) = %d with no error; segment %d holds it at %d, after %d", fp, rank, i, at[k], x.segRank[i])
			}
		}
		found := make([]bool, len(held))
		if err := x.ContainsBatch(held, found); err != nil {
			if msg := bad("ContainsBatch", err); msg != "" {
				return msg
			}
		} else if k := slices.Index(found, false); k >= 0 {
			return fmt.Sprintf("ContainsBatch: %s absent with no error; segment %d holds it at %d", held[k], i, at[k])
		}
		if set, err := NewSet([]*Index{x}); err == nil {
			var look Lookups
			if err := set.ContainsBatch(held, found, &look); err != nil {
				if msg := bad("Set.ContainsBatch", err); msg != "" {
					return msg
				}
			} else if k := slices.Index(found, false); k >= 0 {
				return fmt.Sprintf("Set.ContainsBatch: %s absent with no error; segment %d holds it at %d", held[k], i, at[k])
			}
		}
	}
	return ""
}

// fixChecksums returns a copy of b whose checksums are recomputed where
// the structure can be followed: the header CRC; each segment's page CRC
// table and its CRC in the footer's SegmentRef; the footer CRC in the
// trailer; the trailer CRC.
func fixChecksums(b []byte) []byte {
	b = slices.Clone(b)
	le := binary.LittleEndian
	if len(b) >= HeaderSize {
		le.PutUint32(b[60:], crc32c(b[:60]))
	}
	if len(b) < HeaderSize+TrailerSize {
		return b
	}
	tr := b[len(b)-TrailerSize:]
	end := uint64(len(b) - TrailerSize)
	off, n := le.Uint64(tr[0:]), le.Uint64(tr[8:])
	if off <= end && n <= end-off {
		foot := b[off : off+n]
		if t, err := rootTable(foot); err == nil {
			base, raw := t.vectorAt(7, segmentRefSize)
			for i := 0; t.err == nil && i+segmentRefSize <= len(raw); i += segmentRefSize {
				ref := raw[i:]
				so, sl := le.Uint64(ref[16:]), le.Uint64(ref[24:])
				r := segmentRef{offset: so, length: sl}
				if so > end || sl > end-so || sl > 1<<31 || r.end() > end {
					continue
				}
				buf, crcs := b[so:so+sl], b[r.pagesAt():r.end()]
				for p := uint64(0); p < r.pages(); p++ {
					le.PutUint32(crcs[4*p:], crc32c(buf[p*PageSize:min((p+1)*PageSize, sl)]))
				}
				le.PutUint32(foot[base+uint64(i)+72:], crc32c(crcs))
			}
		}
		le.PutUint32(tr[16:], crc32c(foot))
	}
	le.PutUint32(tr[20:], crc32c(tr[:20]))
	return b
}
