package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/pipeline"
)

type queryOptions struct {
	indexes []string
	fp      bool
	only    string
	count   bool
	json    bool
	records recordFlags
}

func newQueryCommand(inv *invocation) *cobra.Command {
	o := &queryOptions{}
	cmd := &cobra.Command{
		Use:   "query IDX [KEY...] | query --index IDX... [KEY...]",
		Short: "Say which keys an index holds",
		Long: `Query looks up each KEY (from the arguments, or one per line on stdin; a lone
"-" reads stdin too) in the index IDX, or in the set of --index indexes (answered
as if merged; then IDX is not given and every argument is a key), and prints
present<TAB>KEY or absent<TAB>KEY, in input order. A key "-" itself is queried
through stdin, or by its fingerprint with --fp.

Keys are hashed with the index's own hash, byte for byte (a \r or a BOM is part
of the key). --fp reads 32-digit hex fingerprints instead.

Records: with no --format, --key, --key-sep or --header each line of stdin is
a key. With any of them stdin holds records, keyed as the index was: each of
these flags given wins, each one not given comes from the index's recorded
recipe (format, key fields, separator; a header when csv/tsv fields are
named), so --format csv --header alone reads a csv index's records. The
recipes must then agree: other columns (compared as the header or the
Parquet schema resolves them: --key 1 is --key user_id where column 1 is
user_id) or another separator are refused unless --assume-recipe.
--format lines reads whole lines as keys. KEY arguments are always keys
(joined key fields), never records or files: with --format parquet, whose
rows come only from stdin, they are refused. A Parquet row is printed as
its key text with a backslash, TAB, LF, CR and NUL written \\, \t, \n, \r
and \0, so that its answer is one line (in --json, "key" holds its bytes).

--json prints one JSON object a line (JSON Lines, ended by a newline even
with -z), in input order:
  {"key":"u1:d1:1700000000000","fingerprint":"f8cfd8db0cd421ff2e467260fc3bfc2b","present":true}
"key" is the key's bytes as a JSON string when they are valid UTF-8 (a \r, a
NUL and other control bytes escaped as JSON does: \r, \u0000), else
"key_base64" holds them in standard padded base64, so every key comes back
byte for byte. With --fp the key is the hex as given. Records keyed by
fields (--format csv, tsv, jsonl) add the record they were read from, without
its line end, as "record" (or "record_base64") after the key. The
fingerprint is 32 lowercase hex digits; "present" is true or false.

Exit codes: 0 every key is present; 1 some key is absent; 2 error (a damaged
page that a lookup touches is an error, never a wrong "absent"); 130/143
interrupted; 141 the reader closed the pipe. The exit code does not depend on
--only, --count or --json.`,
		Example: `  fpdedup query day.fpx 'u1:d1:1700000000000' && echo seen
  fpdedup query --only absent day.fpx < keys.txt > new-keys.txt
  fpdedup query --count --index day1.fpx --index day2.fpx < keys.txt
  printf %s KEY | xxh128sum | cut -c1-32 | fpdedup query --fp day.fpx
  zcat day.csv.gz | fpdedup query --json --format csv --header truth.fpx -`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQuery(cmd, inv, o, args)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.indexes, "index", nil, "an index of the set, instead of IDX (repeatable; every argument is then a key)")
	f.BoolVar(&o.fp, "fp", false, "keys are hex fingerprints")
	f.StringVar(&o.only, "only", "", "print only the present or absent keys, verbatim")
	f.BoolVar(&o.count, "count", false, "print only the counts: present<TAB>N and absent<TAB>M")
	f.BoolVar(&o.json, "json", false, `one JSON object a line: "key" (or "key_base64"), "fingerprint", "present" (and "record" for csv/tsv/jsonl records)`)
	o.records.printsRows = true
	o.records.add(f, "lines (each line is a key), csv, tsv, jsonl or parquet (records, keyed by --key); when only other record flags are given, the index's own format")
	f.BoolVar(&o.records.assumeRecipe, "assume-recipe", false, "read records with another --key/--key-sep than the index's, with a warning")
	return cmd
}

func runQuery(cmd *cobra.Command, inv *invocation, o *queryOptions, args []string) error {
	paths, args, err := queryArgs(o, args)
	if err != nil {
		return err
	}
	opts, err := queryOutput(o)
	if err != nil {
		return err
	}
	if o.fp && o.records.given(cmd.Flags()) {
		return usageErrorf("--fp reads hex fingerprints: no --format/--key/--key-sep/--header")
	}
	if len(args) > 0 && o.records.format == "parquet" {
		// A KEY argument is a key, never a file, and no argument is a
		// Parquet row: "query --format parquet IDX f.parquet" would
		// query the name.
		return usageErrorf("--format parquet reads rows from standard input (fpdedup query --format parquet IDX < %s): KEY arguments are keys, never files; without --format they are queried as keys", args[0])
	}
	plan := memplan.Query(inv.mem)
	set, err := openSet(paths, inv.indexOptions()...)
	if err != nil {
		return err
	}
	set.ShareReadBuffers(plan.ReadBuffers)
	defer set.Close()
	opts.Set = set
	j := inv.job(cmd)
	if err := queryRecords(j, o, &opts); err != nil {
		return err
	}
	j.input("--index", kindIndex, paths...)
	out := j.stream("stdout", "")
	j.answers = true
	if len(args) == 0 {
		j.progress(opts.Progress)
	} else {
		j.lookupsAtMost(len(args))
	}
	j.memory(plan)
	return j.run(func(ctx context.Context) (map[string]any, error) {
		var st pipeline.QueryStats
		var err error
		if len(args) > 0 {
			st, err = pipeline.QueryKeys(opts, args, out.w)
		} else {
			st, err = pipeline.Query(ctx, opts, nil, out.w)
		}
		if err == nil && o.count {
			fmt.Fprintf(out.w, "present\t%d\nabsent\t%d\n", st.Present, st.Absent)
		}
		if err == nil && st.Absent > 0 {
			err = negativeAnswer{}
		}
		return map[string]any{"indexes": paths, "query": st}, err
	})
}

// queryArgs splits the arguments into the indexes and the keys ("-" alone:
// stdin, as nil keys).
func queryArgs(o *queryOptions, args []string) (paths, keys []string, err error) {
	paths = o.indexes
	if len(paths) == 0 {
		if len(args) == 0 {
			return nil, nil, usageErrorf("query needs an index: fpdedup query IDX [KEY...]")
		}
		paths, args = args[:1], args[1:]
	}
	// With --index every argument is a key: a key that happens to name a
	// file is never taken for an index.
	// A lone "-" is stdin, as for other tools; among keys it is ambiguous.
	if len(args) == 1 && args[0] == "-" {
		args = nil
	} else if slices.Contains(args, "-") {
		return nil, nil, usageErrorf(`"-" (stdin) cannot be mixed with KEY arguments; query the key "-" through stdin or --fp`)
	}
	return paths, args, nil
}

// queryOutput is what --only, --count and --json ask to print.
func queryOutput(o *queryOptions) (pipeline.QueryOptions, error) {
	opts := pipeline.QueryOptions{Output: pipeline.QueryAll, Progress: &ingest.Progress{}}
	switch o.only {
	case "":
	case "present":
		opts.Output = pipeline.QueryOnlyPresent
	case "absent":
		opts.Output = pipeline.QueryOnlyAbsent
	default:
		return opts, usageErrorf("--only must be present or absent, not %q", o.only)
	}
	if o.count {
		if o.only != "" {
			return opts, usageErrorf("--count and --only cannot be combined")
		}
		opts.Output = pipeline.QueryCountOnly
	}
	if o.json {
		if o.only != "" || o.count {
			return opts, usageErrorf("--json prints every key: no --only or --count")
		}
		opts.Output = pipeline.QueryJSON
	}
	return opts, nil
}

// queryRecords says how keys are read: plain keys without record flags;
// with some, the others come from the index's recipe, which the records
// must then match; hashed with the index's hash.
func queryRecords(j *job, o *queryOptions, opts *pipeline.QueryOptions) error {
	opts.Threads = j.inv.threads
	set := opts.Set
	h, err := ingest.ParseHash(set.Spec().Hash)
	if err != nil {
		return fmt.Errorf("%s: %w", set.Indexes()[0].Path(), err)
	}
	// Plain keys and --fp need no recipe; records keyed by fields must be
	// keyed as the index was.
	var against []ingest.IndexRecipe
	if o.records.given(j.cmd.Flags()) {
		against = indexRecipes(set)
	}
	if opts.Records, err = o.records.reading(j, h, against, true, false); err != nil {
		return err
	}
	opts.Records.HexInput = o.fp
	return nil
}

// openSet opens indexes as one set.
func openSet(paths []string, opts ...fpstore.Option) (*fpstore.Set, error) {
	var xs []*fpstore.Index
	for _, p := range paths {
		x, err := fpstore.Open(p, opts...)
		if err != nil {
			for _, o := range xs {
				o.Close()
			}
			return nil, err
		}
		xs = append(xs, x)
	}
	set, err := fpstore.NewSet(xs)
	if err != nil {
		for _, o := range xs {
			o.Close()
		}
		return nil, err
	}
	return set, nil
}
