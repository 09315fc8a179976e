package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/pipeline"
)

// recordFlags are how build, query and dedup read records and their keys,
// so one record gives one fingerprint in all three.
type recordFlags struct {
	format       string
	keys         []string
	keySep       string
	header       bool
	nul          bool
	onBad        string
	maxRecord    string
	assumeRecipe bool
}

func (r *recordFlags) add(f *pflag.FlagSet, formats string) {
	f.StringVar(&r.format, "format", "lines", "record format: "+formats)
	f.StringSliceVar(&r.keys, "key", nil, "key fields, comma-separated or repeated: csv/tsv column numbers (1-based) or header names, jsonl field paths (a.b nests)")
	f.StringVar(&r.keySep, "key-sep", ":", "joins the key fields (user_id:device_id:timestamp_ms, as online)")
	f.BoolVar(&r.header, "header", false, "csv/tsv: the first record of each input is a header: it names columns and is not a record")
	f.BoolVarP(&r.nul, "zero-terminated", "z", false, "lines format: records end with NUL, not newline")
	f.StringVar(&r.onBad, "on-bad", "fail", "a bad record: fail (exit 2), skip (count it), or quarantine=FILE (write it there)")
	f.StringVar(&r.maxRecord, "max-record", "64MiB", "a record longer than this size is bad (0: no limit); bounds memory when a csv quote is never closed")
}

// quarantinePath is the FILE of an --on-bad quarantine=FILE value, for the
// output checks before the value is parsed.
func quarantinePath(onBad string) string {
	path, _ := strings.CutPrefix(onBad, "quarantine=")
	if path == onBad {
		return ""
	}
	return path
}

// given reports whether any record flag was set on the command line.
func (r *recordFlags) given(f *pflag.FlagSet) bool {
	for _, n := range []string{"format", "key", "key-sep", "header"} {
		if f.Changed(n) {
			return true
		}
	}
	return false
}

// options resolves the flags; hexOK allows --format fp.
func (r *recordFlags) options(hash ingest.Hash, hexOK bool) (ingest.RecordOptions, error) {
	var o ingest.RecordOptions
	o.Hash = hash
	if r.format == "fp" {
		if !hexOK {
			return o, usageErrorf("--format fp is only for build (query has --fp)")
		}
		if len(r.keys) > 0 || r.header {
			return o, usageErrorf("--format fp reads fingerprints: no --key or --header")
		}
		o.HexInput = true
		r.format = "lines"
	}
	f, err := ingest.ParseFormat(r.format)
	if err != nil {
		return o, usageErrorf("--format: %v", err)
	}
	o.Spec = ingest.KeySpec{Format: f, Keys: r.keys, Sep: r.keySep, Header: r.header, Term: '\n'}
	if r.nul {
		if f != ingest.FormatLines {
			return o, usageErrorf("-z is for the lines format: csv, tsv and jsonl records end with newlines")
		}
		o.Spec.Term = 0
	}
	if err := o.Spec.Validate(); err != nil {
		return o, usageErrorf("%v", err)
	}
	if o.OnBad, err = ingest.ParseOnBad(r.onBad); err != nil {
		return o, usageErrorf("%v", err)
	}
	mr, err := units.ParseSize(r.maxRecord)
	if err != nil {
		return o, usageErrorf("--max-record: %v", err)
	}
	o.MaxRecord = int(mr)
	return o, nil
}

// recipe is the key recipe an index records for these options.
func recipe(hash ingest.Hash, o ingest.RecordOptions) fpstore.Spec {
	o.Hash = hash
	return pipeline.Recipe(o)
}

// adoptUnset completes the record flags with the key recipe of the index
// at path, with spec s: each of --format, --key, --key-sep and --header
// the command line set wins, each one it did not set comes from the index
// (pipeline.AdoptRecipe). The caller then checks the recipes agree
// (checkRecipe), so a flag set otherwise than the index's is refused
// unless --assume-recipe.
func (r *recordFlags) adoptUnset(f *pflag.FlagSet, path string, s fpstore.Spec) error {
	return r.adopt(givenParts(f), path, s)
}

// givenParts says which parts of the key recipe the command line set.
func givenParts(f *pflag.FlagSet) pipeline.RecipeParts {
	return pipeline.RecipeParts{Format: f.Changed("format"), Keys: f.Changed("key"), Sep: f.Changed("key-sep"), Header: f.Changed("header")}
}

// keySpec is the flags' key spec as given, not yet completed from an index
// nor validated (reconcile does both once it has opened the index), and
// the --max-record limit.
func (r *recordFlags) keySpec() (ingest.KeySpec, int, error) {
	if r.format == "fp" {
		return ingest.KeySpec{}, 0, usageErrorf("--format fp is only for build")
	}
	f, err := ingest.ParseFormat(r.format)
	if err != nil {
		return ingest.KeySpec{}, 0, usageErrorf("--format: %v", err)
	}
	spec := ingest.KeySpec{Format: f, Keys: r.keys, Sep: r.keySep, Header: r.header, Term: '\n'}
	if r.nul {
		if f != ingest.FormatLines {
			return spec, 0, usageErrorf("-z is for the lines format: csv, tsv and jsonl records end with newlines")
		}
		spec.Term = 0
	}
	mr, err := units.ParseSize(r.maxRecord)
	if err != nil {
		return spec, 0, usageErrorf("--max-record: %v", err)
	}
	return spec, int(mr), nil
}

func (r *recordFlags) adopt(given pipeline.RecipeParts, path string, s fpstore.Spec) error {
	format, err := ingest.ParseFormat(r.format)
	if err != nil {
		return nil // --format fp, or a bad one: options() says which
	}
	mine := ingest.KeySpec{Format: format, Keys: r.keys, Sep: r.keySep, Header: r.header}
	spec, err := pipeline.AdoptRecipe(s, mine, given)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	r.format, r.keys, r.keySep, r.header = spec.Format.String(), spec.Keys, spec.Sep, spec.Header
	return nil
}

// checkRecipe refuses to read records into fingerprints that would not
// match an index's: a different key list or separator would make every
// answer silently wrong. --assume-recipe overrides it, with a warning.
func checkRecipe(inv *invocation, path string, idx fpstore.Spec, mine fpstore.Spec, assume bool) error {
	err := pipeline.CheckRecipe(path, idx, mine)
	if err == nil {
		return nil
	}
	if assume {
		fmt.Fprintln(inv.stderr, "fpdedup: warning:", err, "(--assume-recipe)")
		return nil
	}
	return err // say words it with the flags
}
