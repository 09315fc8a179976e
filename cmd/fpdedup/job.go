package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/memplan"
)

// A job is one command's run. The command declares what it reads, what it
// writes (each output with its flag), how its records are read, its shares
// of --mem (a memplan.Plan) and its work; run does the rest, in the same order
// for every command (README "Exit codes, outputs and signals"):
//
//  1. every path is resolved and checked against every input and every
//     other output, and --tmpdir is checked writable, before any work;
//  2. the streamed outputs are opened: stdout, or a file beside its target;
//  3. the Go heap's limit is set from the plan, progress shown, the work
//     run;
//  4. unless a signal came, every output is flushed and finished, the
//     quarantine closed, and all of them are published with --stats-json
//     and --metrics (the plan among the figures) at the one commit point; a negative answer (exit 1)
//     was computed in full and is published like a success;
//  5. what the run learned for later runs (a disk's measured read rates,
//     devices.go) is cached, a warning if it cannot be;
//  6. the summary is printed.
//
// Outputs that a library writes (an index, a backfill) join j.grp, so they
// are published at the same point. Nothing a job starts outlives run.
type job struct {
	inv     *invocation
	cmd     *cobra.Command
	paths   ioPaths
	grp     *atomicfile.Group
	streams []*stream
	bad     []*ingest.BadPolicy
	prog    *ingest.Progress
	plan    *memplan.Plan
	// final: once the work has returned, it is done (keys written
	// online): a signal after it no longer undoes anything.
	final bool
	// answers: once the streams are flushed the work is done (query's
	// answers are out); a signal before that stops the run.
	answers bool
	lines   []string
	part    *partition // --partition, when the command keeps a range
	// fewLookups: the job looks up fewer keys than a batch that asks
	// the device's rates (lookupsAtMost).
	fewLookups bool
}

// lookupsAtMost says the job looks up at most n keys in its indexes: below
// a batch that prices its reads with the device's rates (query's KEY
// arguments), no device cache is declared or checked for them.
func (j *job) lookupsAtMost(n int) { j.fewLookups = n < fpstore.MinPricedBatch }

// stream is an output the job opens and the work writes as it goes:
// stdout for "" and "-", else a file published at the commit point.
type stream struct {
	flag, path string
	w          *bufio.Writer
	file       *atomicfile.File
}

// writer is the stream's writer for a library that writes records: a
// file's also lets a Parquet output be read back as written before it is
// published (ingest.ReadBacker).
func (s *stream) writer() io.Writer {
	if s.file != nil {
		return ingest.ReadBackWriter{Writer: s.w, Output: s.file}
	}
	return s.w
}

// job starts declaring the run of cmd. Every command that does work goes
// through one (adopt checks it).
func (inv *invocation) job(cmd *cobra.Command) *job {
	inv.jobs++
	return &job{inv: inv, cmd: cmd, grp: &atomicfile.Group{}}
}

// input declares files the job reads ("" and "-" are not files).
func (j *job) input(flag string, kind pathKind, paths ...string) {
	j.paths.input(flag, kind, paths...)
}

// output declares a file a library writes into j.grp; inPlace names the
// inputs it may replace.
func (j *job) output(flag, path string, inPlace ...pathKind) {
	j.paths.output(flag, path, inPlace...)
}

// stream declares an output the work writes as it goes; its writer is
// ready when the work runs.
func (j *job) stream(flag, path string, inPlace ...pathKind) *stream {
	j.paths.stream(flag, path, inPlace...)
	s := &stream{flag: flag, path: path}
	j.streams = append(j.streams, s)
	return s
}

// records registers how records are read: a quarantine is an output,
// closed with the others.
func (j *job) records(p *ingest.BadPolicy) {
	if p != nil {
		j.output("--on-bad quarantine", p.Quarantine())
		j.bad = append(j.bad, p)
	}
}

// progress shows p while the work runs (with --progress).
func (j *job) progress(p *ingest.Progress) { j.prog = p }

// memory declares the job's shares of --mem: the Go heap's soft limit is
// set from it while the work runs (without one, the heap may have all of
// --mem), and it is among the run's figures.
func (j *job) memory(p memplan.Plan) { j.plan = &p }

// summary queues a line for stderr, printed after the commit point unless -q.
func (j *job) summary(format string, a ...any) {
	j.lines = append(j.lines, fmt.Sprintf(format, a...))
}

// run checks, opens, works, commits and reports, as the job type says.
// work returns the run's figures for --stats-json and --metrics, and nil,
// a negativeAnswer or an error.
func (j *job) run(work func(ctx context.Context) (map[string]any, error)) error {
	ctx := j.cmd.Context()
	defer j.abort()
	if f := j.cmd.Flags().Lookup("tmpdir"); f != nil {
		if err := checkTmpDir(f.Value.String()); err != nil {
			return err
		}
	}
	j.paths.output("--stats-json", j.inv.statsJSON)
	j.paths.output("--metrics", j.inv.metrics)
	if j.paths.reads(kindIndex) && !j.fewLookups {
		// A cold lookup batch prices its reads with the device's rates,
		// which the job may measure and cache (devices.go).
		j.inv.devices.declare(j)
	}
	if err := j.paths.check(j.inv); err != nil {
		return err
	}
	if err := j.open(ctx); err != nil {
		return err
	}
	if j.plan != nil {
		debug.SetMemoryLimit(j.plan.HeapLimit())
	}
	hook("work")
	stop := func() {}
	if j.prog != nil {
		stop = j.inv.showProgress(j.cmd.Name(), j.prog)
	}
	start := time.Now()
	figures, err := work(ctx)
	stop()
	var neg negativeAnswer
	if err != nil && !errors.As(err, &neg) {
		return err
	}
	if j.final {
		ctx = context.WithoutCancel(ctx)
	} else if cause := context.Cause(ctx); cause != nil {
		return cause // a signal the work did not see: nothing is published
	}
	if ferr := j.finish(); ferr != nil {
		return ferr
	}
	if j.answers {
		ctx = context.WithoutCancel(ctx)
	}
	if figures == nil {
		figures = map[string]any{}
	}
	figures["command"] = j.cmd.Name()
	if j.plan != nil {
		figures["memory"] = map[string]any{"plan": j.plan}
	}
	if j.part != nil {
		figures["partition"] = j.part
	}
	if _, ok := figures["seconds"]; !ok {
		figures["seconds"] = time.Since(start).Seconds()
	}
	if cerr := j.commit(ctx, figures); cerr != nil {
		return cerr
	}
	j.inv.devices.save(j)
	for _, l := range j.lines {
		j.inv.summary("%s", l)
	}
	return err
}

// open opens the streamed outputs. A writer stops at its next write once a
// signal came, for work that does not watch for one.
func (j *job) open(ctx context.Context) error {
	for _, s := range j.streams {
		var w io.Writer = j.inv.stdout
		if s.path != "" && s.path != "-" {
			f, err := atomicfile.Create(s.path)
			if err != nil {
				return err
			}
			s.file, w = f, f
		}
		s.w = bufio.NewWriterSize(stopWriter{ctx, w}, 1<<20)
	}
	return nil
}

// finish flushes the streams and hands every output to the group.
func (j *job) finish() error {
	for _, s := range j.streams {
		if err := s.w.Flush(); err != nil {
			return err
		}
		if s.file != nil {
			if err := j.grp.Finish(s.file); err != nil {
				return err
			}
		}
	}
	for _, p := range j.bad {
		if err := p.Close(j.grp, true); err != nil {
			return err
		}
	}
	return nil
}

// abort removes whatever was not published.
func (j *job) abort() {
	for _, s := range j.streams {
		if s.file != nil {
			s.file.Abort()
		}
	}
	for _, p := range j.bad {
		_ = p.Close(j.grp, false)
	}
	j.grp.Abort()
}

// commit is the command's commit point. The run's figures join the group
// (written and fsynced first, so that a --stats-json that cannot be written
// fails the run before anything is published); then, unless a signal came,
// every output is published. A directory that cannot be fsynced after the
// rename is a warning: the file is published, and the exit code says so.
func (j *job) commit(ctx context.Context, stats map[string]any) error {
	if err := j.inv.finishStats(j.grp, stats); err != nil {
		return err
	}
	hook("commit:before")
	err := j.grp.Commit(ctx)
	hook("commit:after")
	if err != nil && errors.Is(err, atomicfile.ErrNotDurable) {
		var pe *atomicfile.PublishError
		if !errors.As(err, &pe) {
			fmt.Fprintln(j.inv.stderr, "fpdedup: warning:", err)
			return nil
		}
	}
	return err
}

// finishStats writes --stats-json and --metrics into the group.
func (inv *invocation) finishStats(grp *atomicfile.Group, v map[string]any) error {
	if inv.statsJSON == "" && inv.metrics == "" {
		return nil
	}
	if inv.rss != nil {
		anon, file := inv.rss.Peaks()
		m, _ := v["memory"].(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		m["peak_rss_anon_bytes"], m["peak_rss_file_bytes"] = anon, file
		// The plan's shares at their peak: the Go heap's (the runtime's
		// memory), and those off it together (huge-page tables, blooms,
		// sort arenas, a bloom audit's passes; mapped, a bound on what
		// was touched).
		m["peak"] = map[string]int64{"heap_bytes": inv.rss.HeapPeak(), "off_heap_bytes": hugemem.Peak()}
		v["memory"] = m
		inv.rss = nil
	}
	m, err := asMap(v)
	if err != nil {
		return err
	}
	if inv.statsJSON != "" {
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(grp, inv.statsJSON, append(b, '\n')); err != nil {
			return fmt.Errorf("cannot write --stats-json: %w", err)
		}
	}
	command, _ := m["command"].(string)
	return inv.writeMetrics(grp, command, m)
}

// testHook, when set (by the test binary only), is called at named stages
// of a run: "signal" once a signal has cancelled the run, "work" before a
// command's main work, "commit:before" and "commit:after" around the commit
// point. Tests use it to deliver a signal at an exact point.
var testHook func(stage string)

func hook(stage string) {
	if testHook != nil {
		testHook(stage)
	}
}

// interruptible runs work, which does not watch ctx (verify, inspect: they
// write nothing and hold no temp file), and returns as soon as ctx is done.
func interruptible(ctx context.Context, work func() error) error {
	done := make(chan error, 1)
	go func() { done <- work() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return context.Cause(ctx)
		}
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
