package ingest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestIdleThroughSignals: a signal that lands while Idle waits on a paused
// pipe (the Go runtime's own preemption signals do, more often the busier
// the machine) must not make it say the input is not idle: the reader would
// then block in a read while the answers it owes wait in its buffer, and a
// writer waiting for them (query's keys typed by hand) waits for ever.
func TestIdleThroughSignals(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	in, err := Open(fmt.Sprintf("/proc/self/fd/%d", r.Fd()))
	if err != nil {
		t.Skip("a pipe cannot be opened through /proc here:", err)
	}
	defer in.Close()
	if n, err := in.Read(make([]byte, 16)); n != 2 || err != nil {
		t.Fatalf("read %d bytes, %v", n, err)
	}

	tids := make(chan int, 1)
	idle := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		idle <- in.Idle(300 * time.Millisecond)
	}()
	tid := <-tids
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for signals := 0; ; {
		select {
		case got := <-idle:
			if !got {
				t.Fatalf("Idle said a paused pipe was not idle (%d signals sent while it waited)", signals)
			}
			return
		case <-tick.C:
			// SIGURG is the runtime's preemption signal: its handler
			// ignores one that is not its own.
			if err := unix.Tgkill(os.Getpid(), tid, unix.SIGURG); err == nil {
				signals++
			}
		}
	}
}
