package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// coldBatches is how many times, at least, the cold measurement drops the
// file and reopens the index (more when a batch would pass
// Index.ReadAheadAfter): each batch's first lookups find nothing cached,
// its later ones find the directory and filter pages the earlier ones
// read, as a process that just opened a cold index would.
const coldBatches = 10

// maxResident is the fraction of the index's pages that may stay cached
// after POSIX_FADV_DONTNEED for the cold figures to mean anything (tmpfs
// keeps all of them: there the page cache is the storage).
const maxResident = 0.10

// measureLookups times single Index.Contains calls in this process, present
// and absent keys alternating, as fpstore's BenchmarkLookup does: warm after
// every page was read once, and cold after the file was dropped from the
// page cache. Present keys are spread over the whole index; absent ones are
// random fingerprints (present with odds n/2^128) and every answer is
// checked.
func measureLookups(ctx context.Context, path string, warmN, coldN int) (*Lookup, error) {
	x, err := fpstore.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: lookup: %w", err)
	}
	lk := &Lookup{Index: "index.fpx", Keys: x.Len(), FileBytes: x.Size()}
	if x.Len() == 0 {
		x.Close()
		lk.Warm = LookupPhase{Status: "not measured", Why: "the index is empty"}
		lk.Cold = lk.Warm
		return lk, nil
	}
	// A sample of present keys, from every part of the index.
	want := max(warmN, coldN) / 2
	step := max(1, int(x.Len())/max(want, 1))
	var present []fpstore.Fingerprint
	i := 0
	err = x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			if i%step == 0 {
				present = append(present, fp)
			}
			i++
		}
		return ctx.Err()
	})
	if err != nil {
		x.Close()
		return nil, fmt.Errorf("bench: lookup: reading keys: %w", err)
	}
	rng := rand.New(rand.NewPCG(23, 24))
	rng.Shuffle(len(present), func(i, j int) { present[i], present[j] = present[j], present[i] })
	keys := func(n int) (ks []fpstore.Fingerprint, isPresent []bool) {
		for k := range n {
			if k%2 == 0 {
				ks = append(ks, present[rng.IntN(len(present))])
				isPresent = append(isPresent, true)
			} else {
				ks = append(ks, fpstore.Fingerprint{Hi: rng.Uint64(), Lo: rng.Uint64()})
				isPresent = append(isPresent, false)
			}
		}
		return ks, isPresent
	}

	// Warm: Scan has read every fingerprint page; a first pass of lookups
	// reads the filters and directories.
	ks, isP := keys(min(warmN, 50_000))
	if _, _, err := timeLookups(x, ks, isP); err != nil {
		x.Close()
		return nil, err
	}
	ks, isP = keys(warmN)
	pres, abs, err := timeLookups(x, ks, isP)
	readAhead := int(x.ReadAheadAfter())
	x.Close()
	if err != nil {
		return nil, err
	}
	lk.Warm = LookupPhase{Status: "ok", Present: latency(pres), Absent: latency(abs)}

	// Cold.
	var cp, ca []time.Duration
	var resident float64
	var majflt, minflt int64
	// A batch stays below the lookups after which the index reads ahead
	// in huge folios: cold here is a few lookups in an index that is not
	// in the page cache, read a page a fault (a query's many lookups are
	// fpstore's BenchmarkBatchCold).
	batch := max(coldN/coldBatches, 2)
	if readAhead > 2 {
		batch = min(batch, readAhead-1)
	}
	batches := max(coldBatches, (coldN+batch-1)/batch)
	for range batches {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		res, err := pagecache.Drop(path)
		if err != nil {
			lk.Cold = LookupPhase{Status: "not measured", Why: "cannot drop the index from the page cache: " + err.Error()}
			return lk, nil
		}
		if res > maxResident {
			lk.Cold = LookupPhase{Status: "not measured", ResidentAfterDrop: res,
				Why: fmt.Sprintf("%.0f%% of the index stayed in the page cache after POSIX_FADV_DONTNEED (tmpfs, or mapped by another process)", 100*res)}
			return lk, nil
		}
		resident += res / float64(batches)
		x, err := fpstore.Open(path)
		if err != nil {
			return nil, fmt.Errorf("bench: lookup: %w", err)
		}
		ks, isP := keys(batch)
		var before, after unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &before)
		p, a, err := timeLookups(x, ks, isP)
		unix.Getrusage(unix.RUSAGE_SELF, &after)
		x.Close()
		if err != nil {
			return nil, err
		}
		majflt += after.Majflt - before.Majflt
		minflt += after.Minflt - before.Minflt
		cp, ca = append(cp, p...), append(ca, a...)
	}
	n := float64(len(cp) + len(ca))
	lk.Cold = LookupPhase{Status: "ok", Present: latency(cp), Absent: latency(ca), Batches: batches,
		ResidentAfterDrop: resident, MajorFaults: float64(majflt) / n, MinorFaults: float64(minflt) / n}
	return lk, nil
}

// timeLookups times each lookup and checks its answer.
func timeLookups(x *fpstore.Index, ks []fpstore.Fingerprint, isPresent []bool) (present, absent []time.Duration, err error) {
	for i, k := range ks {
		t := time.Now()
		found, err := x.Contains(k)
		d := time.Since(t)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: lookup: %w", err)
		}
		if found != isPresent[i] {
			return nil, nil, fmt.Errorf("bench: lookup: key %v: Contains says %v, want %v", k, found, isPresent[i])
		}
		if isPresent[i] {
			present = append(present, d)
		} else {
			absent = append(absent, d)
		}
	}
	return present, absent, nil
}

// cdfPoints are the quantiles a Latency keeps for the chart.
var cdfPoints = func() []float64 {
	var q []float64
	for i := range 50 {
		q = append(q, float64(i)/50)
	}
	return append(q, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1)
}()

// latency summarises durations; the quantile of fraction p is the element
// at p*(n-1), as BenchmarkLookup reports it.
func latency(ds []time.Duration) *Latency {
	if len(ds) == 0 {
		return nil
	}
	ns := make([]float64, len(ds))
	var sum float64
	for i, d := range ds {
		ns[i] = float64(d.Nanoseconds())
		sum += ns[i]
	}
	slices.Sort(ns)
	q := func(p float64) float64 { return ns[int(math.Floor(p*float64(len(ns)-1)))] }
	l := &Latency{N: len(ns), MeanNs: sum / float64(len(ns)), P50Ns: q(0.5), P90Ns: q(0.9), P99Ns: q(0.99), P999Ns: q(0.999), MaxNs: ns[len(ns)-1]}
	for _, p := range cdfPoints {
		l.CDF = append(l.CDF, Quantile{Q: p, Ns: q(p)})
	}
	return l
}
