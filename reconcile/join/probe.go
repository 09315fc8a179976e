package join

import (
	"context"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// probeJoin looks up every offline fingerprint online, in batches of
// o.Batch on o.Conns connections at once, and takes the answers in index
// order, so the missing ones come out ascending (as an index writer needs).
// The online side's own keys are never listed: OnlyOnline stays unknown.
func probeJoin(ctx context.Context, off Reader, src online.Source, o *online.Config, st *online.ReadStats, both *int64, missing *sink) error {
	type batch struct {
		fps     []fpstore.Fingerprint
		present []bool
	}
	var retries atomic.Int64
	defer func() { st.Retries += int(retries.Load()) }()
	return online.Ordered(ctx, o.Conns,
		func(ctx context.Context, send func(batch) bool) error {
			for {
				b, err := off.Next()
				if err != nil || b == nil {
					return err
				}
				for len(b) > 0 {
					n := min(len(b), o.Batch)
					if !send(batch{fps: append([]fpstore.Fingerprint(nil), b[:n]...), present: make([]bool, n)}) {
						return nil // stopping: the cause is the error of Ordered
					}
					b = b[n:]
				}
			}
		},
		func(ctx context.Context, j batch) error {
			err := st.Wait(ctx, len(j.fps))
			if err == nil {
				err = o.Retry(ctx, src.Retryable, "probing "+o.Target, &retries, func() error {
					return src.Probe(ctx, j.fps, j.present)
				})
			}
			st.Values.Add(int64(len(j.fps)))
			return err
		},
		func(j batch) error {
			for i, fp := range j.fps {
				if j.present[i] {
					*both++
				} else if err := missing.add(fp); err != nil {
					return err
				}
			}
			return nil
		})
}
