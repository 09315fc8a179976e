package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/zeebo/xxh3"
)

// command is one process a row runs: argv without a shell unless argv is a
// shell pipeline ("sh", "-c", …), stdin from a file or /dev/null, stdout
// drained and counted by the benchmark through a pipe (no tool can take a
// /dev/null shortcut), stderr kept for the report when it fails.
type command struct {
	argv  []string
	stdin string   // file for stdin; "" = /dev/null
	env   []string // added to the environment (LC_ALL=C is always set)
}

// Sample is one run of one row, as the kernel accounted it: wall time from
// fork to the end of its output, user and system CPU and the peak resident
// set of the process and every descendant it waited for (wait4's rusage,
// what GNU time %M reports).
type Sample struct {
	WallS    float64 `json:"wall_s"`
	UserS    float64 `json:"user_s"`
	SysS     float64 `json:"sys_s"`
	MaxRSS   int64   `json:"max_rss_bytes"`
	Exit     int     `json:"exit"`
	OutBytes int64   `json:"out_bytes"`
	OutLines int64   `json:"out_lines"`
}

// outStats is what a run wrote to stdout. The checked run (the first of a
// row) also hashes the bytes and counts the first byte of every line, so
// outputs can be compared byte for byte and query answers counted without
// keeping them.
type outStats struct {
	Bytes, Lines int64
	Head         string // the first line, at most headMax bytes
	Hash         string // XXH3-128 of every byte, hex; checked runs only
	LineStarts   [256]int64
}

const headMax = 200

// sink counts a process's output as it arrives.
type sink struct {
	check   bool
	st      outStats
	head    []byte
	h       *xxh3.Hasher
	atStart bool
}

func newSink(check bool) *sink {
	s := &sink{check: check, atStart: true}
	if check {
		s.h = xxh3.New()
	}
	return s
}

func (s *sink) Write(p []byte) (int, error) {
	s.st.Bytes += int64(len(p))
	s.st.Lines += int64(bytes.Count(p, []byte{'\n'}))
	if len(s.head) < headMax {
		s.head = append(s.head, p[:min(len(p), headMax-len(s.head))]...)
	}
	if s.check {
		s.h.Write(p)
		rest := p
		for len(rest) > 0 {
			if s.atStart {
				s.st.LineStarts[rest[0]]++
				s.atStart = false
			}
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			rest = rest[i+1:]
			s.atStart = true
		}
	}
	return len(p), nil
}

func (s *sink) stats() outStats {
	st := s.st
	head := s.head
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	st.Head = string(head)
	if s.check {
		b := s.h.Sum128().Bytes()
		st.Hash = fmt.Sprintf("%x", b)
	}
	return st
}

// tail keeps the last bytes written to it: a failing tool's last words.
type tail struct{ b []byte }

const tailMax = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

// errExit is a run that ended with an exit status the row did not expect.
type errExit struct {
	status int
	stderr string
}

func (e *errExit) Error() string {
	msg := fmt.Sprintf("exit status %d", e.status)
	if e.status < 0 {
		msg = "killed by a signal"
	}
	if s := bytes.TrimSpace([]byte(e.stderr)); len(s) > 0 {
		if i := bytes.LastIndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		msg += ": " + string(s)
	}
	return msg
}

// meter says how execOnce measures peak RSS. wait4's ru_maxrss is wrong
// for a child of a big process: Go starts children with vfork, and at exec
// the kernel folds the parent's peak RSS (the bench's, tens of MiB) into
// the child's, so `cat` would show 60 MiB. GNU time forks from a process of
// about 1.5 MiB and reports its child's own peak (%M), so with it the
// figure is the tool's; without it the figure is only an upper bound.
type meter struct {
	gnuTime string // path of GNU time, or "" to use wait4's figure
	rssFile string // where GNU time writes %M
}

// execOnce runs c once and measures it. The process gets its own process
// group, killed whole if ctx ends (a pipeline's children too).
func execOnce(ctx context.Context, m meter, c command, check bool, wantExit int) (Sample, outStats, error) {
	argv := c.argv
	if m.gnuTime != "" {
		os.Remove(m.rssFile)
		argv = append([]string{m.gnuTime, "-f", "%M", "-o", m.rssFile}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), c.env...)
	if c.stdin != "" {
		f, err := os.Open(c.stdin)
		if err != nil {
			return Sample{}, outStats{}, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	out := newSink(check)
	var errs tail
	cmd.Stdout = out
	cmd.Stderr = &errs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Sample{}, outStats{}, err
	}
	err := cmd.Wait()
	wall := time.Since(start)
	if ctx.Err() != nil {
		return Sample{}, outStats{}, context.Cause(ctx)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return Sample{}, outStats{}, err
	}
	ps := cmd.ProcessState
	s := Sample{WallS: wall.Seconds(), Exit: ps.ExitCode()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		s.UserS = tvSeconds(ru.Utime)
		s.SysS = tvSeconds(ru.Stime)
		s.MaxRSS = int64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	if m.gnuTime != "" {
		s.MaxRSS = gnuTimeRSS(m.rssFile)
	}
	st := out.stats()
	s.OutBytes, s.OutLines = st.Bytes, st.Lines
	if s.Exit != wantExit {
		return s, st, &errExit{status: s.Exit, stderr: string(errs.b)}
	}
	return s, st, nil
}

// gnuTimeRSS reads GNU time's %M (KiB), the last line of its output file
// (after a "Command exited with non-zero status" line if any); -1 if none.
func gnuTimeRSS(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	lines := bytes.Fields(b)
	if len(lines) == 0 {
		return -1
	}
	kb, err := strconv.ParseInt(string(lines[len(lines)-1]), 10, 64)
	if err != nil {
		return -1
	}
	return kb * 1024
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// Summary is the medians of a row's timed runs, each figure's own median,
// with the spread of the wall time.
type Summary struct {
	WallS    float64 `json:"wall_s"`
	WallMinS float64 `json:"wall_min_s"`
	WallMaxS float64 `json:"wall_max_s"`
	CPUS     float64 `json:"cpu_s"`
	UserS    float64 `json:"user_s"`
	SysS     float64 `json:"sys_s"`
	MaxRSS   int64   `json:"max_rss_bytes"`
}

func summarize(runs []Sample) *Summary {
	if len(runs) == 0 {
		return nil
	}
	pick := func(f func(Sample) float64) []float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v
	}
	wall := pick(func(s Sample) float64 { return s.WallS })
	return &Summary{
		WallS:    median(wall),
		WallMinS: wall[0],
		WallMaxS: wall[len(wall)-1],
		CPUS:     median(pick(func(s Sample) float64 { return s.UserS + s.SysS })),
		UserS:    median(pick(func(s Sample) float64 { return s.UserS })),
		SysS:     median(pick(func(s Sample) float64 { return s.SysS })),
		MaxRSS:   int64(median(pick(func(s Sample) float64 { return float64(s.MaxRSS) }))),
	}
}

// median of sorted values: the middle one, or the mean of the middle two.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
