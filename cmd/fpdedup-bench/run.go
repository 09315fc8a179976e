package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench"
	"github.com/fpdedup/fpdedup/internal/units"
)

// runOptions are the flags of fpdedup-bench itself: what to measure.
type runOptions struct {
	records, out, compare, volume, ioBandwidth, boundedMem string
	exe, peers, peersDir, rbKeys, rbExtra                  string
	etcdKeys, etcdCreate, etcdMem                          string
	jobs, memSweep, notes, scaleSizes                      []string
	runs, rbShards, etcdPage                               int
	scaleFio                                               time.Duration
	seed                                                   uint64
	quick, keep                                            bool
}

func newRunCommand(e *env) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "fpdedup-bench [--records 10M] [--peers auto|none] [--runs 3] [--jobs LIST] [--out DIR]",
		Short: "Measure fpdedup beside its peers on generated data; report, charts, capacity",
		Long: `fpdedup-bench generates events (fpdedup gen's generator) into a
temporary directory and measures whole processes of an fpdedup binary and of
the peers that are installed: build, query (all present, all absent), dedup
(lines, bounded memory, CSV keys, zstd input), count, merge, and Parquet (the
CSV's records written as zstd Parquet: dedup to Parquet, the same under --mem
256MiB, count and build, each beside the same job on the CSV), against LC_ALL=C
sort -u, mawk/gawk '!s[$0]++', DuckDB (node and @duckdb/node-api), the bloom
CLI, and floors: cat, zstd -dc, dd, and for dedup of lines "fpdedup-bench
bound", the least an exact order-keeping dedup does here. Each row runs once untimed (its output
is checked against the generator's exact distinct count), then --runs times,
interleaved with the other rows; the report gives medians of wall time, CPU
(user+sys) and peak RSS, and ratios to fpdedup. In process it times single
index lookups (p50 to p99.9, warm and after dropping the file from the page
cache) and reads the index's bytes per key and its filters' false-positive
rates against theory.

--jobs chooses what to measure (default: every job above). Also:
merge-partitions and build-partitions (the scale-out: stitching the
partitions of one key set, a k-way merge, partitioned builds, on --records
random fingerprints), mem (each command once under each --mem of
--mem-sweep, its anonymous memory sampled every millisecond) and scale
(indexes of --scale-sizes random fingerprints, 10^7 to 10^9 by default: build,
build --mem 2GiB, batches of 10^2 to 10^5 keys queried warm and cold with the
device's reads counted (the cold ones also in a running process), single cold
lookups, a 10^8-key day merged into the largest against its I/O floor, a
day's dedup --against it, sort -u at 10^8 and fio on the device; a size the free disk cannot hold is skipped and said;
about 25 minutes with 10^9, and 40 GB free), and redisbloom-audit,
redisbloom-rebuild and redisbloom-apply (fpdedup reconcile against --rb-shards RedisBloom filters
of --rb-keys truth keys, 1% never added, and --rb-extra items of history,
grown to three sub-filters, on a
redis-server the run starts with the module ($FPDEDUP_REDISBLOOM, else
shared/redisbloom/redisbloom.so above the working directory): the audit beside
bare BF.SCANDUMP loops and pipelined BF.MEXISTS of every key, the rebuild of
every filter beside bare BF.LOADCHUNK of the same bytes, --apply of every key
into filters emptied before each run beside redis-cli --pipe of the same
BF.INSERT commands), and etcd-audit and etcd-apply (fpdedup
reconcile against a single etcd member the run starts, its data in the work
directory; etcd and etcdctl from Debian's etcd-server and etcd-client): the
audit of --etcd-keys keys (SHA-256 hex under a prefix) beside one etcdctl get
--prefix --keys-only and etcdctl page by page at the same page size
(--etcd-page) and revision; --apply of --etcd-create missing keys
(compare-and-create, 128 keys a transaction, 4 connections) beside a bare loop
of etcd's Go client sending the same transactions at the same concurrency,
every key read back after each; fpdedup under --etcd-mem. "all" is every
job. The scripts in bench/ are presets of these.

The fpdedup measured is --fpdedup, or the one beside this binary (make bench
puts both in bin/), or the one on PATH. A peer that is not installed is
reported as missing; bench/peers.sh installs them on Debian (run it as
root), DuckDB into bench/.peers (--peers-dir).

--out DIR receives report.json (every figure, the machine, schema in
bench/schema.json), report.md, and charts as SVG and PNG. --compare OLD.json
prints what got faster or slower. --volume estimates what a day of that much
input takes here and how many such machines the partitioned mode needs.
--quick is a one-minute version (1M records, one run): indicative only.

Exit codes: 0 done; 1 done, but a row failed or gave a wrong answer (see the
report); 2 bad usage or the benchmark could not run; 130/143 interrupted.`,
		Example: `  fpdedup-bench --out bench/results/$(date -u +%F)
  fpdedup-bench --quick --peers none
  fpdedup-bench --records 100M --runs 5 --compare bench/results/2026-12-02/report.json
  fpdedup-bench --jobs mem --records 10M --mem-sweep 16MiB,256MiB
  fpdedup-bench --jobs scale --scale-sizes 10M,100M,1G --out bench/results/scale-$(date -u +%F)
  fpdedup-bench --jobs redisbloom-audit,redisbloom-rebuild,redisbloom-apply --rb-keys 10M --rb-extra 160M --runs 5
  fpdedup-bench --jobs etcd-audit,etcd-apply --etcd-keys 1M --etcd-create 100k --runs 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd.Context(), e, o)
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
	f.StringVar(&o.exe, "fpdedup", "", "the fpdedup binary to measure (default: the one beside this binary, else on PATH)")
	f.StringVar(&o.peersDir, "peers-dir", "", "where bench/peers.sh installed @duckdb/node-api (default: bench/.peers above the current directory)")
	f.BoolVar(&o.keep, "keep", false, "keep the temporary data directory")
	f.StringSliceVar(&o.jobs, "jobs", nil, "jobs to measure, comma-separated: "+strings.Join(bench.AllJobs, ", ")+"; all; default (the first "+fmt.Sprint(len(bench.DefaultJobs))+")")
	f.StringSliceVar(&o.memSweep, "mem-sweep", bench.DefaultMemSweep, "--mem values of the mem job (MiB or GiB)")
	f.DurationVar(&o.scaleFio, "scale-fio", 10*time.Second, "how long each of the scale job's fio measurements runs")
	f.StringSliceVar(&o.scaleSizes, "scale-sizes", []string{"10M", "100M", "1G"}, "index sizes of the scale job, in keys (k, M, G suffixes)")
	f.StringArrayVar(&o.notes, "note", nil, "a line for the report's notes, e.g. what else ran (repeatable)")
	f.StringVar(&o.rbKeys, "rb-keys", "1M", "truth keys of the redisbloom jobs (k, M suffixes; issue 44's scale: 10M)")
	f.IntVar(&o.rbShards, "rb-shards", bench.DefaultRBShards, "RedisBloom filters of the redisbloom jobs")
	f.StringVar(&o.rbExtra, "rb-extra", "0", "items of history the redisbloom jobs' filters hold beside the truth keys (k, M suffixes): what makes their dumps as large as online")
	f.StringVar(&o.etcdKeys, "etcd-keys", "1M", "keys under the prefix the etcd-audit job reads (k, M suffixes; issue 45's scale: 1M)")
	f.StringVar(&o.etcdCreate, "etcd-create", "100k", "missing keys the etcd-apply job creates (k, M suffixes; issue 45's scale: 100k)")
	f.IntVar(&o.etcdPage, "etcd-page", bench.DefaultEtcdPage, "page size of the etcd-audit job, fpdedup's and etcdctl's")
	f.StringVar(&o.etcdMem, "etcd-mem", bench.DefaultEtcdMem, "--mem of fpdedup in the etcd jobs")
	return cmd
}

func runBench(ctx context.Context, e *env, o runOptions) error {
	opts := bench.Options{Peers: o.peers, Runs: o.runs, Quick: o.quick, Seed: o.seed, Keep: o.keep, PeersDir: o.peersDir,
		Jobs: o.jobs, MemSweep: o.memSweep, Notes: o.notes, ScaleFio: o.scaleFio}
	if o.peers != "auto" && o.peers != "none" {
		return usageErrorf("--peers must be auto or none, not %q", o.peers)
	}
	if o.runs < 0 {
		return usageErrorf("--runs must be at least 1")
	}
	if n, err := units.ParseCount(o.rbKeys); err != nil || n < 100 {
		return usageErrorf("--rb-keys: want a count of at least 100 (k, M suffixes), not %q", o.rbKeys)
	} else {
		opts.RBKeys = n
	}
	if o.rbShards < 1 || o.rbShards > 1024 {
		return usageErrorf("--rb-shards: want 1 to 1024, not %d", o.rbShards)
	}
	opts.RBShards = o.rbShards
	if n, err := units.ParseCount(o.rbExtra); err != nil || n < 0 {
		return usageErrorf("--rb-extra: want a count (k, M suffixes), not %q", o.rbExtra)
	} else {
		opts.RBExtra = n
	}
	for _, c := range []struct {
		flag, text string
		dst        *int64
	}{{"--etcd-keys", o.etcdKeys, &opts.EtcdKeys}, {"--etcd-create", o.etcdCreate, &opts.EtcdCreate}} {
		n, err := units.ParseCount(c.text)
		if err != nil || n < 100 {
			return usageErrorf("%s: want a count of at least 100 (k, M suffixes), not %q", c.flag, c.text)
		}
		*c.dst = n
	}
	if o.etcdPage < 1 {
		return usageErrorf("--etcd-page: want 1 at least, not %d", o.etcdPage)
	}
	opts.EtcdPage = o.etcdPage
	if m, err := units.ParseSize(o.etcdMem); err != nil || m < 16<<20 {
		return usageErrorf("--etcd-mem: want a size of at least 16MiB, not %q", o.etcdMem)
	}
	opts.EtcdMem = o.etcdMem
	if o.records != "" {
		n, err := units.ParseCount(o.records)
		if err != nil {
			return usageErrorf("--records: %v", err)
		}
		if n < 2 {
			return usageErrorf("--records must be at least 2")
		}
		opts.Records = n
	}
	var err error
	if opts.VolumeBytes, err = units.ParseSize(o.volume); err != nil || opts.VolumeBytes <= 0 {
		return usageErrorf("--volume: invalid size %q", o.volume)
	}
	if opts.IOBytesPerSec, err = units.ParseSize(strings.TrimSuffix(o.ioBandwidth, "/s")); err != nil || opts.IOBytesPerSec <= 0 {
		return usageErrorf("--io-bandwidth: invalid size %q", o.ioBandwidth)
	}
	if m, err := units.ParseSize(o.boundedMem); err != nil || m < 16<<20 {
		return usageErrorf("--bounded-mem: want a size of at least 16MiB, not %q", o.boundedMem)
	}
	opts.BoundedMem = o.boundedMem
	for _, m := range o.memSweep {
		if n, err := units.ParseSize(m); err != nil || n < 16<<20 || !strings.HasSuffix(m, "iB") {
			return usageErrorf("--mem-sweep: want sizes in MiB or GiB of at least 16MiB, not %q", m)
		}
	}
	for _, s := range o.scaleSizes {
		n, err := units.ParseCount(s)
		if err != nil || n < 1000 {
			return usageErrorf("--scale-sizes: want key counts of at least 1k, not %q", s)
		}
		opts.ScaleSizes = append(opts.ScaleSizes, n)
	}
	if o.compare != "" {
		if opts.Compare, err = bench.ReadReport(o.compare); err != nil {
			return usageErrorf("--compare: %v", err)
		}
	}
	if self, err := os.Executable(); err == nil {
		opts.Bound = self
	}
	if opts.Exe = o.exe; opts.Exe == "" {
		if opts.Exe, err = findFpdedup(); err != nil {
			return err
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

	p := newProgress(e)
	opts.Progress = p.step
	rep, err := bench.Run(ctx, opts)
	p.clear()
	var oe *bench.OptionError
	if errors.As(err, &oe) {
		return usageErrorf("%s", oe.Msg)
	}
	if err != nil {
		return err
	}
	if err := rep.Write(out); err != nil {
		return fmt.Errorf("cannot write the report: %w", err)
	}
	for _, l := range rep.SummaryLines() {
		e.summary("%s", l)
	}
	e.summary("  report: %s", filepath.Join(out, "report.md"))
	if rep.Compare != nil {
		if err := rep.Compare.WriteText(e.stdout); err != nil {
			return err
		}
	}
	if n := rep.Problems(); n > 0 {
		return problems{fmt.Sprintf("%d row(s) failed or gave a wrong answer; see %s", n, filepath.Join(out, "report.md"))}
	}
	return nil
}

// findFpdedup is the binary to measure when --fpdedup is not given: the
// fpdedup beside this binary (make bench puts both in bin/), else the one
// on PATH.
func findFpdedup() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "fpdedup")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("fpdedup"); err == nil {
		return p, nil
	}
	return "", usageErrorf("no fpdedup to measure beside this binary or on PATH: make bench builds both into bin/, or pass --fpdedup PATH")
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
