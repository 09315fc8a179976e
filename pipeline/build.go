package pipeline

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// BuildOptions configure Build.
type BuildOptions struct {
	Inputs  []string // file names; "-" is stdin; none: stdin
	Output  string
	Records ingest.RecordOptions
	Spec    fpstore.Spec
	Range   fpstore.Range // keep only this partition
	Threads int
	Mem     int64 // bytes of anonymous memory the build may use
	TmpDir  string
	// Progress, when set, is updated with raw input bytes read and
	// records seen, for a progress display.
	Progress *ingest.Progress
	// Group, if set, publishes the index at the command's commit point.
	Group *atomicfile.Group
}

// BuildStats are the figures of a build, for the summary and --stats-json.
type BuildStats struct {
	Inputs       int     `json:"inputs"`
	Records      int64   `json:"records"`
	Distinct     uint64  `json:"distinct"`
	Duplicates   int64   `json:"duplicates"`
	OutOfRange   int64   `json:"out_of_partition"`
	Bytes        int64   `json:"bytes"` // read from the inputs as stored (compressed); see ingest.Progress.RawBytes
	Spills       int64   `json:"spilled_runs"`
	BadRecords   int64   `json:"bad_records"`
	Seconds      float64 `json:"seconds"`
	IndexBytes   int64   `json:"index_bytes"`
	MemoryBudget int64   `json:"memory_budget"`
}

// segmentMemory is what the index writer holds for each segment in
// flight: its fingerprints (16 MiB) and its FlatBuffers buffer (~18 MiB).
// (The writer's one 2 MiB write buffer is within the heap share's slack.)
const segmentMemory = 34 << 20

// Build reads records, fingerprints them and writes the distinct
// fingerprints as an index at opts.Output, published atomically. Reading,
// decompressing, hashing and sorting run in parallel; beyond opts.Mem the
// fingerprints spill to sorted runs in opts.TmpDir, removed whatever
// happens. ctx cancels it (temp files removed, nothing published).
func Build(ctx context.Context, opts BuildOptions) (BuildStats, error) {
	start := time.Now()
	opts.Threads, opts.Inputs, opts.Progress = runDefaults(opts.Threads, opts.Inputs, opts.Progress)
	stats := BuildStats{Inputs: len(opts.Inputs)}

	stats.MemoryBudget = opts.Mem
	if err := checkTmpDir(opts.TmpDir); err != nil {
		return stats, err
	}
	// The writer takes the output's lock first, so a second build of the
	// same output fails at once, not after reading its input.
	plan := opts.Plan()
	w, err := fpstore.Create(opts.Output, fpstore.WriterOptions{Spec: opts.Spec, Range: opts.Range, Sequential: plan.Sequential, Threads: opts.Threads, Group: opts.Group})
	if err != nil {
		return stats, err
	}
	defer w.Abort() // after Commit it does nothing
	sorter := fpstore.NewSorter(opts.TmpDir, plan.Sorter)
	defer sorter.Close()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan chunkJob, 2*opts.Threads)
	headers := newHeaders()
	var readErr error
	go func() {
		defer close(jobs)
		readErr = readChunks(ctx, readOptions{Inputs: opts.Inputs, Records: opts.Records, Progress: opts.Progress, Headers: headers}, jobs)
		if readErr != nil {
			cancel(readErr)
		}
	}()

	collectors := make([]*fpstore.Collector, opts.Threads)
	var outOfRange atomic.Int64
	var wg sync.WaitGroup
	for w := range collectors {
		c, err := sorter.NewCollector(len(collectors))
		if err != nil {
			cancel(err)
			break
		}
		defer c.Free()
		collectors[w] = c
		wg.Add(1)
		go func(c *fpstore.Collector) {
			defer wg.Done()
			if err := hashChunks(ctx, opts, headers, jobs, c, &outOfRange); err != nil {
				cancel(err)
			}
			for range jobs { // drain so the reader can stop
			}
		}(collectors[w])
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return stats, err
	}
	stats.Records = opts.Progress.Records.Load()
	stats.OutOfRange = outOfRange.Load()
	stats.Bytes = opts.Progress.RawBytes.Load()

	err = sorter.Emit(collectors, opts.Threads, func(fps []fpstore.Fingerprint) error {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		return w.Add(fps...)
	})
	stats.Spills = sorter.Spills()
	if err != nil {
		return stats, err
	}
	if err := ctx.Err(); err != nil {
		return stats, context.Cause(ctx)
	}
	n, err := w.Commit()
	if err != nil {
		return stats, err
	}
	stats.Distinct = n
	stats.Duplicates = stats.Records - stats.OutOfRange - int64(n)
	stats.BadRecords = opts.Records.OnBad.Count()
	stats.IndexBytes = w.Size()
	stats.Seconds = time.Since(start).Seconds()
	return stats, nil
}

// hashChunks keys and fingerprints the records of chunks and collects the
// fingerprints.
func hashChunks(ctx context.Context, opts BuildOptions, headers *Headers, jobs <-chan chunkJob, c *fpstore.Collector, outOfRange *atomic.Int64) error {
	batch := make([]fpstore.Fingerprint, 0, 4096)
	w := newRecordWorker(&opts.Records, headers)
	for job := range jobs {
		if ctx.Err() != nil {
			return nil
		}
		records, outside := int64(0), int64(0)
		err := w.each(job, func(_ []byte, fp fpstore.Fingerprint) error {
			records++
			if !opts.Range.Contains(fp) {
				outside++ // added a chunk at a time, as a shared counter's line bounces between cores
				return nil
			}
			batch = append(batch, fp)
			if len(batch) == cap(batch) {
				if err := c.Add(batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
			return nil
		})
		job.rd.Release(job.chunk)
		opts.Progress.Records.Add(records)
		outOfRange.Add(outside)
		if err != nil {
			return err
		}
	}
	if len(batch) > 0 {
		return c.Add(batch)
	}
	return nil
}

// checkTmpDir fails early on a temporary directory that cannot take
// spilled runs, rather than after minutes of reading.
func checkTmpDir(dir string) error {
	d, err := tempfile.MkDir(dir)
	if err != nil {
		return &TmpDirError{Dir: dir, Err: fmt.Errorf("cannot take temporary files: %w", err)}
	}
	return d.Remove()
}
