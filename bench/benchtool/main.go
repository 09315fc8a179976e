// Command benchtool is the Go half of the bench/ scripts: it generates event
// files without the fpdedup CLI (so peers can be measured before, and
// independently of, the tool under test) and turns hyperfine's JSON into the
// markdown report. Shell is kept to running commands; anything that parses
// or computes lives here, where it is tested.
//
//	benchtool gen [--records N] [--seed S] [--repeat F] [--far F] [--format lines|csv|jsonl] [-o FILE] [--stats] [--plan]
//	benchtool fp [--seed S] [--from I] [--count N] [-o FILE]
//	benchtool rss -o FILE [--every 10ms] -- COMMAND [ARG...]
//	benchtool report --meta FILE --rows FILE [--hyperfine JOB=FILE]... [--anon FILE] [--inspect FILE] [--md OUT] [--json OUT]
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/bench/gen"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = genMain(os.Args[2:], os.Stdout, os.Stderr)
	case "fp":
		err = fpMain(os.Args[2:], os.Stdout, os.Stderr)
	case "rss":
		rssExit(os.Args[2:])
	case "report":
		err = reportMain(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtool gen|fp|rss|report [flags] (see -h of each)")
	os.Exit(2)
}

// parseCount reads a record count, with the k/M/G suffixes every fpdedup
// count takes (DESIGN section 4).
func parseCount(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return n * mult, nil
}

// countFlag is a flag.Value for counts with suffixes.
type countFlag int64

func (c *countFlag) String() string { return strconv.FormatInt(int64(*c), 10) }
func (c *countFlag) Set(s string) error {
	n, err := parseCount(s)
	*c = countFlag(n)
	return err
}

func genMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	records := countFlag(1_000_000)
	fs.Var(&records, "records", "records to write (k/M/G suffixes)")
	seed := fs.Uint64("seed", 1, "seed: same seed, same bytes")
	repeat := fs.Float64("repeat", gen.DefaultRepeat, "fraction of records that repeat an earlier one")
	far := fs.Float64("far", gen.DefaultFar, "fraction of repeats copied from anywhere earlier, not the last ~1000")
	format := fs.String("format", gen.DefaultFormat, "lines, csv or jsonl")
	out := fs.String("o", "-", "output file, - for stdout")
	stats := fs.Bool("stats", false, "print the stats as JSON on stderr")
	plan := fs.Bool("plan", false, "write nothing; print records, distinct and bytes as JSON on stdout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("gen: unexpected argument %q", fs.Arg(0))
	}
	o := gen.Options{
		Records: int64(records), Seed: *seed, Format: *format,
		// On the command line 0 means none; in GenOptions it means the
		// default, and none is negative.
		Repeat: literal(*repeat), Far: literal(*far),
	}
	if *plan {
		st, err := gen.Generate(io.Discard, o)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(statsJSON(st))
	}

	w, commit, err := create(*out, stdout)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	st, err := gen.Generate(bw, o)
	if err == nil {
		err = bw.Flush()
	}
	if err = commit(err); err != nil {
		return err
	}
	if *stats {
		return json.NewEncoder(stderr).Encode(statsJSON(st))
	}
	return nil
}

func literal(f float64) float64 {
	if f == 0 {
		return -1
	}
	return f
}

func statsJSON(st gen.Stats) map[string]int64 {
	return map[string]int64{"records": st.Records, "distinct": st.Distinct, "bytes": st.Bytes}
}

// create opens the output; commit closes it, and on failure removes a
// partly written file so no half file is taken for data.
func create(name string, stdout io.Writer) (io.Writer, func(error) error, error) {
	if name == "-" {
		return stdout, func(err error) error { return err }, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, nil, err
	}
	return f, func(err error) error {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
		}
		return err
	}, nil
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func reportMain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	metaPath := fs.String("meta", "", "KEY=VALUE lines about the run")
	rowsPath := fs.String("rows", "", "TSV: job, name, status, rss_kb, answer, command")
	var hf multiFlag
	fs.Var(&hf, "hyperfine", "JOB=FILE: hyperfine --export-json of that job (repeatable)")
	inspectPath := fs.String("inspect", "", "output of fpdedup inspect --json, if any")
	anonPath := fs.String("anon", "", "TSV: job, name, sampled peak anonymous RSS in KiB (benchtool rss)")
	peersPath := fs.String("peers", "", "output of peers.sh --check, if any")
	mdPath := fs.String("md", "", "also write the markdown here")
	jsonPath := fs.String("json", "", "write the raw JSON here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *metaPath == "" || *rowsPath == "" {
		return errors.New("report: --meta and --rows are required")
	}
	in := reportInput{Hyperfine: map[string]json.RawMessage{}}
	var err error
	if in.Meta, err = readMeta(*metaPath); err != nil {
		return err
	}
	if in.Rows, err = readRows(*rowsPath); err != nil {
		return err
	}
	if *anonPath != "" {
		if in.AnonKB, err = readAnon(*anonPath); err != nil {
			return err
		}
	}
	for _, h := range hf {
		job, file, ok := strings.Cut(h, "=")
		if !ok {
			return fmt.Errorf("report: --hyperfine %q: want JOB=FILE", h)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		in.Hyperfine[job] = b
	}
	if *inspectPath != "" {
		// A missing or empty file means inspect failed or never ran:
		// the report says so rather than failing.
		if b, err := os.ReadFile(*inspectPath); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			in.Inspect = b
		}
	}
	if *peersPath != "" {
		if b, err := os.ReadFile(*peersPath); err == nil {
			in.Peers = string(b)
		}
	}
	rep, err := buildReport(in)
	if err != nil {
		return err
	}
	md := rep.markdown()
	if *mdPath != "" {
		if err := os.WriteFile(*mdPath, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if *jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	_, err = io.WriteString(stdout, md)
	return err
}
