package online

import (
	"context"
	"sync"
)

// Ordered runs work on conns goroutines over the batches that feed sends,
// and hands each finished batch to done in the order it was sent: what
// probes and Apply need (answers and checkpoints in index order, the
// server busy on several connections). send reports false once the run is
// stopping. The first error of work or done cancels the rest and is
// returned; feed's error is returned after the batches sent before it.
// Once send has reported false the result is never nil: with no error of
// work, done or feed, it is the cause of ctx's cancellation (a feed that
// stopped early must not pass for a complete run).
func Ordered[T any](ctx context.Context, conns int,
	feed func(ctx context.Context, send func(T) bool) error,
	work func(ctx context.Context, b T) error,
	done func(b T) error) error {
	type job struct {
		b    T
		err  error
		done chan struct{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	conns = max(conns, 1)
	jobs := make(chan *job, conns)
	results := make(chan *job, 2*conns)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.err = work(ctx, j.b)
				close(j.done)
			}
		}()
	}
	var feedErr, stopped error
	go func() {
		defer close(results)
		defer close(jobs)
		feedErr = feed(ctx, func(b T) bool {
			j := &job{b: b, done: make(chan struct{})}
			select {
			case results <- j:
			case <-ctx.Done():
				stopped = context.Cause(ctx)
				return false
			}
			select {
			case jobs <- j:
				return true
			case <-ctx.Done():
				j.err = context.Cause(ctx)
				close(j.done)
				stopped = j.err
				return false
			}
		})
	}()
	var err error
	for j := range results {
		<-j.done
		if err != nil {
			continue
		}
		if j.err == nil {
			j.err = done(j.b)
		}
		if j.err != nil {
			err = j.err
			cancel(err)
		}
	}
	wg.Wait()
	if err == nil {
		err = feedErr
	}
	if err == nil {
		err = stopped
	}
	return err
}
