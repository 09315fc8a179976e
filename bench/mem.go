package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Memory is the mem job: what --mem bounds, measured. Each command runs
// once under each --mem of the sweep, on the run's events, and its peak
// anonymous resident memory (heap, tables, buffers: what --mem bounds, not
// the page cache of mapped indexes) is compared with the --mem it was
// given. The README's --mem sentence quotes the largest excess.
type Memory struct {
	Records        int64       `json:"records"`
	SampleEveryMs  float64     `json:"sample_every_ms"`
	Rows           []MemoryRow `json:"rows"`
	WorstOverBytes int64       `json:"worst_over_bytes"` // the largest OverBytes of the rows that ran
}

// MemoryRow is one command under one --mem.
type MemoryRow struct {
	Command       string  `json:"command"` // dedup, dedup --record, build, merge, query
	Mem           string  `json:"mem"`
	MemBytes      int64   `json:"mem_bytes"`
	Status        string  `json:"status"` // ok or failed
	Why           string  `json:"why,omitempty"`
	WallS         float64 `json:"wall_s"`
	PeakAnonBytes int64   `json:"peak_anon_bytes"` // RssAnon of its processes, summed, sampled
	OverBytes     int64   `json:"over_bytes"`      // PeakAnonBytes - MemBytes: negative is under
}

// memSampleEvery is how often the mem job samples: often enough to catch
// a table's growth, which takes milliseconds.
const memSampleEvery = time.Millisecond

// memSweep runs the mem job: dedup in memory below its table budget and
// bounded beyond it, dedup --record, build, the merge of the halves'
// indexes and a query of the events against their index.
func (b *runner) memSweep(ctx context.Context) (*Memory, error) {
	lines, index := b.path("events.txt"), b.path("index.fpx")
	halfA, halfB := b.path("half-a.fpx"), b.path("half-b.fpx")
	if _, err := os.Stat(index); err != nil {
		b.progress(Step{Phase: "prepare", Job: "mem", Msg: "mem: building the index of the events"})
		if _, err := b.tool(ctx, nil, nil, "--progress", "never", "-q", "build", "-o", index, lines); err != nil {
			return nil, fmt.Errorf("bench: mem: %w", err)
		}
	}
	if err := b.buildHalves(ctx, "mem", lines, halfA, halfB); err != nil {
		return nil, fmt.Errorf("bench: mem: %w", err)
	}
	bombZst, bombGz := b.path("bomb.zst"), b.path("bomb.gz")
	if err := writeBombs(bombZst, bombGz); err != nil {
		return nil, fmt.Errorf("bench: mem: %w", err)
	}
	out, rec := b.path("mem-out.txt"), b.path("mem-record.fpx")
	m := &Memory{Records: b.rep.Data.Records, SampleEveryMs: float64(memSampleEvery) / 1e6, Rows: []MemoryRow{}}
	first := true
	for _, mem := range b.o.MemSweep {
		memBytes, _ := parseMiB(mem)
		for _, c := range []struct {
			name  string
			args  []string
			stdin string
			bomb  bool // refused as a record too long: the figure is its peak until then
		}{
			{"dedup", []string{"dedup", "--tmpdir", b.work, "-o", out, lines}, "", false},
			{"dedup --record", []string{"dedup", "--tmpdir", b.work, "--record", rec, "-o", out, lines}, "", false},
			{"build", []string{"build", "--tmpdir", b.work, "-o", b.path("mem.fpx"), lines}, "", false},
			{"merge", []string{"merge", "-o", b.path("mem-merged.fpx"), halfA, halfB}, "", false},
			{"query", []string{"query", "--count", index}, lines, false},
			{"dedup of a zstd bomb (refused: too long)", []string{"dedup", "--tmpdir", b.work, bombZst}, "", true},
			{"dedup of a gzip bomb (refused: too long)", []string{"dedup", "--tmpdir", b.work, bombGz}, "", true},
		} {
			b.progress(Step{Phase: "prepare", Job: "mem", Msg: fmt.Sprintf("mem: %s --mem %s", c.name, mem)})
			argv := append([]string{b.exe, "--progress", "never", "-q", "--mem", mem}, c.args...)
			row := MemoryRow{Command: c.name, Mem: mem, MemBytes: memBytes, Status: "ok"}
			start := time.Now()
			peak, err := runOnceSampled(ctx, argv, c.stdin)
			row.WallS = time.Since(start).Seconds()
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			row.PeakAnonBytes, row.OverBytes = peak, peak-memBytes
			var ee *errExit
			switch {
			case c.bomb && errors.As(err, &ee) && ee.status == 2 && strings.Contains(ee.stderr, "record too long"):
				err = nil // refused, as it should be
			case c.bomb && err == nil:
				err = errors.New("a bomb was not refused")
			}
			if err != nil {
				row.Status, row.Why = "failed", err.Error()
			} else if first || row.OverBytes > m.WorstOverBytes {
				m.WorstOverBytes, first = row.OverBytes, false
			}
			m.Rows = append(m.Rows, row)
		}
	}
	for _, f := range []string{out, rec, b.path("mem.fpx"), b.path("mem-merged.fpx"), bombZst, bombGz} {
		os.Remove(f)
	}
	return m, nil
}

// runOnceSampled runs argv (stdin from a file, or /dev/null; stdout
// discarded) under RunSampled, its process group killed if ctx ends.
func runOnceSampled(ctx context.Context, argv []string, stdin string) (int64, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var errs tail
	cmd.Stderr = &errs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	peak, err := RunSampled(cmd, memSampleEvery, nil)
	if err != nil && cmd.ProcessState != nil {
		return peak, &errExit{status: cmd.ProcessState.ExitCode(), stderr: string(errs.b)}
	}
	return peak, err
}

// writeBombs writes decompression bombs: 1 GiB of zeros without a line
// end, one record far beyond any --max-record, as zstd and gzip.
func writeBombs(zst, gz string) error {
	zeros := make([]byte, 1<<20)
	for path, newWriter := range map[string]func(io.Writer) (io.WriteCloser, error){
		zst: func(w io.Writer) (io.WriteCloser, error) {
			return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
		},
		gz: func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, gzip.BestSpeed) },
	} {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		zw, err := newWriter(f)
		for i := 0; err == nil && i < 1024; i++ {
			_, err = zw.Write(zeros)
		}
		if err == nil {
			err = zw.Close()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
