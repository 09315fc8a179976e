package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

type testSignal struct{ name string }

func (s testSignal) Error() string { return "interrupted by " + s.name }

// online.Interrupted: never nil once the context is done; errors.Is for
// context.Canceled and errors.As for the cause's type both hold; what the
// run stopped with is kept when it says more than the cancellation.
func TestInterruptedErrors(t *testing.T) {
	interrupted := online.Interrupted
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

	sigterm, stop := context.WithCancelCause(context.Background())
	stop(testSignal{"SIGTERM"})
	ie := online.ApplyInterrupted(sigterm, ApplyInterruptedError{Target: "redis://h:1/0?match=dd:*", Written: 1234, Checkpoint: "apply.ckpt", CheckpointSaved: true})
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
