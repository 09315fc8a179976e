package bench

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// RunSampled starts cmd and samples the anonymous resident memory (RssAnon
// of /proc/PID/status) of its process and all their descendants, summed,
// every `every` until it exits; it returns that peak in bytes and what
// cmd.Wait returned. The kernel keeps a peak of the total RSS (VmHWM, what
// GNU time's %M reports) but none of the anonymous part, which excludes the
// page cache of mmapped inputs: a sampled peak is the best there is, and a
// lower bound of the true one (a spike shorter than `every` can be missed).
//
// A signal received on forward (nil: none) is passed on to the process; it
// is how a wrapper lets SIGINT and SIGTERM reach the command it measures.
func RunSampled(cmd *exec.Cmd, every time.Duration, forward <-chan os.Signal) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	root := cmd.Process.Pid
	var peak int64
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if kb := treeAnonKB(root); kb > peak {
			peak = kb
		}
		select {
		case err := <-done:
			return peak << 10, err
		case sig := <-forward:
			_ = cmd.Process.Signal(sig)
		case <-tick.C:
		}
	}
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
