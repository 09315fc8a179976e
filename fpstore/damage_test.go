package fpstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The damage tests flip one byte in every part of a multi-segment index
// (FORMAT.md: header, each part of a segment, the page CRC tables, padding,
// footer, trailer), truncate it at many lengths, give it a future version,
// and truncate it under an open mapping. Whatever the damage, Verify must
// report it, and a lookup must give the right answer or an ErrCorrupt
// error: never a wrong "absent", never a panic or a SIGBUS.

// damageFixture is a sound index with several segments, built once per
// test binary and kept in memory; each case writes its own damaged copy.
type damageFixtureT struct {
	data []byte
	fps  []Fingerprint // sorted, unique
	refs []segmentRef
	err  error
}

var (
	damageOnce    sync.Once
	damageFixture damageFixtureT
)

// Segment boundaries depend only on the fingerprints (a node holding at
// most SegmentMax whose parent holds more), so a chain of small nodes
// 0…, 10…, 110…, … beside one big node 1^K… makes K+1 segments from
// SegmentMax+K·m fingerprints: K small segments whose lookups are cheap to
// check exhaustively, one full one with multi-page directory and filter,
// and more than 16 segments in all, so lookups go through the leading-bits
// segment table.
const (
	chainSmall = 17   // small segments
	chainEach  = 1000 // fingerprints in each small segment
)

func chainFingerprints(r *rand.Rand) []Fingerprint {
	var fps []Fingerprint
	for i := 0; i < chainSmall; i++ {
		// i ones, then a zero, then random bits.
		for k := 0; k < chainEach; k++ {
			hi := r.Uint64()>>(i+1) | ^(^uint64(0) >> i)
			fps = append(fps, Fingerprint{hi, r.Uint64()})
		}
	}
	// The big node 1^chainSmall holds SegmentMax+1-chainEach, so its parent
	// (with the last small node) holds SegmentMax+1: it splits.
	for k := 0; k < SegmentMax+1-chainEach; k++ {
		fps = append(fps, Fingerprint{r.Uint64() | ^(^uint64(0) >> chainSmall), r.Uint64()})
	}
	slices.SortFunc(fps, Fingerprint.Compare)
	return slices.Compact(fps)
}

func getDamageFixture(t *testing.T) *damageFixtureT {
	t.Helper()
	damageOnce.Do(func() {
		f := &damageFixture
		f.fps = chainFingerprints(rand.New(rand.NewPCG(11, 12)))
		dir, err := os.MkdirTemp("", "fpstore-damage-*")
		if err != nil {
			f.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "x.fpx")
		w, err := Create(path, WriterOptions{Spec: Spec{Hash: "xxh3", Key: []string{"user_id", "ts"}, KeySep: ":"}})
		if err != nil {
			f.err = err
			return
		}
		if err := w.Add(f.fps...); err != nil {
			w.Abort()
			f.err = err
			return
		}
		if _, err := w.Commit(); err != nil {
			f.err = err
			return
		}
		if f.data, f.err = os.ReadFile(path); f.err != nil {
			return
		}
		x, err := Open(path)
		if err != nil {
			f.err = err
			return
		}
		f.refs = slices.Clone(x.foot.segments)
		x.Close()
	})
	if damageFixture.err != nil {
		t.Fatal(damageFixture.err)
	}
	return &damageFixture
}

func TestDamageFixtureShape(t *testing.T) {
	f := getDamageFixture(t)
	if len(f.refs) != chainSmall+1 {
		t.Fatalf("%d segments, want %d", len(f.refs), chainSmall+1)
	}
	last := f.refs[len(f.refs)-1]
	if last.length < 4*PageSize*10 || last.count < SegmentMax/2 {
		t.Fatalf("last segment too small to have multi-page parts: %+v", last)
	}
	path := filepath.Join(t.TempDir(), "x.fpx")
	if err := os.WriteFile(path, f.data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(path)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("fixture does not verify: %v %v", err, rep)
	}
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.lutBits == 0 {
		t.Fatalf("%d segments but no leading-bits table: lookups do not exercise it", x.Segments())
	}
	// Every fingerprint, one by one and in batches; absent ones in every
	// segment's range and between them.
	checkLookups(t, x, f.fps, f.fps, true)
	r := rand.New(rand.NewPCG(13, 14))
	var absent []Fingerprint
	for i := 0; i < 200_000; i++ {
		fp := Fingerprint{r.Uint64() | ^(^uint64(0) >> r.IntN(chainSmall+1)), r.Uint64()}
		if _, ok := slices.BinarySearchFunc(f.fps, fp, Fingerprint.Compare); !ok {
			absent = append(absent, fp)
		}
	}
	checkLookups(t, x, f.fps, absent, true)
}

// coldProbes is about how many probes checkLookups gives each cold path.
const coldProbes = 40_000

// checkLookups asks x for each of probe, singly and in batches, and checks
// the answers against the sorted set want. With sound, any error fails;
// otherwise an error must wrap ErrCorrupt, and an answer that comes back
// must be right. The cold paths are given a sample of a large probe, and
// every one of focus. It returns how many lookups failed.
func checkLookups(t *testing.T, x *Index, want, probe []Fingerprint, sound bool, focus ...Fingerprint) (failed int) {
	t.Helper()
	in := func(fp Fingerprint) bool {
		_, ok := slices.BinarySearchFunc(want, fp, Fingerprint.Compare)
		return ok
	}
	bad := func(err error, what string) {
		t.Helper()
		failed++
		if sound || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// One by one on a sample (Contains has its own code path).
	step := max(1, len(probe)/5000)
	for i := 0; i < len(probe); i += step {
		fp := probe[i]
		ok, err := x.Contains(fp)
		if err != nil {
			bad(err, "Contains "+fp.String())
			continue
		}
		if ok != in(fp) {
			t.Fatalf("Contains(%s) = %v, want %v: a wrong answer", fp, ok, in(fp))
		}
	}
	// One by one on a sample again, read with pread (pread.go).
	x.forcePath.Store(uint32(pathPread))
	for i := 0; i < len(probe); i += 4 * step {
		fp := probe[i]
		ok, err := x.Contains(fp)
		if err != nil {
			bad(err, "Contains (pread) "+fp.String())
			continue
		}
		if ok != in(fp) {
			t.Fatalf("Contains(%s) (pread) = %v, want %v: a wrong answer", fp, ok, in(fp))
		}
	}
	x.forcePath.Store(uint32(pathPlanned))
	// All in batches, as an index in memory reads them, then as a cold
	// one does (coldread.go: large groups whose pages are asked for at
	// once; a batch of 5000 is a small first group and a large one), then
	// with pread (pread.go). The cold paths cost ~15 µs a key in a dense
	// run (a damaged segment's every key), so past coldProbes they take
	// every k-th probe (~18 of a page's 256 keys in the largest segment
	// damaged), and every one of focus (a flipped fingerprint's page).
	coldProbe := probe
	if k := len(probe)/coldProbes + 1; k > 1 {
		coldProbe = make([]Fingerprint, 0, len(probe)/k+1)
		for i := 0; i < len(probe); i += k {
			coldProbe = append(coldProbe, probe[i])
		}
	}
	coldProbe = append(coldProbe[:len(coldProbe):len(coldProbe)], focus...)
	for _, p := range []readPath{pathMapped, pathAdvised, pathPread} {
		cold := p != pathMapped
		x.forceCold.Store(p == pathAdvised)
		x.forcePath.Store(uint32(p))
		batch, probe := 4096, probe
		if cold {
			batch, probe = 5000, coldProbe
		} else if testing.Short() {
			probe = coldProbe // the race step: the mapping's goroutines on a sample too
		}
		found := make([]bool, batch)
		for base := 0; base < len(probe); base += batch {
			if cold && testing.Short() && base >= 4*batch {
				break // the race step: the cold path on the first 20000 probes
			}
			fps := probe[base:min(base+batch, len(probe))]
			if err := x.ContainsBatch(fps, found[:len(fps)]); err != nil {
				bad(err, fmt.Sprintf("ContainsBatch (path %d)", p))
				continue
			}
			for k, fp := range fps {
				if found[k] != in(fp) {
					t.Fatalf("ContainsBatch (path %d): %s: %v, want %v: a wrong answer", p, fp, found[k], in(fp))
				}
			}
		}
	}
	x.forceCold.Store(false)
	x.forcePath.Store(uint32(pathPlanned))
	return failed
}

// region is a byte range [from, to) of the file with a name.
type region struct {
	name     string
	from, to uint64
	seg      int // the segment it belongs to, -1 for file-level parts
}

// regions names every part of the fixture's bytes.
func regions(t *testing.T, data []byte, refs []segmentRef) []region {
	t.Helper()
	size := uint64(len(data))
	tr, err := decodeTrailer(data[size-TrailerSize:], int64(size))
	if err != nil {
		t.Fatal(err)
	}
	rs := []region{
		{"header magic", 0, 8, -1},
		{"header version", 8, 12, -1},
		{"header size", 12, 16, -1},
		{"header page size", 16, 20, -1},
		{"header segment max", 20, 24, -1},
		{"header flags", 24, 28, -1},
		{"header reserved", 28, 60, -1},
		{"header crc", 60, 64, -1},
		{"padding after header", HeaderSize, refs[0].offset, -1},
		{"padding before footer", refs[len(refs)-1].end(), tr.FooterOffset, -1},
		{"footer", tr.FooterOffset, tr.FooterOffset + tr.FooterLength, -1},
		{"trailer footer offset", size - 32, size - 24, -1},
		{"trailer footer length", size - 24, size - 16, -1},
		{"trailer footer crc", size - 16, size - 12, -1},
		{"trailer crc", size - 12, size - 8, -1},
		{"trailer magic", size - 8, size, -1},
	}
	for i, ref := range refs {
		buf := data[ref.offset : ref.offset+ref.length]
		tb, err := rootTable(buf)
		if err != nil {
			t.Fatal(err)
		}
		objLen := uint64(binary.LittleEndian.Uint16(buf[tb.vtable+2:]))
		at := func(from, to uint64, name string) region {
			return region{fmt.Sprintf("segment %d %s", i, name), ref.offset + from, ref.offset + to, i}
		}
		parts := []region{
			at(0, 4, "root offset"),
			at(4, 8, "file identifier"),
			at(uint64(tb.vtable), uint64(tb.vtable)+uint64(tb.vlen), "vtable"),
			at(uint64(tb.pos), uint64(tb.pos)+objLen, "table"),
		}
		// The vectors where the reader finds them (so that the test
		// follows the schema's field numbers): each after its length word.
		seg, err := loadSegment(data, ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			at, bytes uint64
			name      string
		}{
			{seg.dirAt, 4 * uint64(len(seg.dir)), "directory"},
			{seg.filterAt, 64 * uint64(len(seg.filter)), "filter"},
			{seg.fpsAt, 16 * uint64(len(seg.fps)), "fingerprints"},
		} {
			parts = append(parts,
				at(v.at-4, v.at, v.name+" length"),
				at(v.at, v.at+v.bytes, v.name))
		}
		// Alignment padding inside the FlatBuffers buffer: what no part
		// above covers.
		covered := make([]bool, ref.length)
		for _, p := range parts {
			for o := p.from; o < p.to; o++ {
				covered[o-ref.offset] = true
			}
		}
		for o := uint64(0); o < ref.length; o++ {
			if !covered[o] {
				e := o
				for e < ref.length && !covered[e] {
					e++
				}
				parts = append(parts, at(o, e, "flatbuffers padding"))
				o = e
			}
		}
		parts = append(parts,
			at(ref.length, alignUp(ref.length, 4), "crc table padding"),
			region{fmt.Sprintf("segment %d page crc table", i), ref.pagesAt(), ref.end(), i})
		if i+1 < len(refs) {
			parts = append(parts, region{fmt.Sprintf("padding after segment %d", i), ref.end(), refs[i+1].offset, i})
		}
		rs = append(rs, parts...)
	}
	// Sanity: the regions cover every byte of the file exactly once.
	cover := make([]uint8, size)
	for _, r := range rs {
		for o := r.from; o < r.to; o++ {
			cover[o]++
		}
	}
	for o, c := range cover {
		if c != 1 {
			t.Fatalf("byte %d is covered by %d regions", o, c)
		}
	}
	return slices.DeleteFunc(rs, func(r region) bool { return r.to <= r.from })
}

// flipPoints picks offsets in a region: its first and last byte, and
// unless -short its middle one.
func flipPoints(r region) []uint64 {
	pts := []uint64{r.from, r.to - 1}
	if !testing.Short() {
		pts = append(pts, r.from+(r.to-r.from)/2)
	}
	slices.Sort(pts)
	return slices.Compact(pts)
}

func TestDamageFlipEveryPart(t *testing.T) {
	f := getDamageFixture(t)
	rs := regions(t, f.data, f.refs)
	// Every file-level part; in segments, every part of the first two small
	// ones and of the big last one. Verify rebuilds every segment each
	// time, which bounds how many flips fit.
	keep := map[int]bool{-1: true, 0: true, 1: true, len(f.refs) - 1: true}
	if testing.Short() {
		// The race step: the file's parts and a small segment's; the
		// large segment's parts are read by the same code, in more pages.
		keep = map[int]bool{-1: true, 1: true}
	}
	dir := t.TempDir()
	cases := 0
	t.Run("flips", func(t *testing.T) {
		for _, r := range rs {
			if !keep[r.seg] {
				continue
			}
			for _, off := range flipPoints(r) {
				cases++
				path := filepath.Join(dir, fmt.Sprintf("x%d.fpx", off))
				t.Run(fmt.Sprintf("%s@%d", r.name, off), func(t *testing.T) {
					t.Parallel()
					writeFlipped(t, path, f.data, off)
					checkDamaged(t, f, path, r, off)
					os.Remove(path)
				})
			}
		}
	})
	t.Logf("%d flips in %d regions", cases, len(rs))
}

// writeFlipped writes data to path with the byte at off inverted.
func writeFlipped(t *testing.T, path string, data []byte, off uint64) {
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte{data[off] ^ 0xff}, int64(off)); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkDamaged checks one damaged copy at path.
func checkDamaged(t *testing.T, f *damageFixtureT, path string, r region, off uint64) {
	rep, err := Verify(path)
	switch {
	case off < uint64(len(Magic)):
		if !errors.Is(err, ErrNotIndex) {
			t.Fatalf("Verify with a damaged magic: %v, want ErrNotIndex", err)
		}
	case err != nil:
		t.Fatalf("Verify errs on a recognised index: %v", err)
	case len(rep.Problems) == 0:
		t.Fatalf("Verify finds nothing wrong")
	}

	x, err := Open(path)
	if err != nil {
		if off < uint64(len(Magic)) {
			if !errors.Is(err, ErrNotIndex) {
				t.Fatalf("Open: %v, want ErrNotIndex", err)
			}
			return
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
		return
	}
	defer x.Close()
	// Probe the touched segment's fingerprints (all of them) and absent
	// keys in its range; for file-level parts, samples of every segment.
	var probe []Fingerprint
	if r.seg >= 0 {
		ref := f.refs[r.seg]
		lo, _ := slices.BinarySearchFunc(f.fps, ref.first, Fingerprint.Compare)
		probe = append(probe, f.fps[lo:lo+int(ref.count)]...)
		rnd := rand.New(rand.NewPCG(off, 17))
		for i := 0; i < 2000; i++ {
			// Random bits below the node's prefix (all nodes here are
			// shallower than 64 bits).
			fp := Fingerprint{ref.node.Prefix.Hi | rnd.Uint64()>>ref.node.Bits, rnd.Uint64()}
			probe = append(probe, fp)
		}
	} else {
		for i := 0; i < len(f.fps); i += 97 {
			probe = append(probe, f.fps[i])
		}
	}
	// The cold paths take a sample of a large probe; a flipped fingerprint
	// is asked of them too, with the rest of its page.
	var focus []Fingerprint
	if r.seg >= 0 && strings.HasSuffix(r.name, " fingerprints") {
		i := int((off - r.from) / 16)
		focus = probe[max(0, i-PageSize/16):min(int(f.refs[r.seg].count), i+PageSize/16)]
	}
	checkLookups(t, x, f.fps, probe, false, focus...)

	// Scan gives every fingerprint in order, or stops with ErrCorrupt.
	var got []Fingerprint
	err = x.Scan(func(fps []Fingerprint) error {
		got = append(got, fps...)
		return nil
	})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Scan: %v", err)
		}
		if !slices.Equal(got, f.fps[:len(got)]) {
			t.Fatalf("Scan gave wrong fingerprints before failing")
		}
	} else if !slices.Equal(got, f.fps) {
		t.Fatalf("Scan gave wrong fingerprints (%d of %d) and no error", len(got), len(f.fps))
	}
	if _, err := x.Info(1000); err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Info: %v", err)
	}
}

func TestDamageTruncate(t *testing.T) {
	f := getDamageFixture(t)
	size := uint64(len(f.data))
	tr, err := decodeTrailer(f.data[size-TrailerSize:], int64(size))
	if err != nil {
		t.Fatal(err)
	}
	mid := f.refs[len(f.refs)-1]
	lengths := []uint64{0, 1, 7, 8, 9, 63, 64, 65, 95, 96, 4095, 4096, 4097,
		f.refs[1].offset, f.refs[1].pagesAt(), f.refs[1].end(),
		mid.offset + mid.length/2, mid.pagesAt() + 2, mid.end(),
		tr.FooterOffset, tr.FooterOffset + tr.FooterLength/2,
		size - TrailerSize, size - 8, size - 1}
	dir := t.TempDir()
	for _, n := range lengths {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("t%d.fpx", n))
			if err := os.WriteFile(path, f.data[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(path)
			if n < uint64(len(Magic)) {
				if !errors.Is(err, ErrNotIndex) {
					t.Fatalf("Verify: %v %v, want ErrNotIndex", rep, err)
				}
			} else if err != nil || len(rep.Problems) == 0 {
				t.Fatalf("Verify: %v %v, want damage reported", rep, err)
			}
			x, err := Open(path)
			if err == nil {
				x.Close()
				t.Fatal("Open accepted a truncated index")
			}
			if n < uint64(len(Magic)) {
				if !errors.Is(err, ErrNotIndex) {
					t.Fatalf("Open: %v, want ErrNotIndex", err)
				}
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestDamageAppended: bytes after the trailer, or two indexes end to end
// (cat a.fpx b.fpx), are damage too.
func TestDamageAppended(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.fpx")
	writeIndex(t, small, sortUnique(randomFPs(rand.New(rand.NewPCG(18, 19)), 1000)), WriterOptions{})
	b, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"zero byte":    append(slices.Clone(b), 0),
		"zero page":    append(slices.Clone(b), make([]byte, PageSize)...),
		"concatenated": append(slices.Clone(b), b...),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "x.fpx")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(path)
			if err != nil || len(rep.Problems) == 0 {
				t.Fatalf("Verify: %v %v, want damage reported", rep, err)
			}
			if x, err := Open(path); err == nil {
				x.Close()
				t.Fatal("Open accepted it")
			} else if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}

// setHeaderVersion writes version v into a header and recomputes its CRC,
// as a future writer would.
func setHeaderVersion(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b[8:], v)
	binary.LittleEndian.PutUint32(b[60:], crc32c(b[:60]))
}

func TestDamageFutureVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.fpx")
	writeIndex(t, path, sortUnique(randomFPs(rand.New(rand.NewPCG(20, 21)), 5000)), WriterOptions{})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint32{MinFormatVersion - 1, FormatVersion + 1, FormatVersion + 100, 1 << 31} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			d := slices.Clone(b)
			setHeaderVersion(d, v)
			p := filepath.Join(dir, fmt.Sprintf("v%d.fpx", v))
			if err := os.WriteFile(p, d, 0o644); err != nil {
				t.Fatal(err)
			}
			if x, err := Open(p); !errors.Is(err, ErrUnsupportedVersion) {
				if err == nil {
					x.Close()
				}
				t.Fatalf("Open: %v, want ErrUnsupportedVersion", err)
			}
			if rep, err := Verify(p); !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("Verify: %v %v, want ErrUnsupportedVersion", rep, err)
			}
			// The same with a wrong header CRC is damage, not a version.
			d[60] ^= 1
			if err := os.WriteFile(p, d, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(p); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open with a bad header CRC: %v, want ErrCorrupt", err)
			}
		})
	}
	// The sound file, rewritten with the current version, still opens.
	setHeaderVersion(b, FormatVersion)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	x.Close()
}

// TestDamageTruncatedWhileMapped truncates the file under an open Index:
// reads of pages past the new end fault (SIGBUS without
// debug.SetPanicOnFault); every lookup must return an error instead.
func TestDamageTruncatedWhileMapped(t *testing.T) {
	f := getDamageFixture(t)
	for _, tc := range []struct {
		name   string
		warm   bool   // look everything up before truncating
		length uint64 // truncate to
		path   readPath
	}{
		{"cold-to-header", false, HeaderSize, pathPlanned},
		{"cold-to-zero", false, 0, pathPlanned},
		{"warm-to-first-page", true, PageSize, pathPlanned},
		{"warm-mid-last-segment", true, f.refs[len(f.refs)-1].offset + PageSize, pathPlanned},
		{"pread-cold-to-header", false, HeaderSize, pathPread},
		{"pread-warm-mid-last-segment", true, f.refs[len(f.refs)-1].offset + PageSize, pathPread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.fpx")
			if err := os.WriteFile(path, f.data, 0o644); err != nil {
				t.Fatal(err)
			}
			x, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if tc.warm {
				checkLookups(t, x, f.fps, f.fps, true)
			}
			x.forcePath.Store(uint32(tc.path))
			if err := os.Truncate(path, int64(tc.length)); err != nil {
				t.Fatal(err)
			}
			// The last segment lies past every truncation point: all its
			// lookups must fail, never answer "absent".
			last := f.refs[len(f.refs)-1]
			lo := sort.Search(len(f.fps), func(i int) bool { return !f.fps[i].Less(last.first) })
			tail := f.fps[lo:]
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for g := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; i < len(tail); i += 1 + len(tail)/500 {
						ok, err := x.Contains(tail[i])
						if err == nil {
							if !ok {
								errs[g] = fmt.Errorf("Contains(%s) = absent after truncation, no error", tail[i])
								return
							}
							continue
						}
						if !errors.Is(err, ErrCorrupt) {
							errs[g] = fmt.Errorf("Contains: %v, want ErrCorrupt", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			found := make([]bool, len(tail))
			if err := x.ContainsBatch(tail, found); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ContainsBatch past the end: %v, want ErrCorrupt", err)
			}
			// Scan's callback reads the mapped slice: the fault there
			// must be an error too.
			var sum uint64
			if err := x.Scan(func(fps []Fingerprint) error {
				for _, fp := range fps {
					sum += fp.Lo
				}
				return nil
			}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Scan: %v, want ErrCorrupt", err)
			}
			// Info's random probes may all land in segments that
			// survived; it may succeed, but not panic or misreport.
			if _, err := x.Info(1000); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Info: %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestVerifyNonCanonicalFooter: a footer that decodes to the same values
// but is not the canonical encoding (8 zero bytes after the file
// identifier, the root offset moved past them; every other offset is
// relative, so the buffer stays valid), or the footer placed after more
// zero padding than its alignment needs, makes a file that is not
// canonical (FORMAT.md "Canonical bytes": the footer follows from the
// segments, spec and range). Verify says the bytes are canonical when it
// finds nothing.
func TestVerifyNonCanonicalFooter(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.fpx")
	writeIndex(t, path, sortUnique(randomFPs(rand.New(rand.NewPCG(22, 23)), 3000)), WriterOptions{})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(b))
	tr, err := decodeTrailer(b[size-TrailerSize:], size)
	if err != nil {
		t.Fatal(err)
	}
	foot := b[tr.FooterOffset : tr.FooterOffset+tr.FooterLength]
	le := binary.LittleEndian
	moved := append(le.AppendUint32(nil, le.Uint32(foot)+8), foot[4:8]...)
	moved = append(moved, make([]byte, 8)...)
	moved = append(moved, foot[8:]...)
	relaid := append(slices.Clone(b[:tr.FooterOffset]), moved...)
	relaid = append(relaid, encodeTrailer(trailer{FooterOffset: tr.FooterOffset, FooterLength: uint64(len(moved)), FooterCRC: crc32c(moved)})...)
	// The same footer 8 bytes further on, after more zero padding than
	// the alignment asks for: also not canonical.
	shifted := append(slices.Clone(b[:tr.FooterOffset]), make([]byte, 8)...)
	shifted = append(shifted, foot...)
	shifted = append(shifted, encodeTrailer(trailer{FooterOffset: tr.FooterOffset + 8, FooterLength: tr.FooterLength, FooterCRC: tr.FooterCRC})...)
	for name, data := range map[string][]byte{"relaid footer": relaid, "extra padding": shifted} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := Open(path)
		if err != nil {
			t.Fatalf("%s: does not even open: %v", name, err)
		}
		x.Close()
		rep, err := Verify(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) == 0 {
			t.Errorf("%s: Verify finds nothing wrong with a non-canonical file", name)
		}
	}
}

// TestLengthWordsWithinChecksums: a filter's or fingerprints' length word
// that is not its count, its checksums made right (a writer's damage, not
// the disk's), in a small segment and in the big one. Opening a segment
// does not read those words (a page each, a device read each when cold),
// so they are checked where their pages are read: through the mapping,
// with pread and by a cursor, each an ErrCorrupt naming the word; Verify reports it;
// and a lookup of any of the segment's fingerprints answers present or
// that error, never absent.
func TestLengthWordsWithinChecksums(t *testing.T) {
	f := getDamageFixture(t)
	for _, si := range []int{0, len(f.refs) - 1} {
		ref := f.refs[si]
		s, err := loadSegment(f.data, ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range s.lenWords {
			t.Run(fmt.Sprintf("segment %d %s", si, w.what), func(t *testing.T) {
				data := slices.Clone(f.data)
				at := ref.offset + w.at
				binary.LittleEndian.PutUint32(data[at:], uint32(w.want+1))
				data = fixChecksums(data)
				path := filepath.Join(t.TempDir(), "x.fpx")
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				rep, err := Verify(path)
				if err != nil || len(rep.Problems) == 0 {
					t.Fatalf("Verify: %v, %v: the damage not reported", rep, err)
				}
				x, err := Open(path, WithReadBuffers(1<<20))
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer x.Close()
				lo, hi := segmentSpan(f, si)
				for _, fp := range f.fps[lo:hi] {
					if ok, err := x.Contains(fp); !ok && !errors.Is(err, ErrCorrupt) {
						t.Fatalf("Contains(%v) = %v, %v: a key the segment holds said absent", fp, ok, err)
					}
				}
				s, err := x.segment(si)
				if err != nil {
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "length word") {
						t.Fatalf("segment %d: %v", si, err)
					}
					return // its page was read with the header's: refused whole
				}
				p := w.at / PageSize
				if err := s.checkPage(p); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "length word") {
					t.Errorf("the word's page through the mapping: %v", err)
				}
				r := &preadRound{x: x, want: map[pageKey]int{}, limit: 64}
				r.ask(s, w.at, w.at+4, nil)
				if err := r.read(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "length word") {
					t.Errorf("the word's page with pread: %v", err)
				}
				c := &Cursor{x: x}
				if _, err := c.pread(s, p, p+1); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "length word") {
					t.Errorf("the word's page read by a cursor (a sequential stitch's copy): %v", err)
				}
			})
		}
	}
}

// segmentSpan is where segment si's fingerprints lie in f.fps.
func segmentSpan(f *damageFixtureT, si int) (lo, hi int) {
	for i := range si {
		lo += int(f.refs[i].count)
	}
	return lo, lo + int(f.refs[si].count)
}
