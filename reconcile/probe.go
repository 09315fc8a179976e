package reconcile

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
)

// probeJoin looks up every offline fingerprint online, in batches of
// o.Batch on o.Conns connections at once, and takes the answers in index
// order, so the missing ones come out ascending (as an index writer needs).
// The online side's own keys are never listed: OnlyOnline stays unknown.
func probeJoin(ctx context.Context, off batchReader, src Source, o *Options, st *ReadStats, both *int64, missing *sink) error {
	type job struct {
		fps     []fpstore.Fingerprint
		present []bool
		err     error
		done    chan struct{}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conns := max(o.Conns, 1)
	jobs := make(chan *job, conns)
	results := make(chan *job, 2*conns)
	var retries atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.err = st.wait(ctx, len(j.fps))
				if j.err == nil {
					j.err = retry(ctx, o.Retries, o.Backoff, func() { retries.Add(1) }, func() error {
						return src.Probe(ctx, j.fps, j.present)
					})
				}
				st.Values.Add(int64(len(j.fps)))
				close(j.done)
			}
		}()
	}
	go func() {
		defer close(results)
		defer close(jobs)
		for {
			b, err := off.next()
			if err != nil || b == nil {
				if err != nil {
					j := &job{err: err, done: make(chan struct{})}
					close(j.done)
					results <- j
				}
				return
			}
			for len(b) > 0 {
				n := min(len(b), o.Batch)
				j := &job{fps: append([]fpstore.Fingerprint(nil), b[:n]...), present: make([]bool, n), done: make(chan struct{})}
				b = b[n:]
				select {
				case results <- j:
				case <-ctx.Done():
					return
				}
				select {
				case jobs <- j:
				case <-ctx.Done():
					j.err = context.Cause(ctx)
					close(j.done)
					return
				}
			}
		}
	}()
	var err error
	for j := range results {
		<-j.done
		if err != nil {
			continue
		}
		if j.err != nil {
			err = j.err
			cancel()
			continue
		}
		for i, fp := range j.fps {
			if j.present[i] {
				*both++
			} else if err = missing.add(fp); err != nil {
				cancel()
				break
			}
		}
	}
	wg.Wait()
	st.Retries += int(retries.Load())
	return err
}
