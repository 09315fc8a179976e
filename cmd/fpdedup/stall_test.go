package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStalledInputAnswersNow: when a pipe's writer pauses (keys typed by
// hand, tail -f of a log), what the records read so far decide goes out
// before any more input comes: query's answers, dedup's kept records (to
// stdout and to --duplicates). The writer here sends a few records and then
// waits, with the pipe open, for their answers; on a tool that waits for a
// full chunk or EOF they never come, and the test fails at its deadline
// (generous: it is about order, not speed).
func TestStalledInputAnswersNow(t *testing.T) {
	bin := fpdedupLink(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	if err := os.WriteFile(keys, []byte("alpha\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "k.fpx")
	runFpdedup(t, bin, "build", "-q", "-o", index, keys)
	dupsFIFO := filepath.Join(dir, "dups")

	for _, c := range []struct {
		name  string
		args  []string
		sends []string // each sent after the answers to the one before came
		wants []string // the lines each send must bring out on stdout
	}{
		{"query", []string{"query", index}, []string{"alpha\n", "gamma\nbeta\n"}, []string{"present\talpha\n", "absent\tgamma\npresent\tbeta\n"}},
		{"query --only absent", []string{"query", "--only", "absent", index}, []string{"x\n", "alpha\ny\n"}, []string{"x\n", "y\n"}},
		{"dedup", []string{"dedup", "-q"}, []string{"a\nb\na\n", "b\nc\n"}, []string{"a\nb\n", "c\n"}},
		{"dedup --duplicates", []string{"dedup", "-q", "--duplicates", dupsFIFO}, []string{"a\nb\na\n", "c\nb\n"}, []string{"a\nb\n", "c\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var dups *bufio.Reader
			if strings.Contains(c.name, "--duplicates") {
				os.Remove(dupsFIFO)
				if err := syscall.Mkfifo(dupsFIFO, 0o644); err != nil {
					t.Skip("no FIFO here:", err)
				}
			}
			cmd := exec.Command(bin, append([]string{"--progress", "never"}, c.args...)...)
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			outPipe, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if strings.Contains(c.name, "--duplicates") {
				f, err := os.Open(dupsFIFO) // the writer opens it once started
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				dups = bufio.NewReader(f)
			}
			out := bufio.NewReader(outPipe)
			for i, send := range c.sends {
				if _, err := io.WriteString(in, send); err != nil {
					t.Fatal(err)
				}
				got := readLines(t, out, strings.Count(c.wants[i], "\n"), 60*time.Second)
				if got != c.wants[i] {
					t.Fatalf("after send %d (%q), with the pipe still open: got %q, want %q\nstderr: %s", i+1, send, got, c.wants[i], stderr.String())
				}
			}
			if dups != nil {
				if got := readLines(t, dups, 1, 60*time.Second); got != "a\n" {
					t.Errorf("--duplicates, with the pipe still open: got %q, want %q", got, "a\n")
				}
			}
			in.Close()
			rest, _ := io.ReadAll(out)
			if dups != nil {
				if more, _ := io.ReadAll(dups); string(more) != "b\n" {
					t.Errorf("--duplicates at the end: got %q, want %q", more, "b\n")
				}
			}
			err = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); len(rest) != 0 || (code != 0 && !(strings.HasPrefix(c.name, "query") && code == 1)) {
				t.Errorf("at EOF: more output %q, exit %d (%v)\nstderr: %s", rest, code, err, stderr.String())
			}
		})
	}
}

// readLines reads n lines from r, or fails the test once the deadline has
// passed without them.
func readLines(t *testing.T, r *bufio.Reader, n int, deadline time.Duration) string {
	t.Helper()
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for range n {
			line, err := r.ReadString('\n')
			b.WriteString(line)
			if err != nil {
				done <- result{b.String(), err}
				return
			}
		}
		done <- result{b.String(), nil}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("reading %d lines: got %q, then %v", n, res.s, res.err)
		}
		return res.s
	case <-time.After(deadline):
		t.Fatalf("no %d lines in %s with the input paused: the answers wait for more input", n, deadline)
		return ""
	}
}
