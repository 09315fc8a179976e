package online

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
)

// Config is what every part of a run beneath reconcile's facade reads:
// how to reach the online side and how hard to try, how much memory and
// at what pace, where to say what it waits for. reconcile.Run makes it of
// its Options once, defaults filled in; it is not changed after, and is
// read from several goroutines at once.
type Config struct {
	// Target is the online side's URL as every message and the report
	// name it: redacted, never with a password.
	Target   string
	Password string // never printed
	// Probe: each offline fingerprint is looked up online, instead of the
	// online side being read whole.
	Probe   bool
	Batch   int           // keys a pipeline, statement or probe
	Conns   int           // connections used at once
	Retries int           // of a failed read, probe or write
	Backoff time.Duration // before the first retry, doubling up to 5 s
	Timeout time.Duration // of one operation online
	// Waiting, if set, is told of every retry (a silent server takes
	// (1+Retries) × Timeout plus the backoffs to give up).
	Waiting  func(Wait)
	ReadRate float64 // keys/s read, probed or read back; 0: no limit
	// Plan is the run's shares of its memory budget (memplan.Reconcile):
	// every buffer that grows with it takes its share from here.
	Plan     memplan.Plan
	TmpDir   string
	Threads  int
	Samples  int              // values of each kind kept for the report
	Progress *ingest.Progress // values read (optional)
	// Hangup closes the run's connections once its context is done; nil
	// (a Config not from Run) closes none.
	Hangup *Hangup
}

// A Wait is a retry about to be made: what failed, on which try of how
// many, why, and how long until the next (Config.Waiting).
type Wait struct {
	What       string // "reaching redis://…", "reading mysql://…"
	Try, Tries int
	Err        error
	Next       time.Duration
}

// Retry runs fn up to 1+c.Retries times with exponential backoff from
// c.Backoff (capped at 5 s) while it fails with an error that retryable
// says may pass with time (a Source's Retryable) and ctx is live. Each
// retry is told to c.Waiting as one of what, and counted in n, if set.
func (c *Config) Retry(ctx context.Context, retryable func(error) bool, what string, n *atomic.Int64, fn func() error) error {
	return retry(ctx, c.Retries, c.Backoff, c.waiting(what, n), retryable, fn)
}

// waiting is the retry hook that tells c.Waiting, if set, of each retry of
// what, and counts it in n, if set.
func (c *Config) waiting(what string, n *atomic.Int64) func(Wait) {
	return func(w Wait) {
		if n != nil {
			n.Add(1)
		}
		if c.Waiting != nil {
			w.What = what
			c.Waiting(w)
		}
	}
}

// retry runs fn up to 1+retries times with exponential backoff (capped at
// 5 s) while it fails with a retryable error and ctx is live; onRetry, if
// set, is told of each retry before its backoff.
func retry(ctx context.Context, retries int, backoff time.Duration, onRetry func(Wait), retryable func(error) bool, fn func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = fn(); err == nil || ctx.Err() != nil || attempt >= retries || !retryable(err) {
			return err
		}
		d := backoff << attempt
		if d > 5*time.Second {
			d = 5 * time.Second
		}
		if onRetry != nil {
			onRetry(Wait{Try: attempt + 1, Tries: retries + 1, Err: err, Next: d})
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
	}
}

// Permanent marks an error that no retry can fix: every store's Retryable
// says so of it.
type Permanent struct{ Err error }

func (p Permanent) Error() string { return p.Err.Error() }
func (p Permanent) Unwrap() error { return p.Err }

// IsPermanent reports whether err is marked Permanent.
func IsPermanent(err error) bool {
	var perm Permanent
	return errors.As(err, &perm)
}

// Refused marks a write the store refused for a reason a rerun does not
// change (the user lacks the permission to write, a server's limit is
// below one key): the error says what is wrong, never "rerun". It is
// Permanent too.
type Refused struct{ Err error }

func (r Refused) Error() string { return r.Err.Error() }
func (r Refused) Unwrap() error { return Permanent(r) }

// IsRefused reports whether err is marked Refused.
func IsRefused(err error) bool {
	var r Refused
	return errors.As(err, &r)
}

// Retryable is what a store that knows no answer of its own to be final
// retries: every error but a Permanent one.
func Retryable(err error) bool { return !IsPermanent(err) }
