package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/pipeline"
)

type buildOptions struct {
	output     string
	records    recordFlags
	hash       string
	files0From string
	tmpDir     string
	partition  string
	specFrom   string
}

func newBuildCommand(inv *invocation) *cobra.Command {
	o := &buildOptions{}
	cmd := &cobra.Command{
		Use:   "build -o OUT.fpx [FILE...]",
		Short: "Build an index of the distinct fingerprints of records",
		Long: `Build reads records from the FILEs (none or "-": stdin), fingerprints each
record's key and writes the distinct fingerprints as a new index, published
atomically (temp file, fsync, rename): OUT.fpx is the old file or the new one,
never a torn one.

Inputs may be plain, gzip or zstd, detected by their magic bytes. In the
lines format (the default) each line is a key, byte for byte: a \r, a BOM,
invalid UTF-8 all belong to it; an empty line is the empty key.
--format fp reads 32-digit hex fingerprints instead (as dump prints them).
Bare fingerprints do not say how they were made, so it needs --spec-from IDX
(the index they came from: its hash and key recipe are recorded in the new
one) or --hash (fingerprints of whole records); an index labelled with the
wrong recipe would answer "absent" for keys it holds.

Memory stays under --mem: beyond it, sorted runs spill to --tmpdir and are
merged; temp files are removed on success, error and SIGINT/SIGTERM. The
same set of fingerprints gives the same bytes whatever the input order,
--threads or --mem.

Exit codes: 0 built; 2 bad usage, bad input or I/O error (nothing is
published); 130/143 interrupted (nothing is published).`,
		Example: `  fpdedup build -o day.fpx events.log.zst
  zcat a.gz b.gz | fpdedup build -o all.fpx
  fpdedup dump old.fpx | fpdedup build --format fp --spec-from old.fpx -o copy.fpx
  find logs -name '*.zst' -print0 | fpdedup build --files0-from - -o logs.fpx
  fpdedup build --partition auto -o part-$SLURM_ARRAY_TASK_ID.fpx day/*.zst   # in sbatch --array=0-7`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBuild(cmd, inv, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "the index to write (required)")
	o.records.add(f, "lines (one key per line), csv, tsv, jsonl, parquet (found by its magic when not given), or fp (hex fingerprints)")
	f.StringVar(&o.hash, "hash", "xxh3", "fingerprint hash: xxh3 (XXH3-128) or sha256 (first 128 bits)")
	f.StringVar(&o.files0From, "files0-from", "", "read NUL-separated input file names from `F` (- for stdin)")
	f.StringVar(&o.tmpDir, "tmpdir", os.TempDir(), "directory for spilled runs")
	f.StringVar(&o.partition, "partition", "", partitionUsage)
	f.StringVar(&o.specFrom, "spec-from", "", "with --format fp: the hash and key recipe of the fingerprints are those of index `IDX`")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func runBuild(cmd *cobra.Command, inv *invocation, o *buildOptions, args []string) error {
	j := inv.job(cmd)
	opts := pipeline.BuildOptions{Output: o.output, Threads: inv.threads, Mem: inv.mem, TmpDir: o.tmpDir, Progress: &ingest.Progress{}, Group: j.grp}
	h, err := ingest.ParseHash(o.hash)
	if err != nil {
		return usageErrorf("--hash: %v", err)
	}
	fpFormat := o.records.format == "fp"
	if opts.Inputs, err = inputNames(inv, o.files0From, args); err != nil {
		return err
	}
	j.input("FILE", kindRecords, opts.Inputs...)
	if opts.Records, err = o.records.reading(j, h, nil, false, true); err != nil {
		return err
	}
	opts.Spec = ingest.Recipe(opts.Records)
	switch {
	case !fpFormat && o.specFrom != "":
		return usageErrorf("--spec-from is for --format fp: records are fingerprinted with --hash and --key")
	case fpFormat && o.specFrom != "":
		if cmd.Flags().Changed("hash") {
			return usageErrorf("--spec-from %s gives the hash: drop --hash", o.specFrom)
		}
		x, err := fpstore.Open(o.specFrom)
		if err != nil {
			return err
		}
		opts.Spec = x.Spec()
		x.Close()
		if h, err = ingest.ParseHash(opts.Spec.Hash); err != nil {
			return fmt.Errorf("%s: %w", o.specFrom, err)
		}
		opts.Records.Hash = h
	case fpFormat && !cmd.Flags().Changed("hash"):
		return usageErrorf("--format fp reads bare fingerprints, which do not say how they were made: give --spec-from IDX (the index they were dumped from: its hash and key recipe) or --hash xxh3|sha256 (fingerprints of whole records)")
	}
	if opts.Range, err = j.partition(o.partition); err != nil {
		return err
	}
	j.input("--files0-from", kindOther, o.files0From)
	j.input("--spec-from", kindIndex, o.specFrom)
	j.output("-o", o.output)
	j.progress(opts.Progress)
	j.memory(opts.Plan().Plan)
	return j.run(func(ctx context.Context) (map[string]any, error) {
		st, err := pipeline.Build(ctx, opts)
		j.summary("build: %s, %d distinct, %d duplicates, %s, %s read, %.2f s, %s records/s → %s (%s, %.2f bytes/key)",
			counted(st.Records, "record"), st.Distinct, st.Duplicates, badSummary(opts.Records.OnBad), units.FormatBytes(st.Bytes), st.Seconds,
			humanRate(float64(st.Records)/max(st.Seconds, 1e-9)), o.output, units.FormatBytes(st.IndexBytes), float64(st.IndexBytes)/float64(max(st.Distinct, 1)))
		return map[string]any{"output": o.output, "hash": h.String(), "build": st, "threads": inv.threads}, err
	})
}

// inputNames resolves FILE arguments and --files0-from into input names.
func inputNames(inv *invocation, files0From string, args []string) ([]string, error) {
	if files0From == "" {
		return args, nil
	}
	if len(args) > 0 {
		return nil, usageErrorf("file operands cannot be combined with --files0-from")
	}
	r := inv.stdin
	name := "-"
	if files0From != "-" {
		f, err := os.Open(files0From)
		if err != nil {
			return nil, fmt.Errorf("cannot open --files0-from list: %w", err)
		}
		defer f.Close()
		r, name = f, files0From
	}
	return ingest.ReadFiles0(r, name)
}

func formatFloat(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// badSummary is the bad-record part of a summary line.
func badSummary(p *ingest.BadPolicy) string {
	n := p.Count()
	if n == 0 {
		return "0 bad"
	}
	return fmt.Sprintf("%d bad (first: %v)", n, p.First())
}
