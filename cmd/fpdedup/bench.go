package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fpdedup/fpdedup/bench"
	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// benchOptions are the flags of `fpdedup bench`.
type benchOptions struct {
	records, out, compare, volume, ioBandwidth, boundedMem string
	exe, peers, peersDir                                   string
	runs                                                   int
	seed                                                   uint64
	quick, keep                                            bool
}

func newBenchCommand(g *globals) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench [--records 10M] [--peers auto|none] [--runs 3] [--out DIR]",
		Short: "Measure fpdedup beside its peers on generated data; report, charts, capacity",
		Long: `Bench generates events (bench gen) into a temporary directory and measures
whole processes of this fpdedup binary and of the peers that are installed:
build, query (all present, all absent), dedup (lines, bounded memory, CSV
keys, zstd input) and merge, against LC_ALL=C sort -u, mawk/gawk '!s[$0]++',
DuckDB (node and @duckdb/node-api), the bloom CLI, and cat/zstd -dc/dd as
floors. Each row runs once untimed (its output is checked against the
generator's exact distinct count), then --runs times, interleaved with the
other rows; the report gives medians of wall time, CPU (user+sys) and peak
RSS, and ratios to fpdedup. In process it times single index lookups (p50 to
p99.9, warm and after dropping the file from the page cache) and reads the
index's bytes per key and its filters' false-positive rates against theory.

A peer that is not installed is reported as missing; bench/peers.sh installs
them on Debian (run it as root), DuckDB into bench/.peers (--peers-dir).

--out DIR receives report.json (every figure, the machine, schema in
bench/schema.json), report.md, and charts as SVG and PNG. --compare OLD.json
prints what got faster or slower. --volume estimates what a day of that much
input takes here and how many such machines the partitioned mode needs.
--quick is a one-minute version (1M records, one run): indicative only.

Exit codes: 0 done; 1 done, but a row failed or gave a wrong answer (see the
report); 2 bad usage or the benchmark could not run; 130/143 interrupted.`,
		Example: `  fpdedup bench --out bench/results/$(date -u +%F)
  fpdedup bench --quick --peers none
  fpdedup bench --records 100M --runs 5 --compare bench/results/2025-12-02/report.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.records, "records", "", "records to generate (k, M, G suffixes; default 10M, 1M with --quick)")
	f.StringVar(&o.peers, "peers", "auto", "auto (every installed peer) or none (fpdedup only)")
	f.IntVar(&o.runs, "runs", 0, "timed runs per row (default 3, 1 with --quick)")
	f.StringVar(&o.out, "out", "", "directory for report.json, report.md and the charts (default bench-<UTC time>)")
	f.BoolVar(&o.quick, "quick", false, "a one-minute version: 1M records, one run, no warm-up run")
	f.StringVar(&o.compare, "compare", "", "an earlier report.json: print what got faster or slower")
	f.StringVar(&o.volume, "volume", "50TB", "daily volume for the capacity estimate (plain bytes: TB, GB, TiB…)")
	f.StringVar(&o.ioBandwidth, "io-bandwidth", "600MB", "read bandwidth per machine assumed by the capacity estimate, per second")
	f.StringVar(&o.boundedMem, "bounded-mem", "16MiB", "--mem of the bounded-memory dedup job")
	f.Uint64Var(&o.seed, "seed", 1, "generator seed")
	f.StringVar(&o.exe, "fpdedup", "", "the fpdedup binary to measure (default: this one)")
	f.StringVar(&o.peersDir, "peers-dir", "", "where bench/peers.sh installed @duckdb/node-api (default: bench/.peers above the current directory)")
	f.BoolVar(&o.keep, "keep", false, "keep the temporary data directory")
	cmd.AddCommand(newBenchGenCommand(g))
	return cmd
}

func runBench(ctx context.Context, g *globals, o benchOptions) error {
	opts := bench.Options{Peers: o.peers, Runs: o.runs, Quick: o.quick, Seed: o.seed, Keep: o.keep, PeersDir: o.peersDir}
	if o.peers != "auto" && o.peers != "none" {
		return usageErrorf("--peers must be auto or none, not %q", o.peers)
	}
	if o.runs < 0 {
		return usageErrorf("--runs must be at least 1")
	}
	if o.records != "" {
		n, err := parseCount(o.records)
		if err != nil {
			return usageErrorf("--records: %v", err)
		}
		if n < 2 {
			return usageErrorf("--records must be at least 2")
		}
		opts.Records = n
	}
	var err error
	if opts.VolumeBytes, err = parseSize(o.volume); err != nil || opts.VolumeBytes <= 0 {
		return usageErrorf("--volume: invalid size %q", o.volume)
	}
	if opts.IOBytesPerSec, err = parseSize(strings.TrimSuffix(o.ioBandwidth, "/s")); err != nil || opts.IOBytesPerSec <= 0 {
		return usageErrorf("--io-bandwidth: invalid size %q", o.ioBandwidth)
	}
	if m, err := parseSize(o.boundedMem); err != nil || m < 16<<20 {
		return usageErrorf("--bounded-mem: want a size of at least 16MiB, not %q", o.boundedMem)
	}
	opts.BoundedMem = o.boundedMem
	if o.compare != "" {
		if opts.Compare, err = bench.ReadReport(o.compare); err != nil {
			return usageErrorf("--compare: %v", err)
		}
	}
	opts.Exe = o.exe
	if opts.Exe == "" {
		if opts.Exe, err = os.Executable(); err != nil {
			return fmt.Errorf("cannot find this binary to measure it (use --fpdedup PATH): %w", err)
		}
	}
	cwd, _ := os.Getwd()
	if opts.PeersDir == "" {
		opts.PeersDir = bench.FindPeersDir(cwd)
	}
	opts.Commit = gitCommit(ctx, cwd)
	out := o.out
	if out == "" {
		out = "bench-" + time.Now().UTC().Format("20060102T150405Z")
	}
	// The output directory is checked before minutes of work.
	if err := os.MkdirAll(out, 0o755); err != nil {
		return usageErrorf("--out %s: %v", out, err)
	}

	p := newBenchProgress(g)
	opts.Progress = p.step
	rep, err := bench.Run(ctx, opts)
	p.clear()
	if err != nil {
		return err
	}
	if err := rep.Write(out); err != nil {
		return fmt.Errorf("cannot write the report: %w", err)
	}
	for _, l := range rep.SummaryLines() {
		g.summary("%s", l)
	}
	g.summary("  report: %s", filepath.Join(out, "report.md"))
	if rep.Compare != nil {
		if err := rep.Compare.WriteText(g.stdout); err != nil {
			return err
		}
	}
	if err := g.commit(context.WithoutCancel(ctx), &atomicfile.Group{}, map[string]any{"command": "bench", "out": out, "seconds": rep.Seconds, "records": rep.Data.Records, "problems": rep.Problems()}); err != nil {
		return err
	}
	if n := rep.Problems(); n > 0 {
		return negativeAnswer{fmt.Sprintf("bench: %d row(s) failed or gave a wrong answer; see %s", n, filepath.Join(out, "report.md"))}
	}
	return nil
}

// gitCommit names the commit of the source tree the bench runs in, if any,
// with "+dirty" when tracked files differ: the report's provenance.
func gitCommit(ctx context.Context, dir string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(c))
	if err := exec.CommandContext(ctx, "git", "-C", dir, "diff", "--quiet", "HEAD").Run(); err != nil {
		s += "+dirty"
	}
	return s
}

// benchProgress shows which job, which tool, run k of n: one line redrawn
// in place on a terminal, a line per finished run otherwise (--progress
// never: nothing).
type benchProgress struct {
	g        *globals
	terminal bool
	off      bool
	drawn    bool
}

func newBenchProgress(g *globals) *benchProgress {
	p := &benchProgress{g: g, off: g.progress == "never"}
	if f, ok := g.stderr.(*os.File); ok {
		p.terminal = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *benchProgress) step(s bench.Step) {
	if p.off {
		return
	}
	where := fmt.Sprintf("bench [%d/%d %s]", s.JobIndex, s.Jobs, s.Job)
	if s.Job == "" {
		where = "bench"
	}
	run := fmt.Sprintf("run %d/%d", s.Run, s.Runs)
	if s.Run == 0 {
		run = "warm-up run"
	}
	var line string
	switch s.Phase {
	case "prepare", "lookup":
		line = where + " " + s.Msg
	case "run":
		if !p.terminal {
			return
		}
		line = fmt.Sprintf("%s %s: %s…", where, s.Tool, run)
	case "done":
		line = fmt.Sprintf("%s %s: %s %.2f s", where, s.Tool, run, s.WallS)
	default:
		return
	}
	if p.terminal {
		fmt.Fprintf(p.g.stderr, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.g.stderr, line)
}

func (p *benchProgress) clear() {
	if p.drawn {
		fmt.Fprint(p.g.stderr, "\r\033[K")
	}
}

// stopWriter fails its writes once ctx is done, so that a writer that does
// not watch for signals stops at its next write.
type stopWriter struct {
	ctx context.Context
	w   io.Writer
}

func (s stopWriter) Write(p []byte) (int, error) {
	if err := context.Cause(s.ctx); err != nil {
		return 0, err
	}
	return s.w.Write(p)
}

func newBenchGenCommand(g *globals) *cobra.Command {
	var records, format, output string
	var repeat, far float64
	var seed uint64
	cmd := &cobra.Command{
		Use:   "gen [-o FILE]",
		Short: "Write deterministic synthetic events (exact distinct count known)",
		Long: `Gen writes login/payment-like events, user_id,device_id,timestamp_ms,event_type,amount,
as lines, CSV (with a header) or JSONL. A --repeat fraction of records repeat an
earlier one, some recently and some far back; the same seed gives the same bytes.
The summary on stderr gives the exact number of distinct records.`,
		Example: `  fpdedup bench gen --records 10M -o events.csv
  fpdedup bench gen --records 1M --format jsonl | zstd > events.jsonl.zst`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseCount(records)
			if err != nil {
				return usageErrorf("--records: %v", err)
			}
			files := &ioPaths{}
			files.output("-o", output)
			if err := g.checkPaths(files); err != nil {
				return err
			}
			grp := &atomicfile.Group{}
			defer grp.Abort()
			var w io.Writer = g.stdout
			var f *atomicfile.File
			if output != "" && output != "-" {
				if f, err = atomicfile.Create(output); err != nil {
					return err
				}
				defer f.Abort()
				w = f
			}
			// gen.Options reads 0 as "the default" and a negative value as
			// "none"; on the command line 0 means none.
			if repeat == 0 {
				repeat = -1
			}
			if far == 0 {
				far = -1
			}
			hook("work")
			bw := bufio.NewWriterSize(stopWriter{cmd.Context(), w}, 1<<20)
			st, err := gen.Generate(bw, gen.Options{Records: n, Repeat: repeat, Seed: seed, Format: format, Far: far})
			if err == nil {
				err = bw.Flush()
			}
			if err == nil && f != nil {
				err = grp.Finish(f)
			}
			if err == nil {
				err = g.commit(cmd.Context(), grp, map[string]any{"command": "bench gen", "records": st.Records, "distinct": st.Distinct, "bytes": st.Bytes})
			}
			if err != nil {
				return err
			}
			g.summary("gen: %d records, %d distinct, %s", st.Records, st.Distinct, formatBytes(st.Bytes))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&records, "records", "1M", "number of records (k, M, G suffixes)")
	f.StringVar(&format, "format", "lines", "lines, csv or jsonl")
	f.StringVarP(&output, "output", "o", "", "write to FILE (default stdout)")
	f.Float64Var(&repeat, "repeat", 0.38, "fraction of records that repeat an earlier one")
	f.Float64Var(&far, "far", 0.5, "fraction of repeats copied from far back")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
