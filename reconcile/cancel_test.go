package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A feed stopped by a cancelled context while every batch it had sent
// succeeded (the slow one completing anyway, as a write in flight does):
// ordered must not return nil, or --probe would pass a partial comparison
// for a complete one. Deterministic: with one slow batch on one of two
// connections, four quick ones fill the results queue and the feed waits
// in its first select, the one that used to return false without an error.
func TestOrderedStoppedFeedIsAnError(t *testing.T) {
	cause := errors.New("test: stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var quick atomic.Int64
	go func() {
		for quick.Load() < 4 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // the feed now waits on the full queue
		cancel(cause)
	}()
	var sent, done int
	err := ordered(ctx, 2,
		func(ctx context.Context, send func(int) bool) error {
			for i := 1; ; i++ {
				if !send(i) {
					return nil // as probeJoin's feed does
				}
				sent++
			}
		},
		func(ctx context.Context, b int) error {
			if b == 1 {
				<-ctx.Done()
				return nil
			}
			quick.Add(1)
			return nil
		},
		func(int) error { done++; return nil })
	if !errors.Is(err, cause) {
		t.Fatalf("ordered returned %v after %d of %d batches, want the cause of the cancellation", err, done, sent)
	}
}

type testSignal struct{ name string }

func (s testSignal) Error() string { return "interrupted by " + s.name }

// interrupted: never nil once the context is done; errors.Is for
// context.Canceled and errors.As for the cause's type both hold; what the
// run stopped with is kept when it says more than the cancellation.
func TestInterruptedErrors(t *testing.T) {
	if err := interrupted(context.Background(), nil); err != nil {
		t.Fatalf("live context, no error: %v", err)
	}
	plain := errors.New("plain")
	if err := interrupted(context.Background(), plain); err != plain {
		t.Fatalf("live context: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(testSignal{"SIGINT"})
	for _, in := range []error{nil, context.Canceled, testSignal{"SIGINT"}, errors.New("reading x: context canceled")} {
		err := interrupted(ctx, in)
		var sig testSignal
		if err == nil || !errors.Is(err, context.Canceled) || !errors.As(err, &sig) || sig.name != "SIGINT" {
			t.Fatalf("interrupted(%v) = %v: not both context.Canceled and the cause", in, err)
		}
		if in != nil && strings.Contains(in.Error(), "reading") && !strings.Contains(err.Error(), "reading x") {
			t.Fatalf("interrupted(%v) = %q: lost where it stopped", in, err)
		}
		if strings.Count(err.Error(), "interrupted by SIGINT") != 1 {
			t.Fatalf("interrupted(%v) = %q", in, err)
		}
	}
	// A plain cancel: the cause is context.Canceled itself.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := interrupted(ctx2, nil); !errors.Is(err, context.Canceled) || err.Error() != "context canceled" {
		t.Fatalf("plain cancel: %v", err)
	}

	ie := &ApplyInterruptedError{Target: "redis://h:1/0?match=dd:*", Written: 1234, Checkpoint: "apply.ckpt", CheckpointSaved: true,
		Cause: testSignal{"SIGTERM"}, ctxErr: context.Canceled}
	var wrapped error = Scrubbed{err: ie, forms: []string{"pw"}}
	var got *ApplyInterruptedError
	var sig testSignal
	if !errors.As(wrapped, &got) || got.Written != 1234 || !errors.Is(wrapped, context.Canceled) || !errors.As(wrapped, &sig) || sig.name != "SIGTERM" {
		t.Fatalf("ApplyInterruptedError does not unwrap: %v", wrapped)
	}
	if want := "after writing 1234 keys to redis://h:1/0?match=dd:*; rerun with the checkpoint apply.ckpt to resume"; !strings.Contains(ie.Error(), want) {
		t.Fatalf("%q lacks %q", ie.Error(), want)
	}
	ie.Checkpoint, ie.CheckpointSaved = "", false
	if !strings.Contains(ie.Error(), "run it again to write the rest") {
		t.Fatalf("without a checkpoint: %q", ie.Error())
	}
	ctx3, cancel3 := context.WithCancelCause(context.Background())
	cancel3(testSignal{"SIGTERM"})
	if interrupted(ctx3, ie) != error(ie) {
		t.Fatal("interrupted rewrapped an ApplyInterruptedError")
	}
}
