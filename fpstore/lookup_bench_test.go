package fpstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// benchIndex builds, once per test binary, an index of
// $FPDEDUP_BENCH_KEYS random fingerprints (default 10M; the issue's
// figure is for 100M: FPDEDUP_BENCH_KEYS=100000000, ~1.7 GB, a minute to
// build) and returns its path and a sample of its keys. With
// $FPDEDUP_BENCH_INDEX the index is kept at that path, and used again by
// the next run of as many keys (the sample is made again, not the file).
var benchIndex = sync.OnceValues(func() (string, []Fingerprint) {
	n := 10_000_000
	if s := os.Getenv("FPDEDUP_BENCH_KEYS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	path := os.Getenv("FPDEDUP_BENCH_INDEX")
	if path == "" {
		dir, err := os.MkdirTemp("", "fpdedup-bench-")
		if err != nil {
			panic(err)
		}
		lookupDir = dir
		path = filepath.Join(dir, "bench.fpx")
	}
	r := rand.New(rand.NewPCG(21, 22))
	var w *Writer
	if x, err := Open(path); err == nil {
		if x.Len() != uint64(n) {
			panic(fmt.Sprintf("$FPDEDUP_BENCH_INDEX %s holds %d keys, not %d", path, x.Len(), n))
		}
		x.Close()
	} else if w, err = Create(path, WriterOptions{Spec: Spec{Hash: "xxh3"}, Sequential: true}); err != nil {
		panic(err)
	}
	add := func(fps ...Fingerprint) error {
		if w == nil {
			return nil
		}
		return w.Add(fps...)
	}
	// Ascending random fingerprints without sorting: uniform gaps.
	step := ^uint64(0) / uint64(n)
	var sample []Fingerprint
	buf := make([]Fingerprint, 0, 1<<16)
	for i := 0; i < n; i++ {
		fp := Fingerprint{uint64(i)*step + r.Uint64N(step), r.Uint64()}
		buf = append(buf, fp)
		if i%97 == 0 {
			sample = append(sample, fp)
		}
		if len(buf) == cap(buf) {
			if err := add(buf...); err != nil {
				panic(err)
			}
			buf = buf[:0]
		}
	}
	if err := add(buf...); err != nil {
		panic(err)
	}
	if w != nil {
		if _, err := w.Commit(); err != nil {
			panic(err)
		}
	}
	return path, sample
})

// lookupDir holds benchIndex's file, removed after the benchmarks (TestMain):
// a benchmark runs more than once (b.N grows) and the index must outlive it.
var lookupDir string

// BenchmarkLookup reports per-lookup latency percentiles of single
// Contains calls, warm (every page touched once before) and cold (the file
// dropped from the page cache with POSIX_FADV_DONTNEED), and page faults
// per cold lookup. Present and absent keys alternate.
func BenchmarkLookup(b *testing.B) {
	path, sample := benchIndex()
	r := rand.New(rand.NewPCG(23, 24))
	keys := func(n int) []Fingerprint {
		ks := make([]Fingerprint, n)
		for i := range ks {
			if i%2 == 0 {
				ks[i] = sample[r.IntN(len(sample))]
			} else {
				ks[i] = Fingerprint{r.Uint64(), r.Uint64()}
			}
		}
		return ks
	}
	measure := func(b *testing.B, x *Index, ks []Fingerprint) []time.Duration {
		lat := make([]time.Duration, len(ks))
		for i, k := range ks {
			t := time.Now()
			if _, err := x.Contains(k); err != nil {
				b.Fatal(err)
			}
			lat[i] = time.Since(t)
		}
		slices.Sort(lat)
		return lat
	}
	report := func(b *testing.B, lat []time.Duration) {
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) }
		b.ReportMetric(q(0.50), "p50-ns")
		b.ReportMetric(q(0.90), "p90-ns")
		b.ReportMetric(q(0.99), "p99-ns")
		b.ReportMetric(q(0.999), "p999-ns")
	}
	b.Run("warm", func(b *testing.B) {
		x, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		// Touch and verify every fingerprint page, then warm the filters
		// and directories.
		if err := x.Scan(func([]Fingerprint) error { return nil }); err != nil {
			b.Fatal(err)
		}
		measure(b, x, keys(200_000))
		b.ResetTimer()
		ks := keys(max(b.N, 100_000))
		report(b, measure(b, x, ks))
		b.ReportMetric(hugeMappedPercent(path), "huge-mapped-%")
		// The clock's own cost is inside every latency above (two vDSO
		// reads): reported as clock-p50-ns, not subtracted.
		clock := make([]time.Duration, 100_000)
		for i := range clock {
			t := time.Now()
			clock[i] = time.Since(t)
		}
		slices.Sort(clock)
		b.ReportMetric(float64(clock[len(clock)/2].Nanoseconds()), "clock-p50-ns")
	})
	b.Run("cold", func(b *testing.B) {
		ks := keys(max(b.N, 20_000))
		lat := make([]time.Duration, 0, len(ks))
		var majflt, minflt int64
		b.ResetTimer()
		for at := 0; at < len(ks); {
			b.StopTimer()
			dropFromPageCache(b, path)
			x, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			// Each batch stays below the lookups after which the index
			// reads ahead in huge folios: cold single lookups are a few
			// in an index not in the page cache, a page a fault.
			n := len(ks) - at
			if r := int(x.ReadAheadAfter()); r > 2 {
				n = min(n, r-1)
			}
			var before, after unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &before)
			b.StartTimer()
			lat = append(lat, measure(b, x, ks[at:at+n])...)
			b.StopTimer()
			unix.Getrusage(unix.RUSAGE_SELF, &after)
			majflt += after.Majflt - before.Majflt
			minflt += after.Minflt - before.Minflt
			x.Close()
			at += n
		}
		slices.Sort(lat)
		report(b, lat)
		b.ReportMetric(float64(majflt)/float64(len(ks)), "major-faults/lookup")
		b.ReportMetric(float64(minflt)/float64(len(ks)), "minor-faults/lookup")
	})
}

// dropFromPageCache evicts path's pages and skips the benchmark when more
// than a tenth stay (tmpfs, or mapped elsewhere): a cold figure would then
// be a warm one.
func dropFromPageCache(b *testing.B, path string) {
	resident, err := pagecache.Drop(path)
	if err != nil {
		b.Skipf("cannot drop %s from the page cache: %v", path, err)
	}
	if resident > 0.1 {
		b.Skipf("%.0f%% of %s stayed in the page cache after POSIX_FADV_DONTNEED (tmpfs?)", 100*resident, path)
	}
}

// hugeMappedPercent is the share of path's resident mapping that the
// kernel maps with 2 MiB entries (smaps' FilePmdMapped), which the lookup
// latency depends on (TLB misses): see extentWriter.
func hugeMappedPercent(path string) float64 {
	entries, err := readSmaps()
	if err != nil {
		return -1
	}
	var rss, pmd float64
	for _, e := range entries {
		if e.header[len(e.header)-1] == path {
			rss += e.kB("Rss:")
			pmd += e.kB("FilePmdMapped:")
		}
	}
	if rss == 0 {
		return -1 // not mapped, or nothing of it resident
	}
	return 100 * pmd / rss
}

// halfPresent is n keys in random order, the even ones drawn from sample
// (present), the odd ones random (absent but for a 2^-128 chance).
func halfPresent(sample []Fingerprint, n int, seed uint64) []Fingerprint {
	r := rand.New(rand.NewPCG(seed, seed+1))
	keys := make([]Fingerprint, n)
	for i := range keys {
		if i%2 == 0 {
			keys[i] = sample[r.IntN(len(sample))]
		} else {
			keys[i] = Fingerprint{r.Uint64(), r.Uint64()}
		}
	}
	return keys
}

// BenchmarkBatchCold looks 400k keys up (half present) in batches of 20k,
// as query does a chunk at a time, after dropping the index from the page
// cache: what a cron job's first query against yesterday's history pays.
// It reports the time per key and the major faults (reads from the disk)
// of the whole run.
func BenchmarkBatchCold(b *testing.B) {
	path, sample := benchIndex()
	keys := halfPresent(sample, 400_000, 25)
	found := make([]bool, len(keys))
	var faults int64
	b.ResetTimer() // the index's first build is not the benchmark
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dropFromPageCache(b, path)
		x, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var before, after unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &before)
		b.StartTimer()
		for at := 0; at < len(keys); at += 20_000 {
			if err := x.ContainsBatch(keys[at:at+20_000], found[at:at+20_000]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		unix.Getrusage(unix.RUSAGE_SELF, &after)
		faults += after.Majflt - before.Majflt
		x.Close()
		for i := 0; i < len(keys); i += 2 {
			if !found[i] {
				b.Fatalf("present key %v not found", keys[i])
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
	b.ReportMetric(float64(faults)/float64(b.N), "major-faults/run")
}

// BenchmarkBatchWarm looks 400k keys up (half present, in random order)
// through a Set in batches of 20k, as query and dedup --against do, with
// every page of the index touched and checked before: the CPU cost of
// the batch path, which a long run pays. It reports the time per key.
func BenchmarkBatchWarm(b *testing.B) {
	path, sample := benchIndex()
	keys := halfPresent(sample, 400_000, 27)
	x, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if err := x.Scan(func([]Fingerprint) error { return nil }); err != nil {
		b.Fatal(err)
	}
	set, err := NewSet([]*Index{x})
	if err != nil {
		b.Fatal(err)
	}
	var look Lookups
	found := make([]bool, len(keys))
	run := func() {
		for at := 0; at < len(keys); at += 20_000 {
			if err := set.ContainsBatch(keys[at:at+20_000], found[at:at+20_000], &look); err != nil {
				b.Fatal(err)
			}
		}
	}
	run() // warm the filters and directories
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
	b.StopTimer()
	for i := 0; i < len(keys); i += 2 {
		if !found[i] {
			b.Fatalf("present key %v not found", keys[i])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
}
