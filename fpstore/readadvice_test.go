package fpstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// smapsEntry is one mapping of /proc/self/smaps: its header line's
// fields (address range first, path last if any) and its "Key:" lines.
type smapsEntry struct {
	header []string
	lines  map[string][]string
}

func (e smapsEntry) kB(key string) float64 {
	if f := e.lines[key]; len(f) > 0 {
		v, _ := strconv.ParseFloat(f[0], 64)
		return v
	}
	return 0
}

func readSmaps() ([]smapsEntry, error) {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	var entries []smapsEntry
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-"):
			entries = append(entries, smapsEntry{header: f, lines: map[string][]string{}})
		case len(f) > 0 && len(entries) > 0:
			entries[len(entries)-1].lines[f[0]] = f[1:]
		}
	}
	return entries, nil
}

// mappingFlags is the kernel's view of x's mapping (the smaps entry that
// starts at its first byte: the same file may be mapped by several
// indexes): VmFlags, "rr" after MADV_RANDOM, "hg" after MADV_HUGEPAGE.
func mappingFlags(t *testing.T, x *Index) []string {
	t.Helper()
	entries, err := readSmaps()
	if err != nil {
		t.Skipf("no smaps to read the advice from: %v", err)
	}
	start := strconv.FormatUint(uint64(uintptr(unsafe.Pointer(&x.data[0]))), 16) + "-"
	for _, e := range entries {
		if strings.HasPrefix(e.header[0], start) {
			return e.lines["VmFlags:"]
		}
	}
	t.Fatalf("%s is not mapped at %s", x.Path(), start)
	return nil
}

// TestReadAdvice: an index is read a page a fault (MADV_RANDOM) until its
// lookups reach four per 2 MiB extent of the file, or a whole pass starts
// (Scan, Verify), or Info's probes; from then on it is read ahead in huge folios.
func TestReadAdvice(t *testing.T) {
	thp := true
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		thp = false // MADV_HUGEPAGE is refused: only the read-ahead changes
	}
	check := func(x *Index, whole bool) {
		t.Helper()
		flags := mappingFlags(t, x)
		if random := slices.Contains(flags, "rr"); random == whole {
			t.Fatalf("after %d lookups (whole %v): mapping flags %v", x.lookups.Load(), whole, flags)
		}
		if huge := slices.Contains(flags, "hg"); thp && huge != whole {
			t.Fatalf("after %d lookups (whole %v): mapping flags %v", x.lookups.Load(), whole, flags)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	fps := sortUnique(randomFPs(r, 600_000))
	path := filepath.Join(t.TempDir(), "a.fpx")
	writeIndex(t, path, fps, WriterOptions{})
	open := func() *Index { return openIndex(t, path) }

	x := open()
	threshold := int(x.ReadAheadAfter())
	if want := int(4 * x.Size() / extentSize); threshold != want {
		t.Fatalf("ReadAheadAfter = %d, want four per 2 MiB extent: %d", threshold, want)
	}
	if threshold < 10 {
		t.Fatalf("a %d-byte index reads ahead after %d lookups: too small for this test", x.Size(), threshold)
	}
	check(x, false)
	for i := 0; i < threshold-2; i++ {
		if ok, err := x.Contains(fps[i]); !ok || err != nil {
			t.Fatalf("Contains(%v) = %v, %v", fps[i], ok, err)
		}
	}
	if _, _, err := x.Rank(fps[0]); err != nil {
		t.Fatal(err)
	}
	check(x, false)
	found := make([]bool, 1)
	if err := x.ContainsBatch(fps[:1], found); err != nil || !found[0] {
		t.Fatalf("ContainsBatch = %v, %v", found, err)
	}
	check(x, true)

	x = open()
	if err := x.Scan(func([]Fingerprint) error { return nil }); err != nil {
		t.Fatal(err)
	}
	check(x, true)

	x = open()
	var rep VerifyReport
	x.verifyAll(&rep)
	if len(rep.Problems) > 0 {
		t.Fatal(rep.Problems)
	}
	check(x, true)

	x = open()
	if _, err := x.Info(threshold); err != nil {
		t.Fatal(err)
	}
	check(x, true)

	// A set's batches count for each of its indexes.
	x, y := open(), open()
	set, err := NewSet([]*Index{x, y})
	if err != nil {
		t.Fatal(err)
	}
	var l Lookups
	found = make([]bool, threshold)
	if err := set.ContainsBatch(fps[:threshold], found, &l); err != nil {
		t.Fatal(err)
	}
	check(x, true)
	check(y, true)

	// A partition's index is charged only for the keys in its range: a
	// set of disjoint partitions sees every key, each of which reaches
	// one of them.
	var low, high []Fingerprint
	for _, fp := range fps {
		if fp.Hi>>63 == 0 {
			low = append(low, fp)
		} else {
			high = append(high, fp)
		}
	}
	ppath := filepath.Join(t.TempDir(), "p0.fpx")
	writeIndex(t, ppath, low, WriterOptions{Range: Range{Bits: 1, Index: 0}})
	p, err := Open(ppath)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	outside := high[:min(len(high), 4*int(p.ReadAheadAfter()))]
	if err := p.ContainsBatch(outside, make([]bool, len(outside))); err != nil {
		t.Fatal(err)
	}
	for _, fp := range outside[:100] {
		if _, err := p.Contains(fp); err != nil {
			t.Fatal(err)
		}
	}
	check(p, false)
	inside := low[:p.ReadAheadAfter()]
	if err := p.ContainsBatch(inside, make([]bool, len(inside))); err != nil {
		t.Fatal(err)
	}
	check(p, true)
}

// TestWriterLayout: the layout a few cold keys' pages are asked for by
// (writerLayout, from the footer alone) is where the writer put every
// segment's vectors, for segments of every size: a guess that missed
// would cost a single cold lookup a read more (it stays exact either way,
// which the lookups of TestRoundTripAgainstMap and the fuzz targets
// check).
func TestWriterLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	dir := t.TempDir()
	for _, n := range []int{1, 2, 3, 5, 31, 32, 33, 63, 1000, 100_000, 400_000, 1_500_000} {
		path := filepath.Join(dir, "x.fpx")
		writeIndex(t, path, sortUnique(randomFPs(r, n)), WriterOptions{})
		x, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, ref := range x.foot.segments {
			got, ok := x.headerLayout(ref)
			if want := writerLayout(ref); !ok || got != want {
				t.Errorf("%d keys, segment %d (%d keys, %d bytes): header says %+v (%v), writerLayout %+v", n, i, ref.count, ref.length, got, ok, want)
			}
		}
		t.Logf("%d keys: %d segments, the last of %d keys", n, len(x.foot.segments), x.foot.segments[len(x.foot.segments)-1].count)
		x.Close()
	}
}

// TestFooterOffsetWraps: a footer whose segment offset plus length wraps
// around 2^64 (a crafted file, checksums fixed) is refused at Open: the
// cold planner's and the few-key prefetch's offsets trust what Open
// accepted, and a wrapped range made them slice out of bounds.
func TestFooterOffsetWraps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.fpx")
	writeIndex(t, path, sortUnique(randomFPs(rand.New(rand.NewPCG(3, 4)), 100)), WriterOptions{})
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ref := x.foot.segments[0]
	x.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want [16]byte
	binary.LittleEndian.PutUint64(want[:], ref.offset)
	binary.LittleEndian.PutUint64(want[8:], ref.length)
	i := bytes.LastIndex(b, want[:])
	if i < 0 {
		t.Fatal("the segment ref is not in the file")
	}
	binary.LittleEndian.PutUint64(b[i:], 1<<64-PageSize)
	binary.LittleEndian.PutUint64(b[i+8:], 2*PageSize)
	crafted := filepath.Join(dir, "crafted.fpx")
	if err := os.WriteFile(crafted, fixChecksums(b), 0o644); err != nil {
		t.Fatal(err)
	}
	if x, err := Open(crafted); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			x.Close()
		}
		t.Fatalf("Open of a wrapped segment range: %v, want ErrCorrupt", err)
	}
}
