package pipeline

import (
	"context"
	"sync"
)

// chunkWork turns one chunk into output bytes appended to out. Each worker
// goroutine gets its own chunkWork from the factory, so it may keep
// scratch state without locks.
type chunkWork func(job chunkJob, out []byte) ([]byte, error)

type orderedResult struct {
	job     chunkJob
	out     []byte
	err     error
	stalled bool // the chunk was cut because its input stalled
	done    chan struct{}
}

// runOrdered reads the inputs as chunks, runs work on them in parallel and
// hands the outputs to emit in input order: the pattern of every streaming
// command (query, dedup), whose output must follow its input. At most
// 2×threads chunks are in flight, which bounds memory.
func runOrdered(ctx context.Context, opts readOptions, threads int, newWork func() chunkWork, emit func(out []byte) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan chunkJob, threads)
	go func() {
		defer close(jobs)
		if err := readChunks(ctx, opts, jobs); err != nil {
			cancel(err)
		}
	}()
	results := make(chan *orderedResult, 2*threads)
	work := make(chan *orderedResult, threads)
	go func() {
		defer close(results)
		defer close(work)
		for job := range jobs {
			r := &orderedResult{job: job, done: make(chan struct{})}
			select {
			case results <- r:
				work <- r
			case <-ctx.Done():
				job.rd.Release(job.chunk)
			}
		}
	}()
	var pool sync.Pool
	for w := 0; w < threads; w++ {
		go func() {
			do := newWork()
			for r := range work {
				var buf []byte
				if b, ok := pool.Get().(*[]byte); ok {
					buf = (*b)[:0]
				}
				if ctx.Err() == nil {
					r.out, r.err = do(r.job, buf)
				}
				r.stalled = r.job.chunk.Stalled
				r.job.rd.Release(r.job.chunk)
				close(r.done)
			}
		}()
	}
	var err error
	for r := range results {
		<-r.done
		if err == nil {
			err = r.err
			if err == nil && ctx.Err() == nil {
				err = emit(r.out)
			}
			if err == nil && r.stalled && opts.Flush != nil {
				err = opts.Flush()
			}
			if err != nil {
				cancel(err)
			}
		}
		if r.out != nil {
			out := r.out
			pool.Put(&out)
		}
	}
	if err != nil {
		return err
	}
	return context.Cause(ctx)
}
