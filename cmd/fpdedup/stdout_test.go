package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// TestOnlyStdoutIsAClosedPipe: a write to stdout whose reader went away ends
// the run quietly with 141; a broken pipe anywhere else (a socket to Redis
// or MySQL, a FIFO given to -o) is an error like any other, exit 2, said.
func TestOnlyStdoutIsAClosedPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	_, werr := stdoutWriter{w}.Write([]byte("x"))
	if got := exitCode(werr); got != exitPipe {
		t.Errorf("stdout's closed pipe: exit %d, want %d (%v)", got, exitPipe, werr)
	}
	probe := fmt.Errorf("probing redis://10.0.0.5:6379 failed: write tcp: %w", syscall.EPIPE)
	if got := exitCode(probe); got != exitError {
		t.Errorf("a server's closed connection: exit %d, want %d", got, exitError)
	}
}
