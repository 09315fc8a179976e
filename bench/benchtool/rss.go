package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// rssMain runs a command and samples the anonymous resident memory
// (RssAnon of /proc/PID/status) of it and all its descendants, summed, every
// --every. The kernel keeps a peak of the total RSS (VmHWM, what GNU time's
// %M reports) but none of the anonymous part, which excludes the page cache
// of mmapped inputs: a sampled peak is the best there is, and a lower bound
// of the true one (a spike shorter than --every can be missed).
//
// It writes the peak in KiB, one number, to -o and exits with the command's
// status (128+signal when a signal ended it), so it can wrap any command
// line transparently.
func rssMain(args []string, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("rss", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the peak anonymous RSS in KiB here (required)")
	every := fs.Duration("every", 10*time.Millisecond, "sampling interval")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if *out == "" || fs.NArg() == 0 {
		return 2, errors.New("usage: benchtool rss -o FILE [--every 10ms] -- COMMAND [ARG...]")
	}
	if *every <= 0 {
		return 2, errors.New("rss: --every must be positive")
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	// SIGINT and SIGTERM go to the command, whose exit ends this one.
	// (Caught, not ignored: an ignored signal would stay ignored in the
	// command across exec.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	root := cmd.Process.Pid
	var peak int64
	tick := time.NewTicker(*every)
	defer tick.Stop()
	var werr error
wait:
	for {
		if kb := treeAnonKB(root); kb > peak {
			peak = kb
		}
		select {
		case werr = <-done:
			break wait
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-tick.C:
		}
	}
	if err := os.WriteFile(*out, []byte(strconv.FormatInt(peak, 10)+"\n"), 0o644); err != nil {
		return 2, err
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
		return 0, nil
	case errors.As(werr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 2, werr
}

// treeAnonKB sums RssAnon over root and its descendants now. Processes come
// and go while /proc is read; one that vanished counts as 0.
func treeAnonKB(root int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := ppidOf(pid); ok {
			parent[pid] = pp
		}
	}
	var sum int64
	for pid := range parent {
		if isDescendant(pid, root, parent) {
			sum += anonKB(pid)
		}
	}
	return sum
}

func isDescendant(pid, root int, parent map[int]int) bool {
	for depth := 0; depth < 64; depth++ {
		if pid == root {
			return true
		}
		pp, ok := parent[pid]
		if !ok || pp <= 1 {
			return false
		}
		pid = pp
	}
	return false
}

// ppidOf reads the 4th field of /proc/PID/stat, after the parenthesised
// command name (which may itself hold spaces and parentheses).
func ppidOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatPPID(b)
}

func parseStatPPID(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	return pp, err == nil
}

func anonKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	kb, _ := parseRssAnon(b)
	return kb
}

// parseRssAnon finds "RssAnon:   1234 kB" in /proc/PID/status.
func parseRssAnon(b []byte) (int64, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if rest, ok := bytes.CutPrefix(line, []byte("RssAnon:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				return 0, false
			}
			return n, true
		}
	}
	return 0, false
}

func rssExit(args []string) {
	code, err := rssMain(args, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
	}
	os.Exit(code)
}
