package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/pipeline"
)

type countOptions struct {
	records    recordFlags
	hash       string
	files0From string
	tmpDir     string
	output     string
	minCount   uint64
	top        int
	tsv        bool
	check      bool
}

func newCountCommand(inv *invocation) *cobra.Command {
	o := &countOptions{}
	cmd := &cobra.Command{
		Use:   "count [FILE...]",
		Short: "Count the records of each key, in first-occurrence order",
		Long: `Count reads records from the FILEs (none or "-": stdin; plain, gzip or zstd)
and writes each distinct key once, in the order keys first appear, with the
number of records that have it, as uniq -c prints it ("%7d RECORD"), the
record being the key's first occurrence, bytes unchanged:

  awk '{c[$0]++; if (!o[$0]++) k[++n] = $0}
       END {for (i = 1; i <= n; i++) printf "%7d %s\n", c[k[i]], k[i]}'

prints the same for whole lines, byte for byte. A Parquet row, which has no
bytes of its own, prints as its key text with a backslash, TAB, LF, CR and NUL
written \\, \t, \n, \r and \0, so that a row is one line (-z ends it with NUL
instead of LF).

--tsv writes COUNT<TAB>RECORD for scripts; --min-count 2 keeps the keys seen
twice or more (the retry audit); --top K the K most frequent, ties in
first-occurrence order.
--check writes nothing and exits 1 at the first repeated key, as dedup --check.

It reads the input twice: a first pass counts (a table of 32 bytes a key in
--mem; beyond it, sorted runs in --tmpdir, merged exactly), a second writes in
input order, reading the counts by record number (8 bytes a record, when that
fits in --mem beside the table; else it looks each key up again); stdin is
spooled to --tmpdir for the second pass.

Exit codes: 0 done; 1 (--check) a key repeats; 2 usage, input or I/O error;
130/143 interrupted; 141 the reader closed the pipe.`,
		Example: `  fpdedup count events.log | sort -rn | head
  fpdedup count --format csv --header --key user_id,device_id,timestamp_ms --min-count 2 day.csv.zst
  fpdedup count --top 10 --tsv logins.log`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCount(cmd, inv, o, args)
		},
	}
	f := cmd.Flags()
	o.records.printsRows = true
	o.records.add(f, "lines (the whole record is the key), csv, tsv, jsonl, parquet (keyed by --key; parquet found by its magic when not given)")
	f.StringVar(&o.hash, "hash", "xxh3", "fingerprint hash: xxh3 or sha256")
	f.StringVar(&o.files0From, "files0-from", "", "read NUL-separated input file names from `F` (- for stdin)")
	f.StringVar(&o.tmpDir, "tmpdir", os.TempDir(), "directory for the key table's runs beyond --mem, and for the spool of stdin")
	f.StringVarP(&o.output, "output", "o", "", "write to FILE, published atomically on success (default stdout)")
	f.Uint64Var(&o.minCount, "min-count", 0, "print only keys seen at least `N` times")
	f.IntVar(&o.top, "top", 0, "print only the `K` most frequent keys (ties in first-occurrence order)")
	f.BoolVar(&o.tsv, "tsv", false, "write COUNT<TAB>RECORD instead of uniq -c's layout")
	f.BoolVar(&o.check, "check", false, "write nothing; exit 1 at the first repeated key, naming both lines")
	return cmd
}

func runCount(cmd *cobra.Command, inv *invocation, o *countOptions, args []string) error {
	if o.top < 0 || o.top == 0 && cmd.Flags().Changed("top") {
		return usageErrorf("--top must be at least 1")
	}
	if o.check {
		if o.top > 0 || o.minCount > 0 || o.tsv || o.output != "" {
			return usageErrorf("--check writes nothing: no --top, --min-count, --tsv or -o")
		}
		return runCheck(cmd, inv, &dedupOptions{records: o.records, hash: o.hash, files0From: o.files0From, tmpDir: o.tmpDir}, args)
	}
	h, err := ingest.ParseHash(o.hash)
	if err != nil {
		return usageErrorf("--hash: %v", err)
	}
	j := inv.job(cmd)
	opts := pipeline.CountOptions{MinCount: o.minCount, Top: o.top, TSV: o.tsv, Threads: inv.threads, Mem: inv.mem, TmpDir: o.tmpDir, Progress: &ingest.Progress{}}
	if opts.Inputs, err = inputNames(inv, o.files0From, args); err != nil {
		return err
	}
	j.input("FILE", kindRecords, opts.Inputs...)
	if opts.Records, err = o.records.reading(j, h, nil, false, false); err != nil {
		return err
	}
	j.input("--files0-from", kindOther, o.files0From)
	out := j.stream("-o", o.output) // counts, not records: never in place
	j.progress(opts.Progress)
	j.memory(opts.Plan())
	return j.run(func(ctx context.Context) (map[string]any, error) {
		st, err := pipeline.Count(ctx, opts, out.w)
		spilled := ""
		if st.Runs > 0 {
			spilled = fmt.Sprintf(" (key table beyond --mem: %d runs in --tmpdir)", st.Runs)
		}
		j.summary("count: %s, %d distinct keys, %d printed, %s, %.2f s%s", counted(st.Records, "record"), st.Distinct, st.Printed, badSummary(opts.Records.OnBad), st.Seconds, spilled)
		return map[string]any{"count": st, "threads": inv.threads}, err
	})
}

// runCheck is count --check: dedup --check on the same records.
func runCheck(cmd *cobra.Command, inv *invocation, o *dedupOptions, args []string) error {
	o.check, o.emit, o.keep = true, "first", "first"
	return runDedup(cmd, inv, o, args)
}
