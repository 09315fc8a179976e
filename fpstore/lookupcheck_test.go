package fpstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Lookups on a crafted index (issue 27 item 4): damage whose checksums
// were recomputed after it, so that no page CRC catches it, and that
// Verify reports. A lookup of a key the index was built with must find it
// or fail with ErrCorrupt naming the file: never say "absent" with no
// error (nor give a wrong rank). The damaged segment is a small one
// (segment 1, 1000 fingerprints) and the big one (the last, ~1M, with a
// directory and filter of many pages).

// segLayout is where a segment's vectors lie in the file.
type segLayout struct {
	ref                     segmentRef
	fpsAt, dirAt, filterAt  uint64 // file offsets of the first element
	dirLen, filterLen, nfps uint64 // elements (filter: bytes)
	fps                     []Fingerprint
}

func segLayouts(t *testing.T, data []byte) []segLayout {
	t.Helper()
	x, err := Open(writeChecksummed(t, data, func([]byte) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var ls []segLayout
	for i, ref := range x.foot.segments {
		s, err := x.segment(i)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, segLayout{
			ref: ref, fpsAt: ref.offset + s.fpsAt, dirAt: ref.offset + s.dirAt, filterAt: ref.offset + s.filterAt,
			dirLen: uint64(len(s.dir)), filterLen: 64 * uint64(len(s.filter)), nfps: uint64(len(s.fps)),
			fps: slices.Clone(s.fps),
		})
	}
	return ls
}

// lookupDamages are the crafted damages: the three (a zeroed
// filter, a directory all zeros but its last entry, two fingerprints
// swapped) and neighbours of them.
var lookupDamages = []struct {
	name   string
	mutate func(b []byte, l segLayout)
}{
	{"none", func([]byte, segLayout) {}},
	{"filter zeroed", func(b []byte, l segLayout) { clear(b[l.filterAt : l.filterAt+l.filterLen]) }},
	{"filter page zeroed", func(b []byte, l segLayout) {
		// From the block in the middle of the filter to the end of its
		// file page or of the filter: whole blocks (a zeroed page of the
		// file), not the first or last fingerprint's.
		from := (l.filterAt + l.filterLen/2) &^ 63
		clear(b[from:min(alignUp(from+1, PageSize), l.filterAt+l.filterLen)])
	}},
	{"filter random", func(b []byte, l segLayout) {
		// Not zero, not this segment's: a foreign or garbled filter.
		r := rand.New(rand.NewPCG(63, 64))
		for o := l.filterAt; o < l.filterAt+l.filterLen; o += 8 {
			binary.LittleEndian.PutUint64(b[o:], r.Uint64())
		}
	}},
	{"directory zeroed but last", func(b []byte, l segLayout) { clear(b[l.dirAt : l.dirAt+4*(l.dirLen-1)]) }},
	{"directory entry raised", func(b []byte, l segLayout) {
		// A bucket loses its first fingerprint to the bucket before.
		at := l.dirAt + 4*(l.dirLen/2)
		binary.LittleEndian.PutUint32(b[at:], binary.LittleEndian.Uint32(b[at:])+1)
	}},
	{"swap adjacent", func(b []byte, l segLayout) {
		k := l.nfps/2 + 3
		putFP(b, l.fpsAt+16*k, l.fps[k+1])
		putFP(b, l.fpsAt+16*(k+1), l.fps[k])
	}},
	{"swap far", func(b []byte, l segLayout) {
		// Several buckets apart.
		k := l.nfps / 3
		putFP(b, l.fpsAt+16*k, l.fps[k+200])
		putFP(b, l.fpsAt+16*(k+200), l.fps[k])
	}},
	{"swap first and second", func(b []byte, l segLayout) {
		putFP(b, l.fpsAt, l.fps[1])
		putFP(b, l.fpsAt+16, l.fps[0])
	}},
}

func TestLookupsRefuseCraftedDamage(t *testing.T) {
	f := getDamageFixture(t)
	ls := segLayouts(t, f.data)
	// A second, sound index for the sets: a few keys over the whole space.
	other := filepath.Join(t.TempDir(), "other.fpx")
	writeIndex(t, other, sortUnique(randomFPs(rand.New(rand.NewPCG(61, 62)), 500)), WriterOptions{Spec: Spec{Hash: "xxh3"}})
	segs, stride := []int{1, len(ls) - 1}, 1
	if testing.Short() {
		// -race -short in CI: one segment, a third of its keys; the
		// plain run checks both, every key.
		segs, stride = segs[:1], 3
	}
	for _, seg := range segs {
		l := ls[seg]
		// The damaged segment's keys, every one, and a sample of the rest.
		var keys []Fingerprint
		for i, fp := range f.fps {
			if l.ref.node.contains(fp) && i%stride == 0 || i%97 == 0 {
				keys = append(keys, fp)
			}
		}
		for _, d := range lookupDamages {
			t.Run(fmt.Sprintf("segment %d/%s", seg, d.name), func(t *testing.T) {
				path := writeChecksummed(t, f.data, func(b []byte) { d.mutate(b, l) })
				rep, err := Verify(path)
				if err != nil {
					t.Fatal(err)
				}
				if sound := d.name == "none"; sound != (len(rep.Problems) == 0) {
					t.Fatalf("Verify: %v: the damage is not what the test means", rep.Problems)
				}
				failed := checkNoWrongAbsent(t, path, other, f.fps, keys)
				if d.name == "none" && failed > 0 {
					t.Fatalf("%d lookups failed on a sound index", failed)
				}
				t.Logf("%d lookups and batches failed, over the ways, of %d keys", failed, len(keys))
			})
		}
	}
}

// checkNoWrongAbsent looks every key of keys (all in the sorted set all
// the index was built with) up at path, each way on an index of its own
// (so that no way relies on checks another made first): Contains, Rank,
// ContainsBatch, and a Set of the index with the sound index other, in
// batches above and below the sorted path's threshold. Each must find the
// key (Rank: at its rank) or fail with ErrCorrupt naming the file and an
// offset. It returns how many lookups or batches failed; wrong answers
// fail the test, counted by way.
func checkNoWrongAbsent(t *testing.T, path, other string, all, keys []Fingerprint) (failed int) {
	t.Helper()
	var ways []string
	wrongs := map[string][]string{}
	wrong := func(way, format string, a ...any) {
		if wrongs[way] == nil {
			ways = append(ways, way)
		}
		wrongs[way] = append(wrongs[way], fmt.Sprintf(format, a...))
	}
	defer func() {
		for _, way := range ways {
			t.Errorf("%s: %d wrong answers with no error, the first: %s", way, len(wrongs[way]), wrongs[way][0])
		}
	}()
	open := func(p string) *Index {
		x, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Close() })
		return x
	}
	bad := func(err error, what string) {
		t.Helper()
		failed++
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset") {
			t.Fatalf("%s: %v: want ErrCorrupt naming %s and an offset", what, err, path)
		}
	}
	x := open(path)
	for _, fp := range keys {
		ok, err := x.Contains(fp)
		if err != nil {
			bad(err, "Contains "+fp.String())
		} else if !ok {
			wrong("Contains", "%s absent", fp)
		}
	}
	x = open(path)
	for _, fp := range keys {
		rank, ok, err := x.Rank(fp)
		want, _ := slices.BinarySearchFunc(all, fp, Fingerprint.Compare)
		switch {
		case err != nil:
			bad(err, "Rank "+fp.String())
		case !ok:
			wrong("Rank", "%s absent", fp)
		case rank != uint64(want):
			wrong("Rank", "%s at rank %d, its rank is %d", fp, rank, want)
		}
	}
	batches := func(name string, lookup func(fps []Fingerprint, found []bool) error, size int) {
		found := make([]bool, size)
		for base := 0; base < len(keys); base += size {
			fps := keys[base:min(base+size, len(keys))]
			if err := lookup(fps, found[:len(fps)]); err != nil {
				bad(err, name)
				continue
			}
			for k, fp := range fps {
				if !found[k] {
					wrong(name, "%s absent", fp)
				}
			}
		}
	}
	x = open(path)
	batches("ContainsBatch", x.ContainsBatch, 4096)
	for _, size := range []int{sortedLookupMin - 1, sortedLookupMax} {
		set, err := NewSet([]*Index{open(path), open(other)})
		if err != nil {
			t.Fatal(err)
		}
		var look Lookups
		batches(fmt.Sprintf("Set.ContainsBatch of %d", size), func(fps []Fingerprint, found []bool) error {
			return set.ContainsBatch(fps, found, &look)
		}, size)
	}
	return failed
}
