package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// silentServer accepts connections and never answers; accepted is closed
// once it holds one.
func silentServer(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	done := make(chan struct{})
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
			close(done)
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if held = append(held, c); len(held) == 1 {
				close(got)
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), got
}

// stopsOnSignal starts the CLI, waits for ready, sends sig and waits for
// the exit: it must come long before the --timeout of 10 minutes the
// commands are given (the bound here is generous: it is about the
// timeout, not speed). It returns the exit code and stderr.
func stopsOnSignal(t *testing.T, dir string, env []string, ready func() bool, sig syscall.Signal, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(reconciletest.CLIBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for !ready() {
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before the point of the test:\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("the run never reached the point of the test:\n%s", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("exit %v after %v:\n%s", err, sig, stderr.String())
		}
		t.Logf("%v: exit %d %.2f s after it", sig, ee.ExitCode(), time.Since(sent).Seconds())
		return ee.ExitCode(), stderr.String()
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("still running 60 s after %v (--timeout 10m): the signal waits for the server:\n%s", sig, stderr.String())
	}
	return 0, ""
}

// TestSignalWhileServerSilent: SIGTERM or SIGINT while the server says
// nothing (a listener that accepts and never answers, as Redis and as
// MySQL; a real Redis whose writes are paused with CLIENT PAUSE during
// --apply) ends the run at once with 143 or 130, the checkpoint saved;
// it waited for --timeout (up to 115 s with the defaults' retries).
func TestSignalWhileServerSilent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.txt"), []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "--hash", "sha256", "-o", "t.fpx", "r.txt").Want(t, 0)
	for _, tc := range []struct {
		name, url string
		sig       syscall.Signal
		code      int
	}{
		{"redis", "redis://%s/0?match=dd:*", syscall.SIGTERM, 143},
		{"mysql", "mysql://u@%s/db?table=t&column=fp", syscall.SIGINT, 130},
	} {
		t.Run(tc.name+" accepts and never answers", func(t *testing.T) {
			addr, accepted := silentServer(t)
			ready := func() bool {
				select {
				case <-accepted:
					time.Sleep(100 * time.Millisecond) // the client's first command sent
					return true
				default:
					return false
				}
			}
			code, stderr := stopsOnSignal(t, dir, nil, ready, tc.sig, "reconcile", "--index", "t.fpx", "--online", fmt.Sprintf(tc.url, addr), "--timeout", "10m")
			if code != tc.code || !strings.Contains(stderr, "interrupted") {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, stderr)
			}
		})
	}

	t.Run("redis writes paused during --apply", func(t *testing.T) {
		c := reconciletest.RedisDB(t, 8)
		reconciletest.NeedKill(t) // CLIENT PAUSE holds every client of the server
		ctx := context.Background()
		d := reconciletest.NewDataset(t, 20_000)
		reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
		t.Cleanup(func() { c.Do(context.Background(), "CLIENT", "UNPAUSE") })
		ckpt := filepath.Join(d.Dir, "apply.ckpt")
		paused := false
		ready := func() bool {
			// Some batches written and the checkpoint saved: pause the
			// writes (reads go on) until the test ends.
			if _, err := os.Stat(ckpt); err != nil {
				return false
			}
			if !paused {
				if err := c.Do(ctx, "CLIENT", "PAUSE", "120000", "WRITE").Err(); err != nil {
					t.Fatal(err)
				}
				paused = true
			}
			time.Sleep(500 * time.Millisecond) // the next batch sent, unanswered
			return true
		}
		code, stderr := stopsOnSignal(t, d.Dir, nil, ready, syscall.SIGTERM, "reconcile", "--index", d.Index,
			"--online", reconciletest.RedisURL(t, 8, "match=dd:*"), "--apply", "--batch", "50", "--conns", "1", "--rate", "500",
			"--checkpoint", ckpt, "--timeout", "10m")
		if code != 143 || !strings.Contains(stderr, "SIGTERM") || !strings.Contains(stderr, "--checkpoint "+ckpt) {
			t.Fatalf("exit %d, want 143 and the checkpoint to resume from:\n%s", code, stderr)
		}
		var ck reconcile.Checkpoint
		if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 2000 {
			t.Fatalf("checkpoint %+v %v", ck, err)
		}
	})
}

// TestReadRatePacesFromTheFirstKey: --read-rate 1000 over a bloom audit
// of 3000 truth keys takes at least 3 s, the first key's batch paced too
// (it ran the whole audit, one batch of the index, unpaced). A lower
// bound only: a slower machine takes longer, never shorter.
func TestReadRatePacesFromTheFirstKey(t *testing.T) {
	reconciletest.PlainOnly(t, "a paced read waited for; the pacer runs under -race in the apply tests")
	c := reconciletest.RedisDB(t, 8)
	ctx := context.Background()
	dir := t.TempDir()
	reconciletest.BloomTruth(t, dir, 3000)
	const shards, m = 2, 1 << 16
	for s := range shards {
		c.SetBit(ctx, fmt.Sprintf("rp:{%d}", s), m-1, 0)
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", reconciletest.RedisURL(t, 8, fmt.Sprintf("bloom=rp:{*}&shards=%d&bits=%d&k=3", shards, m)),
		"--read-rate", "1000", "--report", "r.json").Want(t, 1)
	if rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json")); rep.Timings.Compare < 3 {
		t.Fatalf("3000 keys tested at --read-rate 1000 in %.2f s", rep.Timings.Compare)
	}
}
