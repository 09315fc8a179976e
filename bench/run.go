package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/bench/gen"
)

// Options say what Run measures. The zero values of the counts mean their
// defaults (Quick's or the full run's).
type Options struct {
	Exe string // the fpdedup binary to measure (required)
	// Bound is a binary whose "bound --distinct N FILE" is dedup's
	// split+hash+table floor (fpdedup-bench itself); "": no such row.
	Bound    string
	Records  int64  // records generated: 0 = 10M, or 1M with Quick
	Seed     uint64 // generator seed
	Runs     int    // timed runs per row: 0 = 3, or 1 with Quick
	Quick    bool   // about a minute: fewer records, one run, no warm-up run, fewer lookups
	Peers    string // "auto" (every installed peer) or "none"
	PeersDir string // where bench/peers.sh put @duckdb/node-api ("": no DuckDB)
	TmpDir   string // parent of the temporary work directory ("": os.TempDir())
	Keep     bool   // keep the work directory (its path is in the notes)
	// Jobs names the jobs to measure (DefaultJobs, ExtraJobs, "all"); nil
	// means DefaultJobs. They run in the order of AllJobs whatever the
	// order here.
	Jobs []string
	// MemSweep is the --mem values of the mem job: nil = DefaultMemSweep.
	MemSweep []string
	// ScaleSizes is the scale job's index sizes in keys: nil =
	// DefaultScaleSizes.
	ScaleSizes []int64
	// ScaleFio is how long each of fio's three measurements runs: 0 = 10 s.
	ScaleFio time.Duration
	// RBKeys, RBShards and RBExtra size the RedisBloom jobs: 0 =
	// DefaultRBKeys, DefaultRBShards, no history.
	RBKeys   int64
	RBShards int
	RBExtra  int64
	// EtcdKeys, EtcdCreate, EtcdPage and EtcdMem size the etcd jobs: 0 or
	// "" = DefaultEtcdKeys, DefaultEtcdCreate, DefaultEtcdPage,
	// DefaultEtcdMem.
	EtcdKeys   int64
	EtcdCreate int64
	EtcdPage   int
	EtcdMem    string
	Notes      []string // added to the report's notes (what else ran, why)

	BoundedMem    string // --mem of the bounded dedup job: "" = 16MiB
	VolumeBytes   int64  // the day's volume for the capacity estimate: 0 = 50 TB
	IOBytesPerSec int64  // assumed read bandwidth per machine: 0 = 600 MB/s
	Commit        string // source commit, for the report
	Compare       *Report

	// Progress, if set, is called as the run goes: which job, which
	// tool, run k of n. It is called from Run's goroutine only.
	Progress func(Step)
}

// OptionError is Options that Run cannot run: a job that does not exist, a
// count out of range. The command words it as a usage error.
type OptionError struct{ Msg string }

func (e *OptionError) Error() string { return "bench: " + e.Msg }

func optionErrorf(format string, a ...any) error {
	return &OptionError{Msg: fmt.Sprintf(format, a...)}
}

// Step is one progress event.
type Step struct {
	Phase    string // prepare, run, done (a run finished), job (a job finished), lookup
	Job      string
	JobIndex int // 1-based
	Jobs     int
	Tool     string
	Run      int // 0 = the untimed warm-up run
	Runs     int
	WallS    float64 // of the run that finished (Phase done)
	Msg      string
}

// Defaults.
const (
	DefaultRecords     = 10_000_000
	QuickRecords       = 1_000_000
	DefaultRuns        = 3
	DefaultBoundedMem  = "16MiB"
	DefaultVolumeBytes = 50e12
	DefaultIOBytes     = 600e6
	// boundedMinRecords is the smallest input on which dedup --mem 16MiB
	// leaves memory mode (a third of --mem for the seen-set: ~350k
	// fingerprints); a smaller run generates a file this big for the
	// bounded job.
	boundedMinRecords = 1_000_000
)

type runner struct {
	o       Options
	exe     string
	work    string
	duckDir string
	peers   map[string]*Peer
	sel     map[string]bool // the jobs to run
	rep     *Report
	mid     int64 // byte offset of the second half of the lines file
	hashes  map[string]string
	stats   map[string]map[string]any // --stats-json of each fpdedup row, by job
	jobIdx  int
	jobsN   int
	rb      *rbState   // the RedisBloom jobs' server and files
	etcd    *etcdState // the etcd jobs' member and files
	stops   []func()   // run when Run returns: servers started
	meter   meter

	boundedPath string
	coldKeys    uint64   // the fingerprints cold scale queries have asked for so far
	memMissing  []string // the mem job: the hex names of the fingerprints its online side lacks
}

// Run generates the data into a temporary directory, runs every job and
// returns the report. Cancelling ctx kills the running process and removes
// the temporary directory.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	if o.Exe == "" {
		return nil, optionErrorf("no fpdedup binary to measure")
	}
	if o.Records == 0 {
		o.Records = DefaultRecords
		if o.Quick {
			o.Records = QuickRecords
		}
	}
	if o.Records < 2 {
		return nil, optionErrorf("%d records: need at least 2 (the merge job splits the data in halves)", o.Records)
	}
	if o.Runs == 0 {
		o.Runs = DefaultRuns
		if o.Quick {
			o.Runs = 1
		}
	}
	if o.Peers == "" {
		o.Peers = "auto"
	}
	if o.Peers != "auto" && o.Peers != "none" {
		return nil, optionErrorf("peers %q: want auto or none", o.Peers)
	}
	if o.BoundedMem == "" {
		o.BoundedMem = DefaultBoundedMem
	}
	if o.RBKeys == 0 {
		o.RBKeys = DefaultRBKeys
	}
	if o.RBShards == 0 {
		o.RBShards = DefaultRBShards
	}
	if o.RBKeys < 100 || o.RBShards < 1 || o.RBShards > 1024 {
		return nil, optionErrorf("RedisBloom jobs of %d keys in %d shards: want 100 keys at least, 1 to 1024 shards", o.RBKeys, o.RBShards)
	}
	if o.EtcdKeys == 0 {
		o.EtcdKeys = DefaultEtcdKeys
	}
	if o.EtcdCreate == 0 {
		o.EtcdCreate = DefaultEtcdCreate
	}
	if o.EtcdPage == 0 {
		o.EtcdPage = DefaultEtcdPage
	}
	if o.EtcdMem == "" {
		o.EtcdMem = DefaultEtcdMem
	}
	if _, ok := parseMiB(o.EtcdMem); !ok {
		return nil, optionErrorf("--mem %q of the etcd jobs: want MiB or GiB, e.g. 256MiB", o.EtcdMem)
	}
	if o.EtcdKeys < 100 || o.EtcdCreate < 100 || o.EtcdPage < 1 {
		return nil, optionErrorf("etcd jobs of %d keys, %d to create, pages of %d: want 100 keys at least and a page of 1 at least", o.EtcdKeys, o.EtcdCreate, o.EtcdPage)
	}
	sel, jobs, err := selectJobs(o.Jobs)
	if err != nil {
		return nil, err
	}
	if o.MemSweep == nil {
		o.MemSweep = DefaultMemSweep
	}
	for _, m := range o.MemSweep {
		if _, ok := parseMiB(m); !ok {
			return nil, optionErrorf("--mem %q of the mem job: want MiB or GiB, e.g. 64MiB", m)
		}
	}
	if o.VolumeBytes == 0 {
		o.VolumeBytes = DefaultVolumeBytes
	}
	if o.IOBytesPerSec == 0 {
		o.IOBytesPerSec = DefaultIOBytes
	}
	exe, err := filepath.Abs(o.Exe)
	if err != nil {
		return nil, err
	}
	b := &runner{o: o, exe: exe, sel: sel, hashes: map[string]string{}, stats: map[string]map[string]any{}}
	defer func() {
		for _, stop := range b.stops {
			stop()
		}
	}()
	b.rep = &Report{
		Schema:  SchemaID,
		Started: start.UTC().Truncate(time.Second),
		Options: RunOptions{
			Records: o.Records, Seed: o.Seed, Repeat: gen.DefaultRepeat, Runs: o.Runs, WarmUp: !o.Quick,
			Quick: o.Quick, Peers: o.Peers, BoundedMem: o.BoundedMem,
			LookupWarm: 200_000, LookupCold: 20_000, InspectProbes: 1_000_000,
			VolumeBytes: o.VolumeBytes, IOBytesPerSec: o.IOBytesPerSec, Jobs: jobs,
		},
		Machine: probeMachine(),
		Jobs:    []Job{},
		Notes:   append([]string{}, o.Notes...),
	}
	if sel["mem"] {
		b.rep.Options.MemSweep = o.MemSweep
	}
	if slices.ContainsFunc(EtcdJobs, func(j string) bool { return sel[j] }) {
		b.rep.Options.EtcdMem = o.EtcdMem
	}
	if sel["scale"] {
		if len(o.ScaleSizes) == 0 {
			b.o.ScaleSizes = DefaultScaleSizes
		}
		b.rep.Options.ScaleSizes = b.o.ScaleSizes
	}
	if o.Quick {
		b.rep.Options.LookupWarm, b.rep.Options.LookupCold, b.rep.Options.InspectProbes = 50_000, 4_000, 100_000
	}
	b.rep.Machine.Commit = o.Commit
	b.rep.Machine.Fpdedup = firstLine(ctx, exe, "--version")
	if b.rep.Machine.Fpdedup == "" {
		return nil, fmt.Errorf("bench: %s --version printed nothing: is it fpdedup?", exe)
	}
	b.rep.Options.FpdedupThreads = b.rep.Machine.Cores

	b.work, err = os.MkdirTemp(o.TmpDir, "fpdedup-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: cannot make the work directory: %w", err)
	}
	if o.Keep {
		b.note("The work directory %s was kept (--keep).", b.work)
	} else {
		defer os.RemoveAll(b.work)
	}
	b.rep.Machine.TmpDir = filepath.Dir(b.work)
	b.rep.Machine.TmpFS = fsType(b.work)

	b.peers = findPeers(ctx, o.Peers, o.PeersDir)
	b.peers[boundPeer] = &Peer{Name: boundPeer, Status: "ok", Path: o.Bound}
	switch {
	case o.Peers == "none":
		b.peers[boundPeer].Status, b.peers[boundPeer].Why = "skipped", "--peers none"
	case o.Bound == "":
		b.peers[boundPeer].Status, b.peers[boundPeer].Why = "missing", "no Options.Bound (fpdedup-bench sets it to itself)"
	}
	for _, name := range []string{"sh", "cat", "dd", "sort", "mawk", "gawk", "zstd", "bloom", "node", "duckdb"} {
		b.rep.Peers = append(b.rep.Peers, *b.peers[name])
	}
	b.peers[rbPeer] = rbFindPeer(ctx)
	if slices.ContainsFunc(RedisBloomJobs, func(j string) bool { return sel[j] }) {
		b.rep.Peers = append(b.rep.Peers, *b.peers[rbPeer])
	}
	b.peers[etcdPeer], b.peers[etcdctlPeer] = etcdFindPeers(ctx, o.Peers)
	if slices.ContainsFunc(EtcdJobs, func(j string) bool { return sel[j] }) {
		b.rep.Peers = append(b.rep.Peers, *b.peers[etcdPeer], *b.peers[etcdctlPeer])
	}
	b.meter = meter{rssFile: b.path("rss.txt")}
	if gt := findGNUTime(ctx); gt != "" {
		b.meter.gnuTime = gt
		b.rep.Machine.RSSMeter = "GNU time %M (" + gt + ")"
	} else {
		b.rep.Machine.RSSMeter = "wait4 ru_maxrss"
		b.note("GNU time (/usr/bin/time, Debian package time) is not installed: peak RSS is wait4's ru_maxrss, which includes the bench process's own peak (Go starts children with vfork), an upper bound that makes small tools look big. bench/peers.sh installs it.")
	}
	if b.peers["duckdb"].Status == "ok" {
		if b.duckDir, err = installDuckScripts(b.work, o.PeersDir); err != nil {
			return nil, fmt.Errorf("bench: cannot install the DuckDB scripts: %w", err)
		}
	}

	// The scale, RedisBloom and etcd jobs make their own data: the events
	// are generated for the others.
	if slices.ContainsFunc(jobs, func(j string) bool {
		return j != "scale" && !slices.Contains(RedisBloomJobs, j) && !slices.Contains(EtcdJobs, j)
	}) {
		if err := b.generate(ctx); err != nil {
			return nil, err
		}
	}
	var specs []jobSpec
	for _, s := range b.jobs() {
		if sel[s.name] {
			specs = append(specs, s)
		}
	}
	// Progress counts the jobs, the lookups (when there is an index to
	// look up) and the mem job.
	b.jobsN = len(specs)
	if sel["build"] {
		b.jobsN++
	}
	if sel["mem"] {
		b.jobsN++
	}
	if sel["scale"] {
		b.jobsN++
	}
	for i := range specs {
		b.jobIdx = i + 1
		j, err := b.runJob(ctx, &specs[i])
		if err != nil {
			return nil, err
		}
		b.rep.Jobs = append(b.rep.Jobs, j)
	}
	if sel["build"] {
		b.jobIdx++
	}
	if err := b.figures(ctx); err != nil {
		return nil, err
	}
	if sel["mem"] {
		b.jobIdx++
		if b.rep.Memory, err = b.memSweep(ctx); err != nil {
			return nil, err
		}
	}
	if sel["scale"] {
		b.jobIdx++
		if b.rep.Scale, err = b.scale(ctx); err != nil {
			return nil, err
		}
	}
	if c := estimateCapacity(b.rep); len(c.Steps) > 0 || c.Merge != nil {
		b.rep.Capacity = c // nil when no job the estimate rests on ran
	}
	b.rep.Targets = judgeTargets(b.rep)
	if o.Compare != nil {
		b.rep.Compare = compareReports(o.Compare, b.rep)
	}
	b.rep.Machine.LoadAfter = loadAvg()
	if l := max(b.rep.Machine.LoadBefore[0], b.rep.Machine.LoadAfter[0], b.rep.Machine.LoadBefore[1]); l > float64(b.rep.Machine.Cores) {
		b.note("The load average (%.1f) exceeded the %d cores: other processes competed for the CPU during the run, so absolute times are pessimistic and vary between runs; the ratios, from interleaved runs, hold better.", l, b.rep.Machine.Cores)
	}
	b.rep.Seconds = time.Since(start).Seconds()
	return b.rep, nil
}

func (b *runner) path(name string) string { return filepath.Join(b.work, name) }

func (b *runner) note(format string, a ...any) {
	b.rep.Notes = append(b.rep.Notes, fmt.Sprintf(format, a...))
}

func (b *runner) progress(s Step) {
	if b.o.Progress == nil {
		return
	}
	if s.Jobs == 0 {
		s.JobIndex, s.Jobs = b.jobIdx, b.jobsN
	}
	b.o.Progress(s)
}

// tool runs the measured fpdedup for an untimed step (preparation, inspect)
// and returns its stdout unless out is given.
func (b *runner) tool(ctx context.Context, stdin io.Reader, out io.Writer, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.exe, args...)
	cmd.Stdin = stdin
	var buf bytes.Buffer
	if out == nil {
		out = &buf
	}
	cmd.Stdout = out
	var errs tail
	cmd.Stderr = &errs
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("fpdedup %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(errs.b))
	}
	return buf.Bytes(), nil
}

// runJob measures every row of a job: availability, preparation, an
// untimed warm-up pass (its run is the checked one), then Runs timed
// passes, each pass running every row once in turn so that a noisy
// neighbour hurts every tool alike.
func (b *runner) runJob(ctx context.Context, s *jobSpec) (Job, error) {
	j := Job{Name: s.name, Title: s.title, Input: s.input, InputBytes: s.inputBytes, Units: s.units,
		Unit: s.unit, Reference: s.ref, Checks: []string{}}
	j.Rows = make([]Row, len(s.rows))
	for i, rs := range s.rows {
		j.Rows[i] = Row{Tool: rs.tool, Kind: rs.kind, Command: b.display(rs.cmd), Status: "ok", Runs: []Sample{}}
		for _, need := range rs.needs {
			if p := b.peers[need]; p.Status != "ok" {
				j.Rows[i].Status, j.Rows[i].Why = p.Status, need+": "+p.Why
				break
			}
		}
	}
	if s.prep != nil {
		b.progress(Step{Phase: "prepare", Job: s.name, Msg: "preparing " + s.name})
		if err := s.prep(ctx, &j); err != nil {
			if ctx.Err() != nil {
				return j, context.Cause(ctx)
			}
			for i := range j.Rows {
				if j.Rows[i].Status == "ok" {
					j.Rows[i].Status, j.Rows[i].Why = "failed", "preparing the job failed: "+err.Error()
				}
			}
		}
	}
	for i, rs := range s.rows {
		if rs.needsFile == "" || j.Rows[i].Status != "ok" {
			continue
		}
		if _, err := os.Stat(rs.needsFile); err != nil {
			j.Rows[i].Status, j.Rows[i].Why = "missing", "no "+filepath.Base(rs.needsFile)+" (the row of an earlier job that makes it did not run)"
		}
	}

	first := 1
	if b.rep.Options.WarmUp {
		first = 0
	}
	checked := make([]bool, len(s.rows))
	for pass := first; pass <= b.o.Runs; pass++ {
		for i, rs := range s.rows {
			r := &j.Rows[i]
			if r.Status != "ok" {
				continue
			}
			if rs.before != nil {
				if err := rs.before(ctx); err != nil {
					if ctx.Err() != nil {
						return j, context.Cause(ctx)
					}
					r.Status, r.Why = "failed", "before the run: "+err.Error()
					continue
				}
			}
			b.progress(Step{Phase: "run", Job: s.name, Tool: rs.tool, Run: pass, Runs: b.o.Runs})
			sample, out, err := execOnce(ctx, b.meter, rs.cmd, !checked[i], rs.wantExit)
			if ctx.Err() != nil {
				return j, context.Cause(ctx)
			}
			if err != nil {
				r.Status, r.Why = "failed", err.Error()
				if rs.givesUp != "" && strings.Contains(err.Error(), rs.givesUp) {
					r.Status = "gave up"
				}
				continue
			}
			b.progress(Step{Phase: "done", Job: s.name, Tool: rs.tool, Run: pass, Runs: b.o.Runs, WallS: sample.WallS})
			if !checked[i] {
				checked[i] = true
				var st map[string]any
				if rs.stats != "" {
					st = readStats(rs.stats)
					b.stats[s.name] = st
				}
				r.Output = &Output{Lines: out.Lines, Bytes: out.Bytes, Head: out.Head, Hash: out.Hash}
				if rs.verify != nil {
					r.Check, r.CheckOK = rs.verify(out, st)
				}
			}
			if pass > 0 {
				r.Runs = append(r.Runs, sample)
			}
		}
	}

	for i, rs := range s.rows {
		r := &j.Rows[i]
		if r.Status != "ok" {
			r.Runs = []Sample{}
			continue
		}
		r.Median = summarize(r.Runs)
		if rs.stats != "" {
			if v, ok := num(readStats(rs.stats), "memory", "peak_rss_anon_bytes"); ok {
				r.PeakAnon = int64(v)
			}
		}
	}
	finishJob(&j, s.distinct)
	b.progress(Step{Phase: "job", Job: s.name})
	return j, nil
}

// finishJob computes the throughputs, ratios and RSS per key of measured
// rows, and the job's check lines.
func finishJob(j *Job, distinct int64) {
	ref := j.ref()
	for i := range j.Rows {
		r := &j.Rows[i]
		if r.Median == nil || r.Median.WallS <= 0 {
			continue
		}
		r.MBPerS = float64(j.InputBytes) / 1e6 / r.Median.WallS
		r.UnitsPerS = float64(j.Units) / r.Median.WallS
		if ref != nil && ref.Median.WallS > 0 {
			r.Ratio = r.Median.WallS / ref.Median.WallS
		}
		if distinct > 0 {
			r.RSSPerKey = float64(r.Median.MaxRSS) / float64(distinct)
		}
	}
	for _, r := range j.Rows {
		switch {
		case r.Status == "failed":
			j.Checks = append(j.Checks, fmt.Sprintf("%s: FAILED: %s", r.Tool, r.Why))
		case r.Status == "gave up":
			j.Checks = append(j.Checks, fmt.Sprintf("%s: gave up under its limit (how it fares, not a failure of the run): %s", r.Tool, r.Why))
		case r.CheckOK != nil && !*r.CheckOK:
			j.Checks = append(j.Checks, fmt.Sprintf("%s: WRONG: %s", r.Tool, r.Check))
		}
	}
}

func readStats(path string) map[string]any {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// display is a command as the report shows it: the measured binary as
// fpdedup, the work directory as $WORK, the DuckDB scripts by their
// repository path.
func (b *runner) display(c command) string {
	var s string
	if len(c.argv) == 3 && c.argv[0] == "sh" && c.argv[1] == "-c" {
		s = c.argv[2]
	} else {
		parts := make([]string, len(c.argv))
		for i, a := range c.argv {
			parts[i] = shellQuote(a)
		}
		s = strings.Join(parts, " ")
	}
	if c.stdin != "" {
		s += " < " + shellQuote(c.stdin)
	}
	if b.duckDir != "" {
		s = strings.ReplaceAll(s, b.duckDir+"/", "bench/")
	}
	s = strings.ReplaceAll(s, shellQuote(b.exe)+" ", "fpdedup ")
	s = strings.ReplaceAll(s, b.work, "$WORK")
	return s
}

// figures measures what is not a whole-process timing: lookup latency in
// this process, the index's bytes per key and filter false-positive rate
// (inspect --json of the measured binary), and the bounded dedup's bloom.
func (b *runner) figures(ctx context.Context) error {
	index := b.path("index.fpx")
	if !b.sel["build"] {
		why := "the build job was not run (--jobs)"
		b.rep.Lookup = &Lookup{Warm: LookupPhase{Status: "not measured", Why: why}, Cold: LookupPhase{Status: "not measured", Why: why}}
	} else if _, err := os.Stat(index); err != nil {
		b.note("No index.fpx (fpdedup build did not run): no lookup latency, no index figures.")
		b.rep.Lookup = &Lookup{Warm: LookupPhase{Status: "not measured", Why: "no index"}, Cold: LookupPhase{Status: "not measured", Why: "no index"}}
	} else {
		b.progress(Step{Phase: "lookup", Job: "lookup", Tool: "Index.Contains (in process)", Msg: "lookup latency"})
		lk, err := measureLookups(ctx, index, b.rep.Options.LookupWarm, b.rep.Options.LookupCold)
		if err != nil {
			return err
		}
		b.rep.Lookup = lk
		out, err := b.tool(ctx, nil, nil, "--progress", "never", "inspect", "--json", "--probes", strconv.Itoa(b.rep.Options.InspectProbes), index)
		if err != nil {
			b.note("fpdedup inspect failed: %v", err)
		} else if err := json.Unmarshal(out, &b.rep.Index); err != nil {
			b.note("fpdedup inspect --json printed what this bench cannot read: %v", err)
		}
	}
	if !b.sel["dedup-bounded"] {
		return nil
	}
	bf := &BoundedFigures{Status: "ok", Mem: b.o.BoundedMem, Records: b.rep.Data.BoundedRecords}
	st := b.stats["dedup-bounded"]
	if st == nil {
		bf.Status = "not measured: the bounded dedup row did not run"
	} else {
		bf.Mode, _ = str(st, "dedup", "mode")
		for _, f := range []struct {
			dst *int64
			key string
		}{{&bf.Runs, "runs"}, {&bf.BloomBytes, "bloom_bytes"}, {&bf.TableBytes, "table_bytes"}, {&bf.FilterProbes, "filter_probes"}} {
			v, _ := num(st, "dedup", f.key)
			*f.dst = int64(v)
		}
		bf.FilterFPRMeasured, _ = num(st, "dedup", "filter_fpr_measured")
		bf.FilterFPRFormula, _ = num(st, "dedup", "filter_fpr_formula")
		bf.FilterFPRInRun, _ = num(st, "dedup", "filter_fpr_in_run")
		if bf.Mode != "lsm" {
			bf.Status = "not measured: dedup stayed in memory mode (no bloom)"
		}
	}
	b.rep.Bounded = bf
	return nil
}
