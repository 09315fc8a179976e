package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/tempfile"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/pipeline"
)

type dedupOptions struct {
	against    []string
	emit       string
	record     string
	output     string
	records    recordFlags
	hash       string
	files0From string
	tmpDir     string
	keep       string
	check      bool
	duplicates string
}

func newDedupCommand(inv *invocation) *cobra.Command {
	o := &dedupOptions{}
	cmd := &cobra.Command{
		Use:   "dedup [FILE...]",
		Short: "Write each record whose key was not seen before, in input order",
		Long: `Dedup reads records from the FILEs (none or "-": stdin; plain, gzip or zstd)
and writes each record whose key was not seen earlier in this input nor in any
--against index, in input order, bytes unchanged — exactly: the seen-set holds
128-bit fingerprints, not a bloom's guesses. --emit duplicates writes the other
records instead.

Parquet files (--format parquet, or their PAR1 magic: in files and in stdin
redirected from a file, not in a pipe) are keyed by columns
(--key user_id,device_id,ts) and written as Parquet: the kept rows unchanged,
in input order, with the first input's schema, metadata and codec (zstd at
its fastest level), one output row group per input row group. Only the key
columns are decoded to decide; a row group's kept rows are copied as it is
decided, while the next is decided, so memory holds two row groups' key values
(the next one's is decoded while this one's keys are hashed) and two row
groups being copied (their rows decoded, and the output's pages), never the
file. Those come on top of --mem, as large as the input's row groups are
(README "Performance" has a measure). --output-format csv, tsv or
jsonl writes the rows as text instead, every value by the key text rules:
csv and tsv a header of column paths, then a line a row (NULL an empty
field; tsv has no quoting, so a value holding a TAB or line break is an
error); jsonl an object a row, groups nested, numbers as numbers, NULL as
null, bytes that are not UTF-8 as NAME_base64. Repeated (LIST) columns stay
Parquet only.

--format fp reads 32-digit hex fingerprints, a line each (dump's output), as
the keys themselves: against an index of any recipe, and --record labels its
index as the --against index is.

--record OUT.fpx publishes the fingerprints of the first occurrences that are in
no --against index, so that tomorrow's run can use it with --against. -o FILE
and --record are published atomically, and only when dedup succeeds.

Exit codes: 0 done (--check: every key unique); 1 --check found a repeated
key, named with both its lines; 2 bad usage, bad input or I/O error (nothing
published); 130/143 interrupted (nothing published); 141 the reader closed
the pipe (… | head): the run ends quietly, nothing published.`,
		Example: `  zstdcat day.log.zst | fpdedup dedup > unique.log
  fpdedup dedup --against history.fpx --record today.fpx events-*.log.gz > new.log
  fpdedup dedup --keep last --duplicates older.log events.log > latest.log
  fpdedup dedup --check --format csv --header --key order_id orders.csv && echo unique`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDedup(cmd, inv, o, args)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.against, "against", nil, "an index of keys already seen (repeatable; the set answers as if merged)")
	f.StringVar(&o.emit, "emit", "first", "which records to write: first (first occurrences) or duplicates")
	f.StringVar(&o.record, "record", "", "publish the new first occurrences' fingerprints as an index at `OUT.fpx`")
	f.StringVarP(&o.output, "output", "o", "", "write records to FILE, published atomically on success (default stdout)")
	o.records.add(f, "lines (the whole record is the key), csv, tsv, jsonl, parquet (keyed by --key; parquet writes parquet, found by its magic when not given), fp (32-digit hex fingerprints, a line each); default: the --against index's recipe")
	o.records.addOutput(f, "stdout or -o, and --duplicates,")
	f.Lookup("header").Usage += "; dedup writes it once, before the records"
	f.BoolVar(&o.records.assumeRecipe, "assume-recipe", false, "read records with another --key/--key-sep than the --against index's, with a warning")
	f.StringVar(&o.hash, "hash", "", "fingerprint hash: xxh3 or sha256 (default: the --against index's, else xxh3)")
	f.StringVar(&o.files0From, "files0-from", "", "read NUL-separated input file names from `F` (- for stdin)")
	f.StringVar(&o.tmpDir, "tmpdir", os.TempDir(), "directory for temporary files")
	f.StringVar(&o.keep, "keep", "first", "which occurrence of each key: first, or last (in the order the last ones come; two passes, stdin spooled to --tmpdir)")
	f.BoolVar(&o.check, "check", false, "write nothing; exit 0 if every key is unique, 1 at the first repeat, naming both lines")
	f.StringVar(&o.duplicates, "duplicates", "", "write the records not kept to `FILE` (published atomically), the kept ones to stdout or -o")
	return cmd
}

func runDedup(cmd *cobra.Command, inv *invocation, o *dedupOptions, args []string) error {
	opts, err := dedupModes(inv, o)
	if opts.Against != nil {
		defer opts.Against.Close()
	}
	if err != nil {
		return err
	}
	if opts.Inputs, err = inputNames(inv, o.files0From, args); err != nil {
		return err
	}
	j := inv.job(cmd)
	j.input("FILE", kindRecords, opts.Inputs...)
	if err := dedupRecords(j, o, &opts); err != nil {
		return err
	}
	j.input("--files0-from", kindOther, o.files0From)
	j.input("--against", kindIndex, o.against...)
	// -o may replace the records it reads (written to a temp file, renamed
	// at the end: dedup -o in in keeps in's first occurrences); --record
	// and --duplicates may not: an index, or the records -o does not keep.
	var out, dups *stream
	if !o.check {
		out = j.stream("-o", o.output, kindRecords)
	}
	if o.duplicates != "" {
		dups = j.stream("--duplicates", o.duplicates)
	}
	j.output("--record", o.record)
	opts.Group = j.grp
	j.progress(opts.Progress)
	j.memory(opts.Plan())
	return j.run(func(ctx context.Context) (map[string]any, error) {
		w := io.Writer(io.Discard)
		if out != nil {
			w = out.writer()
		}
		if dups != nil {
			opts.Duplicates = dups.writer()
		}
		if o.check {
			done, err := spoolStdinForCheck(&opts)
			defer done()
			if err != nil {
				return nil, err
			}
		}
		st, err := pipeline.Dedup(ctx, opts, w)
		figures := map[string]any{"dedup": st, "against": o.against, "record": o.record, "threads": inv.threads}
		if dup := (*pipeline.DuplicateError)(nil); o.check && errors.As(err, &dup) {
			return figures, checkAnswer(ctx, opts, dup)
		}
		dedupSummary(j, o, opts, st)
		return figures, err
	})
}

// dedupModes checks the flags that choose what dedup writes (--emit,
// --keep, --check) and opens --against.
func dedupModes(inv *invocation, o *dedupOptions) (pipeline.DedupOptions, error) {
	opts := pipeline.DedupOptions{Threads: inv.threads, Mem: inv.mem, TmpDir: o.tmpDir, Record: o.record, Progress: &ingest.Progress{}}
	switch o.emit {
	case "first":
	case "duplicates":
		opts.EmitDuplicates = true
	default:
		return opts, usageErrorf("--emit must be first or duplicates, not %q", o.emit)
	}
	switch o.keep {
	case "first":
	case "last":
		opts.KeepLast = true
	default:
		return opts, usageErrorf("--keep must be first or last, not %q", o.keep)
	}
	if o.check && (o.output != "" || o.record != "" || o.duplicates != "" || opts.EmitDuplicates || opts.KeepLast) {
		return opts, usageErrorf("--check writes nothing: no -o, --record, --duplicates, --emit or --keep")
	}
	opts.Check = o.check
	if len(o.against) > 0 {
		set, err := openSet(o.against, inv.indexOptions()...)
		if err != nil {
			return opts, err
		}
		opts.Against = set
	}
	return opts, nil
}

// dedupRecords resolves how records are read and hashed: the --against
// index's hash, and its key recipe for each record flag not given.
func dedupRecords(j *job, o *dedupOptions, opts *pipeline.DedupOptions) error {
	hashName := o.hash
	if opts.Against != nil {
		if hashName != "" && hashName != opts.Against.Spec().Hash {
			return fmt.Errorf("%w: --hash %s, but %s holds %s fingerprints; drop --hash or rebuild the index with --hash %s",
				fpstore.ErrSpecMismatch, hashName, o.against[0], opts.Against.Spec().Hash, hashName)
		}
		hashName = opts.Against.Spec().Hash
	}
	if hashName == "" {
		hashName = "xxh3"
	}
	h, err := ingest.ParseHash(hashName)
	if err != nil {
		return usageErrorf("--hash: %v", err)
	}
	// Records are read as the --against index was built, flag by flag:
	// each record flag the command line sets wins, each other comes from
	// the index; then the recipes must agree.
	var against []ingest.IndexRecipe
	fp := o.records.format == "fp"
	if opts.Against != nil && !fp {
		against = indexRecipes(opts.Against)
	}
	if opts.Records, err = o.records.reading(j, h, against, false, true); err != nil {
		return err
	}
	opts.RecordSpec = ingest.Recipe(opts.Records)
	if fp {
		// Bare fingerprints say neither their hash nor their key: what
		// --record publishes is labelled as the --against index is.
		switch {
		case opts.Against != nil:
			opts.RecordSpec = opts.Against.Spec()
		case o.record != "":
			return usageErrorf("--record of --format fp needs --against: fingerprints do not say their hash and key recipe, the index's spec does")
		}
	}
	return nil
}

func dedupSummary(j *job, o *dedupOptions, opts pipeline.DedupOptions, st pipeline.DedupStats) {
	if o.check {
		j.summary("%s --check: %s, every key unique (%s)", j.cmd.Name(), counted(st.Records, "record"), badSummary(opts.Records.OnBad))
		return
	}
	j.summary("dedup: %s, %d first occurrences, %d duplicates, %d in --against, %s, %d written, %s read, %.2f s, %s records/s (mode %s, seen-set %s)",
		counted(st.Records, "record"), st.FirstOccurrences, st.Duplicates, st.InAgainst, badSummary(opts.Records.OnBad), st.Emitted, units.FormatBytes(st.Bytes), st.Seconds,
		humanRate(float64(st.Records)/max(st.Seconds, 1e-9)), st.Mode, units.FormatBytes(st.TableBytes))
	if st.Mode == "lsm" {
		j.summary("dedup: bounded mode: %d runs on disk, bloom %s: %d of %d probes answered by the bloom alone, false positives %.4f%% measured at the final fill vs %.4f%% by the blocked-bloom formula",
			st.Runs, units.FormatBytes(st.BloomBytes), st.FilterAnswered, st.FilterProbes, 100*st.FilterFPRMeasured, 100*st.FilterFPRFormula)
	}
}

// spoolStdinForCheck copies stdin, as --check reads it, to a scratch file
// in --tmpdir, so that the line of a repeated key's first occurrence can be
// found afterwards (checkAnswer).
func spoolStdinForCheck(opts *pipeline.DedupOptions) (done func(), err error) {
	done = func() {}
	if !slices.Contains(opts.Inputs, "-") && len(opts.Inputs) > 0 {
		return done, nil
	}
	d, err := tempfile.MkDir(opts.TmpDir)
	if err != nil {
		return done, fmt.Errorf("--tmpdir %s: cannot spool stdin: %w", opts.TmpDir, err)
	}
	f, err := os.Create(filepath.Join(d.Path, "stdin"))
	if err != nil {
		d.Remove()
		return done, fmt.Errorf("--tmpdir %s: cannot spool stdin: %w", opts.TmpDir, err)
	}
	opts.Spool = f
	return func() { f.Close(); d.Remove() }, nil
}

// checkAnswer is --check's negative answer: the repeat, and where its key
// first occurred (read again up to it; stdin from its spool).
func checkAnswer(ctx context.Context, opts pipeline.DedupOptions, dup *pipeline.DuplicateError) error {
	if f, ok := opts.Spool.(*os.File); ok {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		opts.Stdin, opts.Spool = f, nil
	}
	if err := pipeline.FindFirst(ctx, opts, dup); err != nil {
		return err
	}
	if dup.InAgainst {
		return negativeAnswer{fmt.Sprintf("%s:%d: record %d: its key is already in --against", dup.Name, dup.Line, dup.Record)}
	}
	return negativeAnswer{dup.Error()}
}
