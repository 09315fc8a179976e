package online

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
)

// A feed stopped by a cancelled context while every batch it had sent
// succeeded (the slow one completing anyway, as a write in flight does):
// Ordered must not return nil, or --probe would pass a partial comparison
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
	err := Ordered(ctx, 2,
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
		t.Fatalf("Ordered returned %v after %d of %d batches, want the cause of the cancellation", err, done, sent)
	}
}

func TestParseHex(t *testing.T) {
	fp := fpstore.Fingerprint{Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}
	for _, s := range []string{"0123456789abcdeffedcba9876543210", "0123456789ABCDEFFEDCBA9876543210",
		"0123456789abcdeffedcba9876543210" + strings.Repeat("7", 32)} {
		got, ok := ParseHex(s)
		if !ok || got != fp {
			t.Errorf("%s: %v %v", s, got, ok)
		}
		if got2, ok2 := ParseHex([]byte(s)); got2 != got || ok2 != ok {
			t.Errorf("%s: string and bytes differ", s)
		}
	}
	for _, s := range []string{"", "0123", "0123456789abcdeffedcba987654321g", "0123456789abcdeffedcba9876543210" + strings.Repeat("x", 32),
		"0123456789abcdeffedcba98765432100", " 123456789abcdeffedcba9876543210"} {
		if _, ok := ParseHex(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestPacer(t *testing.T) {
	p := NewPacer(20000)
	start := time.Now()
	for i := 0; i < 11; i++ {
		if err := p.Wait(context.Background(), 1000); err != nil {
			t.Fatal(err)
		}
	}
	// 11 batches of 1000 at 20k/s: each waits its 50 ms, the last ends 0.55 s in.
	if d := time.Since(start); d < 450*time.Millisecond || d > 2*time.Second {
		t.Fatalf("11k keys at 20k/s took %v", d)
	}
	if NewPacer(0) != nil {
		t.Fatal("rate 0 should be no limit")
	}
}

// FuzzParseHex: ParseHex accepts exactly 32 or 64 hex digits, either case,
// and reads the first 32 as the fingerprint, as encoding/hex does.
func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"00112233445566778899aabbccddeeff", strings.Repeat("F", 64), "0011", strings.Repeat("g", 32), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fp, ok := ParseHex(s)
		raw, err := hex.DecodeString(s)
		want := err == nil && (len(s) == 32 || len(s) == 64)
		if ok != want {
			t.Fatalf("%q: ParseHex ok=%v, want %v", s, ok, want)
		}
		if ok && (fp.String() != strings.ToLower(s[:32]) || len(raw) != len(s)/2) {
			t.Fatalf("%q: parsed %s", s, fp)
		}
	})
}
