package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/join"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// Options say how the missing keys are written.
type Options struct {
	Index      string // the truth index's path, as the checkpoint names it
	Checkpoint string // resume from and record progress in this file ("": none)
	// DryRun prints on DryRunOut what would be written, and writes nothing.
	DryRun    bool
	DryRunOut io.Writer
	Rate      float64 // keys/s written, 0: no limit
}

// Missing writes the missing keys online (or prints them, DryRun),
// keeping the checkpoint (Checkpoint), and removes it when all are
// written; then it reads them back (rep.ReadBack, rep.Missing). The keys
// come from the whole digests of the records (wide: sorted, distinct),
// or the key texts of the records (keyed, non-nil for a store that
// routes or names keys by them: sorted by fingerprint, distinct), else
// from the missing index or, without one, the spool.
func Missing(ctx context.Context, o *online.Config, ao Options, rep *report.Report, src online.Source, x, missingIndex *fpstore.Index, missingSpool *join.Spool, wide bool, digests [][32]byte, keyed []online.Item) error {
	as := &report.ApplyStats{DryRun: ao.DryRun, Target: o.Target, Checkpoint: ao.Checkpoint}
	rep.Apply = as
	ck := &Checkpoint{}
	if ao.Checkpoint != "" {
		var err error
		if ck, err = loadCheckpoint(ao.Checkpoint, ao.Index, x.Len(), o.Target); err != nil {
			return err
		}
	}
	if missing := rep.Counts.OnlyOffline; missing > 0 {
		var produce items
		switch {
		case wide:
			as.NotInRecords = missing - countFingerprints(digests)
			produce = digestItems(digests)
		case keyed != nil:
			as.NotInRecords = missing - int64(len(keyed))
			produce = keyedItems(keyed)
		default:
			produce = fingerprintItems(missingIndex, missingSpool)
		}
		var placed *Placement
		if !ao.DryRun {
			var err error
			if placed, err = Place(ctx, o.Target, src, "--apply"); err != nil {
				return err
			}
		}
		a := &applier{src: src, o: o, ao: ao, ck: ck, st: as, pace: online.NewPacer(ao.Rate)}
		err := a.run(ctx, produce)
		rep.Timings.Apply = as.Seconds
		var ie *online.ApplyInterruptedError
		switch {
		case errors.As(err, &ie):
			return err
		case err != nil && ctx.Err() != nil:
			return online.Interrupted(ctx, err)
		case err != nil && ao.DryRun:
			// Nothing was written: what failed is the plan's output (a
			// closed stdout is then the quiet end of a pipe) or its input.
			return err
		case err != nil:
			return &WriteError{Target: o.Target, Err: err, Refused: online.IsRefused(err), Retries: as.Retries, MaxRetries: o.Retries, Written: as.Written,
				Checkpoint: ao.Checkpoint, CheckpointLast: ck.Last}
		}
		if !ao.DryRun {
			if err := readBackApplied(ctx, o, rep, src, produce); err != nil {
				return err
			}
			rep.Missing = as.NotInRecords + rep.ReadBack.NotHeld
			if err := placed.Unmoved(ctx, as.Written); err != nil {
				return err
			}
		}
	}
	if !ao.DryRun && ao.Checkpoint != "" {
		// Done: nothing is left to resume.
		if err := os.Remove(ao.Checkpoint); err == nil {
			as.CheckpointRemoved = true
		} else if !errors.Is(err, os.ErrNotExist) {
			return &online.FileError{Op: "remove", File: online.CheckpointFile, Err: err, AfterApply: true}
		}
	}
	return nil
}

// Placement is where a Redis Cluster's slots were before a run's writes
// (online.Placed): a run that writes and reads back through a Cluster
// says what it wrote is there only if no slot changed hands until its
// read-back was done (Unmoved).
type Placement struct {
	src          online.Placed
	target, what string
	before       string
}

// Place takes where src's slots are before the writes of what (--apply,
// --rebuild-shard); nil for a source of one server.
func Place(ctx context.Context, target string, src online.Source, what string) (*Placement, error) {
	p, ok := src.(online.Placed)
	if !ok {
		return nil, nil
	}
	before, err := p.SlotOwners(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: before %s's writes, asking which nodes serve the slots: %w", target, what, err)
	}
	if before == "" {
		return nil, nil
	}
	return &Placement{src: p, target: target, what: what, before: before}, nil
}

// Unmoved says, after the writes and their read-back, whether a slot
// changed hands since Place (a *MovedError): a nil Placement never did.
func (pl *Placement) Unmoved(ctx context.Context, written int64) error {
	if pl == nil {
		return nil
	}
	after, err := pl.src.SlotOwners(ctx)
	if err != nil {
		return fmt.Errorf("%s: after %s's writes and their read-back, asking which nodes serve the slots: %w", pl.target, pl.what, err)
	}
	if after != pl.before {
		return &MovedError{Target: pl.target, What: pl.what, Written: written, Before: pl.before, After: after}
	}
	return nil
}

// items produces the keys to write, in ascending order, in batches.
type items func(emit func([]online.Item) error) error

// digestItems are whole digests (sorted, distinct).
func digestItems(digests [][32]byte) items {
	return func(emit func([]online.Item) error) error {
		b := make([]online.Item, 0, 4096)
		for _, d := range digests {
			b = append(b, online.Item{FP: fpstore.FromBytes(d[:16]), Full: d, HasFull: true})
			if len(b) == cap(b) {
				if err := emit(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		return emit(b)
	}
}

// keyedItems are items with their key texts (sorted, distinct), given
// whole at each call: once to write them, again to read them back.
func keyedItems(keyed []online.Item) items {
	return func(emit func([]online.Item) error) error {
		for rest := keyed; len(rest) > 0; {
			n := min(len(rest), 4096)
			if err := emit(rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	}
}

// fingerprintItems are the fingerprints of the missing index or, without
// one, of the spool.
func fingerprintItems(missingIndex *fpstore.Index, missingSpool *join.Spool) items {
	return func(emit func([]online.Item) error) error {
		var r join.Reader
		if missingIndex != nil {
			r = join.NewCursorReader(missingIndex)
		} else {
			var err error
			if r, err = missingSpool.Reader(); err != nil {
				return err
			}
		}
		b := make([]online.Item, 0, 8192)
		for {
			fps, err := r.Next()
			if err != nil || fps == nil {
				return err
			}
			b = b[:0]
			for _, fp := range fps {
				b = append(b, online.Item{FP: fp})
			}
			if err := emit(b); err != nil {
				return err
			}
		}
	}
}

// countFingerprints counts the distinct fingerprints (first 16 bytes) of
// sorted digests.
func countFingerprints(d [][32]byte) int64 {
	var n int64
	for i := range d {
		if i == 0 || [16]byte(d[i][:16]) != [16]byte(d[i-1][:16]) {
			n++
		}
	}
	return n
}

// applier writes items online in batches on several connections, in order
// of acknowledgement for the checkpoint: the checkpoint only ever moves to
// the end of the longest prefix of batches all acknowledged, so a failed
// batch in the middle is written again by the next run, never skipped.
type applier struct {
	src   online.Source
	o     *online.Config
	ao    Options
	ck    *Checkpoint
	st    *report.ApplyStats
	pace  *online.Pacer
	saved time.Time
}

// run writes what items produces (ascending by fingerprint).
func (a *applier) run(ctx context.Context, produce items) error {
	start := time.Now()
	defer func() {
		a.st.Seconds = time.Since(start).Seconds()
		a.st.KeysPerSecond = float64(a.st.Written) / max(a.st.Seconds, 1e-9)
	}()
	conns := a.o.Conns
	if a.ao.DryRun {
		conns = 1
	}
	var retries atomic.Int64
	// Where the loaded checkpoint says an earlier run got. The feed skips
	// nothing up to there: it is this run's audit, which finds what the
	// earlier run wrote present, so a key it finds missing at or before
	// the checkpoint was deleted or lost since, and is written again
	// (every store's write is idempotent) and counted. (Not a.ck itself,
	// which done advances meanwhile on another goroutine.)
	had, lastRun := a.ck.hasLast, a.ck.last
	err := online.Ordered(ctx, conns,
		func(ctx context.Context, send func([]online.Item) bool) error {
			var pending []online.Item
			err := produce(func(its []online.Item) error {
				for _, it := range its {
					if had && it.FP.Compare(lastRun) <= 0 {
						a.st.MissingAgain++
					}
					a.st.Keys++
					if pending == nil {
						pending = make([]online.Item, 0, min(a.o.Batch, 1<<16))
					}
					if pending = append(pending, it); len(pending) == a.o.Batch {
						if !send(pending) {
							return context.Cause(ctx)
						}
						pending = nil
					}
				}
				return nil
			})
			if err == nil && len(pending) > 0 && !send(pending) {
				return context.Cause(ctx)
			}
			return err
		},
		func(ctx context.Context, b []online.Item) error {
			if a.ao.DryRun {
				return a.src.Plan(a.ao.DryRunOut, b)
			}
			if err := a.pace.Wait(ctx, len(b)); err != nil {
				return err
			}
			return a.o.Retry(ctx, a.src.Retryable, "writing to "+a.o.Target, &retries, func() error {
				return a.src.Write(ctx, b)
			})
		},
		func(b []online.Item) error {
			a.st.Batches++
			a.st.Written += int64(len(b))
			if a.ao.DryRun {
				return nil
			}
			a.ck.advance(b[len(b)-1].FP, int64(len(b)))
			if a.ao.Checkpoint != "" && time.Since(a.saved) > time.Second {
				if err := a.ck.save(a.ao.Checkpoint); err != nil {
					return err
				}
				a.saved = time.Now()
			}
			return nil
		})
	a.st.Retries = retries.Load()
	if sr, ok := a.src.(online.SelfRetrying); ok && !a.ao.DryRun {
		a.st.Retries += sr.WriteRetries()
		a.st.Written = max(a.st.Written, sr.KeysWritten())
	}
	a.st.CheckpointLast = a.ck.Last
	if !a.ao.DryRun && ctx.Err() != nil {
		// Interrupted (also if the last batch was acknowledged just
		// before): keys may be online, and the checkpoint says up to where.
		ie := online.ApplyInterrupted(ctx, online.ApplyInterruptedError{Target: a.o.Target, Written: a.st.Written, Checkpoint: a.ao.Checkpoint,
			CheckpointLast: a.ck.Last})
		if a.ao.Checkpoint != "" {
			if ie.CheckpointErr = a.ck.save(a.ao.Checkpoint); ie.CheckpointErr == nil {
				ie.CheckpointSaved = true
			}
		}
		return ie
	}
	if a.ao.DryRun || a.ao.Checkpoint == "" {
		return err
	}
	if err != nil {
		if serr := a.ck.save(a.ao.Checkpoint); serr != nil {
			return &UnsavedCheckpointError{Err: err, Save: serr}
		}
		return err
	}
	return nil
}

// wholeShards asks a source that can read shards back whole
// (online.WholeReader) which it will, given the items produce gives to
// each; nil for another source.
func wholeShards(ctx context.Context, src online.Source, produce items) (whole []bool, written []int64, err error) {
	wr, ok := src.(online.WholeReader)
	if !ok {
		return nil, nil, nil
	}
	written = make([]int64, wr.Shards())
	err = produce(func(its []online.Item) error {
		for _, it := range its {
			written[wr.ShardOf(it)]++
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	whole, err = wr.ReadWhole(ctx, written)
	return whole, written, err
}

// readBackApplied probes every key produce gives (those this run wrote,
// and those a checkpoint said an earlier run wrote) with the source's
// read-only Held, on o.Conns connections at o.ReadRate: what is missing
// after the run is what this finds, never what the writes answered. A
// bloom's shards written are then read back whole (their length, and at
// least the bits the audit read before: --apply only sets bits), which
// also finds keys it did not write lost: a shard deleted or flushed
// meanwhile.
func readBackApplied(ctx context.Context, o *online.Config, rep *report.Report, src online.Source, produce items) error {
	rb := &report.ReadBack{Samples: []string{}}
	rep.ReadBack = rb
	start := time.Now()
	defer func() { rb.Seconds = time.Since(start).Seconds() }()
	sh, sharded := src.(online.Sharded)
	var touched []bool
	if sharded {
		touched = make([]bool, sh.Shards())
	}
	// The shards the source reads back whole, and the items of each.
	whole, written, err := wholeShards(ctx, src, produce)
	if err != nil {
		return &ReadBackError{Target: o.Target, Written: rep.Apply.Written, Err: err}
	}
	count := func(it *online.Item, held bool) {
		rb.Keys++
		if !held {
			rb.NotHeld++
			if len(rb.Samples) < o.Samples {
				rb.Samples = append(rb.Samples, it.FP.String())
			}
		}
	}
	pace := online.NewPacer(o.ReadRate)
	type batch struct {
		items   []online.Item
		present []bool
	}
	err = online.Ordered(ctx, o.Conns,
		func(ctx context.Context, send func(batch) bool) error {
			var asked []online.Item
			return produce(func(its []online.Item) error {
				if whole != nil {
					asked = asked[:0]
					for _, it := range its {
						if !whole[sh.ShardOf(it)] {
							asked = append(asked, it)
						}
					}
					its = asked
				}
				for len(its) > 0 {
					n := min(len(its), o.Batch)
					if !send(batch{items: slices.Clone(its[:n]), present: make([]bool, n)}) {
						return context.Cause(ctx)
					}
					its = its[n:]
				}
				return nil
			})
		},
		func(ctx context.Context, j batch) error {
			if err := pace.Wait(ctx, len(j.items)); err != nil {
				return err
			}
			return o.Retry(ctx, src.Retryable, "reading back from "+o.Target, nil, func() error {
				return src.Held(ctx, j.items, j.present)
			})
		},
		func(j batch) error {
			for i := range j.items {
				if sharded {
					touched[sh.ShardOf(j.items[i])] = true
				}
				count(&j.items[i], j.present[i])
			}
			return nil
		})
	if err == nil && slices.Contains(whole, true) {
		for s := range whole {
			touched[s] = touched[s] || whole[s]
		}
		each := func(fn func(*online.Item) error) error {
			return produce(func(its []online.Item) error {
				for i := range its {
					if err := fn(&its[i]); err != nil {
						return err
					}
				}
				return nil
			})
		}
		err = src.(online.WholeReader).HeldWhole(ctx, whole, written, each, count)
	}
	if err == nil && sharded {
		err = sh.ReadBackShards(ctx, touched, rep)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return err // the interruption: Missing's caller says what was written
	case err != nil:
		return &ReadBackError{Target: o.Target, Written: rep.Apply.Written, Probed: rb.Keys, Err: err}
	}
	return nil
}
