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

	"github.com/fpdedup/fpdedup/internal/memplan"
)

// Memory is the mem job: what --mem bounds, measured. Each command that
// reads data runs once under each --mem of the sweep, on the run's events,
// and its peak anonymous resident memory (heap, tables, buffers: what --mem
// bounds, not the page cache of mapped indexes) is compared with --mem and
// with the bound the README and --help state (memplan.Bound, and a Parquet
// input's row groups beside it). The README's --mem sentence quotes the
// largest excess.
type Memory struct {
	Records       int64       `json:"records"`
	SampleEveryMs float64     `json:"sample_every_ms"`
	Rows          []MemoryRow `json:"rows"`
	// WorstOverBytes is the largest OverBytes of the rows that ran,
	// WorstOverBoundBytes the largest OverBoundBytes (above 0: a command
	// went past its stated bound).
	WorstOverBytes      int64 `json:"worst_over_bytes"`
	WorstOverBoundBytes int64 `json:"worst_over_bound_bytes"`
	// Online says whether reconcile ran against servers
	// ($FPDEDUP_REDIS_ADDR), and if not why.
	Online string `json:"online"`
}

// MemoryRow is one command under one --mem.
type MemoryRow struct {
	Command  string `json:"command"` // dedup, dedup --record, build, merge, query, reconcile …
	Mem      string `json:"mem"`
	MemBytes int64  `json:"mem_bytes"`
	// Status: ok, failed, or refused: the command declined this --mem
	// before its work, as it should (exit 2 saying the --mem it needs).
	Status string  `json:"status"`
	Why    string  `json:"why,omitempty"`
	WallS  float64 `json:"wall_s"`
	// PeakAnonBytes is the larger of two sampled peaks of RssAnon: the
	// bench's, every millisecond over the process and its children, and
	// the command's own (--stats-json memory.peak_rss_anon_bytes).
	PeakAnonBytes int64 `json:"peak_anon_bytes"`
	OverBytes     int64 `json:"over_bytes"` // PeakAnonBytes - MemBytes: negative is under
	// RowGroupsBytes is the plan's row_groups_bytes: a Parquet input's,
	// which the bound counts beside --mem.
	RowGroupsBytes int64 `json:"row_groups_bytes"`
	BoundBytes     int64 `json:"bound_bytes"`      // memplan.Bound(MemBytes) + RowGroupsBytes
	OverBoundBytes int64 `json:"over_bound_bytes"` // PeakAnonBytes - BoundBytes: negative is within
	Within         bool  `json:"within"`
}

// memSampleEvery is how often the mem job samples: often enough to catch
// a table's growth, which takes milliseconds.
const memSampleEvery = time.Millisecond

// memCase is a command the mem job runs under each --mem.
type memCase struct {
	name  string
	args  []string
	stdin string
	// mustRefuse: the command must stop with exit 2 and this in its
	// message (a bomb: a record too long); the figure is its peak until
	// then.
	mustRefuse string
	// mayRefuse: exit 2 with this in the message is the command declining
	// a --mem too small for what it was asked (the row says refused).
	mayRefuse string
	exit1OK   bool         // exit 1 is a result (reconcile: the sides differ)
	after     func() error // puts the online side back as it was before the run
}

// memSweep runs the mem job: every command that reads data (dedup in
// memory below its table budget and bounded beyond it, --record, --keep
// last, count, build, merge, query, replay, the Parquet dedup and count),
// reconcile against an export file and, with servers, against Redis keys
// (audit and --apply), a bitmap bloom (audit and --rebuild-shard) and
// RedisBloom filters, and decompression bombs.
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
	truth, online, err := b.memTruth(ctx, lines)
	if err != nil {
		return nil, fmt.Errorf("bench: mem: %w", err)
	}
	out, rec := b.path("mem-out.txt"), b.path("mem-record.fpx")
	pqOut, csv, pq := b.path("mem-out.parquet"), b.path("events.csv"), b.path("events.parquet")
	cases := []memCase{
		{name: "dedup", args: []string{"dedup", "--tmpdir", b.work, "-o", out, lines}},
		{name: "dedup --record", args: []string{"dedup", "--tmpdir", b.work, "--record", rec, "-o", out, lines}},
		{name: "dedup --keep last", args: []string{"dedup", "--tmpdir", b.work, "--keep", "last", "-o", out, lines}},
		{name: "count", args: []string{"count", "--tmpdir", b.work, "-o", out, lines}},
		{name: "build", args: []string{"build", "--tmpdir", b.work, "-o", b.path("mem.fpx"), lines}},
		{name: "merge", args: []string{"merge", "-o", b.path("mem-merged.fpx"), halfA, halfB}},
		{name: "query", args: []string{"query", "--count", index}, stdin: lines},
		{name: "replay", args: []string{"replay", "--tmpdir", b.work, "--format", "csv", "--header", "--key", parquetKey, "--time-field", "timestamp_ms", "--order", "arrival",
			"--l1", "64k,ttl=1s", "--l2", "shards=4,bits=2^20,k=3", csv}, mayRefuse: "must hold them and"},
		// A row group more than four times --max-record holds is refused
		// before any work (README "--mem").
		{name: "dedup (Parquet)", args: []string{"dedup", "--tmpdir", b.work, "--key", parquetKey, "-o", pqOut, pq}, mayRefuse: "more than the memory allowed"},
		{name: "count (Parquet)", args: []string{"count", "--tmpdir", b.work, "--key", parquetKey, "-o", out, pq}, mayRefuse: "more than the memory allowed"},
		{name: "reconcile (export file)", args: []string{"reconcile", "--tmpdir", b.work, "--index", truth, "--online", "file:" + online}, exit1OK: true},
		{name: "dedup of a zstd bomb (refused: too long)", args: []string{"dedup", "--tmpdir", b.work, bombZst}, mustRefuse: "record too long"},
		{name: "dedup of a gzip bomb (refused: too long)", args: []string{"dedup", "--tmpdir", b.work, bombGz}, mustRefuse: "record too long"},
	}
	m := &Memory{Records: b.rep.Data.Records, SampleEveryMs: float64(memSampleEvery) / 1e6, Rows: []MemoryRow{}}
	servers, closeServers, why, err := b.memOnline(ctx, lines, truth, online)
	if err != nil {
		return nil, fmt.Errorf("bench: mem: %w", err)
	}
	defer closeServers()
	cases = append(cases, servers...)
	m.Online = why
	stats := b.path("mem-stats.json")
	first := true
	for _, mem := range b.o.MemSweep {
		memBytes, _ := parseMiB(mem)
		for _, c := range cases {
			b.progress(Step{Phase: "prepare", Job: "mem", Msg: fmt.Sprintf("mem: %s --mem %s", c.name, mem)})
			os.Remove(stats)
			argv := append([]string{b.exe, "--progress", "never", "-q", "--mem", mem, "--stats-json", stats}, c.args...)
			row := MemoryRow{Command: c.name, Mem: mem, MemBytes: memBytes, Status: "ok"}
			start := time.Now()
			peak, err := runOnceSampled(ctx, argv, c.stdin)
			row.WallS = time.Since(start).Seconds()
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			st := readStats(stats)
			if own, ok := num(st, "memory", "peak_rss_anon_bytes"); ok {
				peak = max(peak, int64(own))
			}
			if rg, ok := num(st, "memory", "plan", "row_groups_bytes"); ok {
				row.RowGroupsBytes = int64(rg)
			}
			row.PeakAnonBytes, row.OverBytes = peak, peak-memBytes
			row.BoundBytes = memplan.Bound(memBytes) + row.RowGroupsBytes
			row.OverBoundBytes = peak - row.BoundBytes
			row.Within = row.OverBoundBytes <= 0
			var ee *errExit
			refused := errors.As(err, &ee) && ee.status == 2
			switch {
			case c.mustRefuse != "" && refused && strings.Contains(ee.stderr, c.mustRefuse):
				err = nil // refused, as it should be
			case c.mustRefuse != "" && err == nil:
				err = fmt.Errorf("not refused (%s)", c.mustRefuse)
			case c.mayRefuse != "" && refused && strings.Contains(ee.stderr, c.mayRefuse):
				row.Status, row.Why, err = "refused", firstLineOf(ee.stderr), nil
			case c.exit1OK && errors.As(err, &ee) && ee.status == 1:
				err = nil
			}
			if err == nil && c.after != nil {
				err = c.after()
			}
			if err != nil {
				row.Status, row.Why = "failed", err.Error()
			} else if first || row.OverBytes > m.WorstOverBytes || row.OverBoundBytes > m.WorstOverBoundBytes {
				if first {
					m.WorstOverBytes, m.WorstOverBoundBytes, first = row.OverBytes, row.OverBoundBytes, false
				}
				m.WorstOverBytes = max(m.WorstOverBytes, row.OverBytes)
				m.WorstOverBoundBytes = max(m.WorstOverBoundBytes, row.OverBoundBytes)
			}
			m.Rows = append(m.Rows, row)
		}
	}
	for _, f := range []string{out, rec, pqOut, stats, truth, online, b.path("mem.fpx"), b.path("mem-merged.fpx"), bombZst, bombGz} {
		os.Remove(f)
	}
	return m, nil
}

// firstLineOf is a message's first line, without its "fpdedup: ".
func firstLineOf(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimPrefix(s, "fpdedup: ")
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
