package reconcile

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ApplyStats are the figures of --apply / --dry-run.
type ApplyStats struct {
	DryRun            bool    `json:"dry_run"`
	Target            string  `json:"target"`
	Keys              int64   `json:"keys"`                  // missing keys to write
	SkippedCheckpoint int64   `json:"skipped_by_checkpoint"` // already written by an earlier run
	NotInRecords      int64   `json:"not_in_records"`        // whole digests needed but no record had the key
	Written           int64   `json:"written"`               // acknowledged by the server (or printed, dry run)
	Batches           int64   `json:"batches"`
	Retries           int64   `json:"retries"`
	Checkpoint        string  `json:"checkpoint,omitempty"`
	CheckpointLast    string  `json:"checkpoint_last,omitempty"`
	CheckpointRemoved bool    `json:"checkpoint_removed"`
	Seconds           float64 `json:"seconds"`
	KeysPerSecond     float64 `json:"keys_per_second"`
}

// applier writes items online in batches on several connections, in order
// of acknowledgement for the checkpoint: the checkpoint only ever moves to
// the end of the longest prefix of batches all acknowledged, so a failed
// batch in the middle is written again by the next run, never skipped.
type applier struct {
	src   Source
	o     *Options
	ck    *Checkpoint
	st    *ApplyStats
	pace  *pacer
	saved time.Time
}

// run writes what items produces (ascending by fingerprint).
func (a *applier) run(ctx context.Context, items func(emit func([]Item) error) error) error {
	type job struct {
		items []Item
		err   error
		done  chan struct{}
	}
	start := time.Now()
	defer func() {
		a.st.Seconds = time.Since(start).Seconds()
		a.st.KeysPerSecond = float64(a.st.Written) / max(a.st.Seconds, 1e-9)
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	conns := max(a.o.Conns, 1)
	if a.o.DryRun {
		conns = 1
	}
	jobs := make(chan *job, conns)
	results := make(chan *job, 2*conns)
	var retries atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if a.o.DryRun {
					j.err = a.src.Plan(a.o.DryRunOut, j.items)
				} else if j.err = a.pace.wait(ctx, len(j.items)); j.err == nil {
					j.err = retry(ctx, a.o.Retries, a.o.Backoff, func() { retries.Add(1) }, func() error {
						return a.src.Write(ctx, j.items)
					})
				}
				close(j.done)
			}
		}()
	}
	var feedErr error
	go func() {
		defer close(results)
		defer close(jobs)
		var pending []Item
		send := func(b []Item) bool {
			j := &job{items: b, done: make(chan struct{})}
			select {
			case results <- j:
			case <-ctx.Done():
				return false
			}
			select {
			case jobs <- j:
				return true
			case <-ctx.Done():
				j.err = context.Cause(ctx)
				close(j.done)
				return false
			}
		}
		feedErr = items(func(its []Item) error {
			for _, it := range its {
				if a.ck.hasLast && it.FP.Compare(a.ck.last) <= 0 {
					a.st.SkippedCheckpoint++
					continue
				}
				a.st.Keys++
				pending = append(pending, it)
				if len(pending) == a.o.Batch {
					if !send(pending) {
						return context.Cause(ctx)
					}
					pending = nil
				}
			}
			return nil
		})
		if feedErr == nil && len(pending) > 0 {
			send(pending)
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
			cancel(err)
			continue
		}
		a.st.Batches++
		a.st.Written += int64(len(j.items))
		if !a.o.DryRun {
			a.ck.advance(j.items[len(j.items)-1].FP, int64(len(j.items)))
			if a.o.Checkpoint != "" && time.Since(a.saved) > time.Second {
				if err = a.ck.save(a.o.Checkpoint); err != nil {
					cancel(err)
					continue
				}
				a.saved = time.Now()
			}
		}
	}
	wg.Wait()
	a.st.Retries = retries.Load()
	if err == nil && feedErr != nil {
		err = feedErr
	}
	a.st.CheckpointLast = a.ck.Last
	if a.o.DryRun || a.o.Checkpoint == "" {
		return err
	}
	if err != nil {
		if serr := a.ck.save(a.o.Checkpoint); serr != nil {
			return fmt.Errorf("%w (and the checkpoint could not be saved: %v)", err, serr)
		}
		return err
	}
	return nil
}
