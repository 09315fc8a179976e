package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/units"
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
	output       string // --output-format, for the commands that write rows
	// printsRows: the command prints each record on a line (count,
	// query), a Parquet row as its key text, which -z ends with NUL.
	printsRows bool
}

func (r *recordFlags) add(f *pflag.FlagSet, formats string) {
	f.StringVar(&r.format, "format", "lines", "record format: "+formats)
	f.StringSliceVar(&r.keys, "key", nil, "key fields, comma-separated or repeated: csv/tsv column numbers (1-based) or header names, jsonl field paths (a.b nests), parquet column paths (a.b into groups) or 1-based leaf numbers")
	f.StringVar(&r.keySep, "key-sep", ":", "joins the key fields (user_id:device_id:timestamp_ms, as online)")
	f.BoolVar(&r.header, "header", false, "csv/tsv: the first record of each input is a header: it names columns and is not a record")
	zHelp := "lines format: records end with NUL, not newline"
	if r.printsRows {
		zHelp += "; parquet: each row printed ends with NUL"
	}
	f.BoolVarP(&r.nul, "zero-terminated", "z", false, zHelp)
	f.StringVar(&r.onBad, "on-bad", "fail", "a bad record: fail (exit 2), skip (count it), or quarantine=FILE (write it there: its bytes, or a Parquet row as a row of its file)")
	f.StringVar(&r.maxRecord, "max-record", "64MiB", "a record longer than this size is bad (0: the longest --mem holds, an eighth of it, at most 1GiB); bounds memory when a csv quote is never closed; the default is lowered to an eighth of --mem")
}

// addOutput adds --output-format, which says how the rows of Parquet
// records are written to what names.
func (r *recordFlags) addOutput(f *pflag.FlagSet, what string) {
	f.StringVar(&r.output, "output-format", "", "write the rows of Parquet records to "+what+" as csv or tsv (a header of column paths, then a line a row; NULL an empty field, which reads back as an empty key) or jsonl (an object a row; NULL null); default: Parquet, the first input's schema")
}

// rowFormat is --output-format.
func (r *recordFlags) rowFormat() (ingest.RowFormat, error) {
	f, err := ingest.ParseRowFormat(r.output)
	if err != nil {
		return f, usageErrorf("--output-format: %v", err)
	}
	return f, nil
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
	return givenParts(f) != ingest.RecipeParts{}
}

// givenParts says which parts of the key recipe the command line set.
func givenParts(f *pflag.FlagSet) ingest.RecipeParts {
	return ingest.RecipeParts{Format: f.Changed("format"), Keys: f.Changed("key"), Sep: f.Changed("key-sep"), Header: f.Changed("header")}
}

// request is the record flags as a recipe request, not yet completed
// from an index nor validated (ingest.ResolveRecipe does both); hexOK
// allows --format fp (build), which reads fingerprints as lines.
func (r *recordFlags) request(f *pflag.FlagSet, hexOK bool) (req ingest.RecipeRequest, hex bool, err error) {
	format := r.format
	if format == "fp" {
		if !hexOK {
			return req, false, usageErrorf("--format fp is for build and dedup (query has --fp)")
		}
		if len(r.keys) > 0 || r.header {
			return req, false, usageErrorf("--format fp reads fingerprints: no --key or --header")
		}
		format, hex = "lines", true
	}
	fm, err := ingest.ParseFormat(format)
	if err != nil {
		return req, hex, usageErrorf("--format: %v", err)
	}
	req.Spec = ingest.KeySpec{Format: fm, Keys: r.keys, Sep: r.keySep, Header: r.header, Term: '\n'}
	if r.nul {
		if err := r.zeroTerminated(fm); err != nil {
			return req, hex, err
		}
		req.Spec.Term = 0
	}
	req.Given, req.Assume = givenParts(f), r.assumeRecipe
	return req, hex, nil
}

// zeroTerminated checks -z against the records' format f: NUL ends a
// record of the lines format, and the line of a Parquet row that count
// or query prints; csv, tsv and jsonl records end with newlines, and a
// Parquet row that no line prints has no end to change.
func (r *recordFlags) zeroTerminated(f ingest.Format) error {
	switch {
	case !r.nul || f == ingest.FormatLines || f == ingest.FormatParquet && r.printsRows:
		return nil
	case f == ingest.FormatParquet:
		return usageErrorf("-z ends the lines count and query print: this command prints no Parquet row on a line")
	}
	return usageErrorf("-z is for the lines format: csv, tsv and jsonl records end with newlines")
}

// sniff reads the format of the record files from their bytes when no
// --format is given: Parquet files (PAR1 and a Thrift field at the start)
// are read as Parquet, as if --format parquet were given; so is standard
// input when it is a file (< events.parquet), looked into without moving
// its offset. A pipe cannot be looked into without being read: it needs
// --format parquet (hintFor says so). An input that cannot be looked into
// (missing, a directory) leaves the others to decide; when none is
// Parquet and the records are keyed, its error is the run's, not the
// lines format's refusal of --key.
func (r *recordFlags) sniff(j *job, req *ingest.RecipeRequest) error {
	if req.Given.Format {
		return nil
	}
	var parquet, other string
	var unread error
	note := func(name string, is bool, err error) {
		switch {
		case err != nil:
			if unread == nil {
				unread = err
			}
		case is && parquet == "":
			parquet = name
		case !is && other == "":
			other = name
		}
	}
	if f, ok := j.inv.stdin.(*os.File); ok && j.paths.stdinRecords {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			is, err := ingest.IsParquet(f)
			note("standard input", is, err)
		}
	}
	for _, in := range j.paths.inputs {
		if in.kind != kindRecords {
			continue
		}
		is, err := ingest.IsParquetFile(in.path)
		note(in.path, is, err)
	}
	switch {
	case parquet != "" && other != "":
		return usageErrorf("%s is a Parquet file and %s is not: the inputs of one run share one format", parquet, other)
	case parquet != "":
		req.Spec.Format, req.Given.Format = ingest.FormatParquet, true
	case unread != nil && len(req.Spec.Keys) > 0:
		return unread
	}
	return nil
}

// maxRecordBytes is --max-record under a --mem of mem. A record is held
// whole, twice while its buffer grows, so the longest one --mem holds is an
// eighth of it (a quarter of --mem for the buffers); the default, 64MiB, is
// lowered to that, and 0 means it. A longer one given is refused before any
// work.
func (r *recordFlags) maxRecordBytes(f *pflag.FlagSet, mem int64) (int, error) {
	limit := min(int64(ingest.MaxRecordLimit), memplan.RecordLimit(mem))
	mr, err := units.ParseSize(r.maxRecord)
	if err != nil {
		return 0, usageErrorf("--max-record: %v", err)
	}
	switch {
	case !f.Changed("max-record"):
		return int(min(mr, limit)), nil
	case mr > ingest.MaxRecordLimit:
		return 0, usageErrorf("--max-record %s: at most 1GiB, the longest record fpdedup reads (0 means the longest --mem allows)", r.maxRecord)
	case mr > limit:
		return 0, usageErrorf("--max-record %s needs --mem %s or more: a record is held whole, twice while it is read, within a quarter of --mem", r.maxRecord, units.FormatBytes(memplan.MemForRecord(mr)))
	case mr == 0:
		return int(limit), nil
	}
	return int(mr), nil
}

// reading is how job j reads its records: the flags resolved (by
// ingest.ResolveRecipe, against the indexes the records are read against,
// if any), hashed with hash; a quarantine becomes one of j's outputs. A
// recipe other than the indexes' is refused, or with --assume-recipe used
// with a warning.
func (r *recordFlags) reading(j *job, hash ingest.Hash, against []ingest.IndexRecipe, linesAreKeys, hexOK bool) (ingest.RecordOptions, error) {
	o := ingest.RecordOptions{Hash: hash}
	req, hex, err := r.request(j.cmd.Flags(), hexOK)
	if err != nil {
		return o, err
	}
	req.LinesAreKeys = linesAreKeys
	if err := r.sniff(j, &req); err != nil {
		return o, err
	}
	spec, warnings, err := ingest.ResolveRecipe(req, against)
	if se := (*ingest.SpecError)(nil); errors.As(err, &se) {
		return o, usageErrorf("%s", say(se.Err))
	}
	if err != nil {
		return o, err
	}
	if spec.Format == ingest.FormatParquet {
		// Found by its magic, or taken from an index, after -z was read.
		if err := r.zeroTerminated(spec.Format); err != nil {
			return o, err
		}
	}
	for _, w := range warnings {
		fmt.Fprintln(j.inv.stderr, "fpdedup: warning:", w, "(--assume-recipe)")
	}
	o.Spec, o.HexInput = spec, hex
	if o.Rows, err = r.rowFormat(); err != nil {
		return o, err
	}
	if err := o.Rows.ForRecords(spec.Format); err != nil {
		return o, usageErrorf("%s", err)
	}
	if o.OnBad, err = ingest.ParseOnBad(r.onBad); err != nil {
		return o, usageErrorf("%s", say(err))
	}
	o.OnBad.WritesRows(o.Rows)
	j.records(o.OnBad)
	o.MaxRecord, err = r.maxRecordBytes(j.cmd.Flags(), j.inv.mem)
	return o, err
}

// indexRecipes are the indexes of set, as records are read against them.
func indexRecipes(set *fpstore.Set) []ingest.IndexRecipe {
	var rs []ingest.IndexRecipe
	for _, x := range set.Indexes() {
		rs = append(rs, ingest.IndexRecipe{Path: x.Path(), Spec: x.Spec()})
	}
	return rs
}
