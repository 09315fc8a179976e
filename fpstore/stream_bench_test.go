package fpstore

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// The streaming readers' benchmarks: Scan (dump), a whole and a half-range
// Cursor (merge, merge --partition, reconcile, the LSM runs), a two-way
// and a three-way MergeCursors (merge's k-way loop, output discarded) and
// a stitch of two partitions (merge of partitions: segments copied through
// the cursor's page reads). Every page is in the page cache after the
// first iteration, so they measure the reading, checking and merging, not
// the disk. Each reports ns a fingerprint read.
//
//	go test -run XXX -bench 'Scan|Cursor|Merge|Stitch' -count 5 ./fpstore
//
// $FPDEDUP_STREAM_KEYS sets the fingerprints of each index (default 4M,
// ~64 MiB each: several full segments).
var streamIndexes = sync.OnceValues(func() (string, error) {
	n := 4 << 20
	if s := os.Getenv("FPDEDUP_STREAM_KEYS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	dir, err := os.MkdirTemp("", "fpdedup-stream-bench-")
	if err != nil {
		return "", err
	}
	streamDir = dir
	// a and b: two random sets of n; p0 and p1: the two halves of a's
	// set as partitions 0/2 and 1/2.
	for i, name := range []string{"a", "b"} {
		r := rand.New(rand.NewPCG(41, uint64(i)))
		step := ^uint64(0) / uint64(n)
		fps := make([]Fingerprint, n)
		for k := range fps {
			fps[k] = Fingerprint{uint64(k)*step + r.Uint64N(step), r.Uint64()}
		}
		if err := writeBenchIndex(filepath.Join(dir, name+".fpx"), fps, Range{}); err != nil {
			return "", err
		}
		if name == "a" {
			half := n / 2
			for fps[half].Hi>>63 == 0 {
				half++
			}
			for half > 0 && fps[half-1].Hi>>63 == 1 {
				half--
			}
			if err := writeBenchIndex(filepath.Join(dir, "p0.fpx"), fps[:half], Range{Bits: 1, Index: 0}); err != nil {
				return "", err
			}
			if err := writeBenchIndex(filepath.Join(dir, "p1.fpx"), fps[half:], Range{Bits: 1, Index: 1}); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
})

// streamDir is removed after the benchmarks (TestMain).
var streamDir string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{streamDir, lookupDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

func writeBenchIndex(path string, fps []Fingerprint, rng Range) error {
	w, err := Create(path, WriterOptions{Spec: Spec{Hash: "xxh3"}, Range: rng, Sequential: true})
	if err != nil {
		return err
	}
	if err := w.Add(fps...); err != nil {
		w.Abort()
		return err
	}
	_, err = w.Commit()
	return err
}

func openStream(b *testing.B, names ...string) []*Index {
	dir, err := streamIndexes()
	if err != nil {
		b.Fatal(err)
	}
	var xs []*Index
	for _, name := range names {
		x, err := Open(filepath.Join(dir, name+".fpx"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { x.Close() })
		xs = append(xs, x)
	}
	return xs
}

func reportPerFP(b *testing.B, fps uint64) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fps), "ns/fp")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkScan opens the index for each pass: a Scan checks a segment's
// pages (and what else it checks) once per open index.
func BenchmarkScan(b *testing.B) {
	path := openStream(b, "a")[0].Path()
	var n uint64
	for b.Loop() {
		x, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := x.Scan(func(fps []Fingerprint) error {
			n += uint64(len(fps))
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		x.Close()
	}
	reportPerFP(b, n)
}

func readCursor(b *testing.B, c *Cursor, buf []Fingerprint) uint64 {
	var n uint64
	for {
		k, err := c.Read(buf)
		n += uint64(k)
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCursor(b *testing.B) {
	x := openStream(b, "a")[0]
	buf := make([]Fingerprint, mergeBatch)
	b.Run("whole", func(b *testing.B) {
		var n uint64
		for b.Loop() {
			n += readCursor(b, x.Cursor(), buf)
		}
		reportPerFP(b, n)
	})
	b.Run("half", func(b *testing.B) {
		var n uint64
		for b.Loop() {
			n += readCursor(b, x.RangeCursor(Range{Bits: 1, Index: 1}), buf)
		}
		reportPerFP(b, n)
	})
}

func BenchmarkMergeCursors(b *testing.B) {
	xs := openStream(b, "a", "b", "p0")
	for _, k := range []int{2, 3} {
		b.Run("k="+strconv.Itoa(k), func(b *testing.B) {
			var n uint64
			for b.Loop() {
				cs := make([]*Cursor, k)
				for i := range cs {
					cs[i] = xs[i].Cursor()
					n += xs[i].Len()
				}
				if err := MergeCursors(cs, Union, func([]Fingerprint) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			reportPerFP(b, n)
		})
	}
}

// BenchmarkStitch includes writing the output (page cache, one fsync).
func BenchmarkStitch(b *testing.B) {
	xs := openStream(b, "p0", "p1")
	out := filepath.Join(b.TempDir(), "out.fpx")
	var n uint64
	for b.Loop() {
		st, err := Merge(out, xs, MergeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if !st.Stitched {
			b.Fatal("not stitched")
		}
		n += st.Fingerprints
	}
	reportPerFP(b, n)
}
