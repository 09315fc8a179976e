package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/units"
)

// benchRunnerMoved is what `fpdedup bench` says: the runner that measures
// fpdedup beside its peers is a command of its own, so that the product
// does not link its plotting, font and PDF libraries.
const benchRunnerMoved = `the benchmark runner is a command of its own: fpdedup-bench (make bench builds bin/fpdedup-bench), e.g. fpdedup-bench --quick --peers none; fpdedup gen writes the events`

// newBenchCommand is `fpdedup bench`: only its gen subcommand is left, the
// old name of `fpdedup gen`. Called with anything else (the runner's old
// flags included) it points to fpdedup-bench and exits 2.
func newBenchCommand(inv *invocation) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench gen [flags]",
		Short: "The old name of gen; the benchmark itself is fpdedup-bench",
		Long: `Bench gen is the old name of fpdedup gen, which writes deterministic synthetic
events with an exact distinct count, the data fpdedup is measured on.

The benchmark that measures fpdedup beside its peers (sort -u, awk, DuckDB,
bloom) and writes report.json, report.md and charts is a command of its own,
fpdedup-bench, built by make bench into bin/fpdedup-bench.

Exit codes: fpdedup bench without gen exits 2 and names fpdedup-bench.`,
		Example: `  fpdedup gen --records 10M -o events.txt
  fpdedup-bench --quick --peers none`,
		Args:               cobra.ArbitraryArgs,
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("%s", benchRunnerMoved)
		},
	}
	alias := newGenCommand(inv)
	alias.Short = "The old name of fpdedup gen (still works, says so on stderr)"
	gen := alias.RunE
	alias.RunE = func(cmd *cobra.Command, args []string) error {
		fmt.Fprintln(inv.stderr, "fpdedup: bench gen is now fpdedup gen; this name still works")
		return gen(cmd, args)
	}
	cmd.AddCommand(alias)
	return cmd
}

// newGenCommand is `fpdedup gen`: the deterministic events every
// benchmark and many tests run on.
func newGenCommand(inv *invocation) *cobra.Command {
	var records, format, output string
	var repeat, far float64
	var seed uint64
	cmd := &cobra.Command{
		Use:   "gen [-o FILE]",
		Short: "Write deterministic synthetic events (exact distinct count known)",
		Long: `Gen writes login/payment-like events, user_id,device_id,timestamp_ms,event_type,amount,
as lines, CSV (with a header) or JSONL. A --repeat fraction of records repeat an
earlier one, some recently and some far back; the same seed gives the same bytes.
The summary on stderr gives the exact number of distinct records.`,
		Example: `  fpdedup gen --records 10M -o events.csv
  fpdedup gen --records 1M --format jsonl | zstd > events.jsonl.zst`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := units.ParseCount(records)
			if err != nil {
				return usageErrorf("--records: %v", err)
			}
			j := inv.job(cmd)
			out := j.stream("-o", output)
			// gen.Options reads 0 as "the default" and a negative value as
			// "none"; on the command line 0 means none.
			if repeat == 0 {
				repeat = -1
			}
			if far == 0 {
				far = -1
			}
			return j.run(func(ctx context.Context) (map[string]any, error) {
				st, err := gen.Generate(out.w, gen.Options{Records: n, Repeat: repeat, Seed: seed, Format: format, Far: far})
				j.summary("gen: %s, %d distinct, %s", counted(st.Records, "record"), st.Distinct, units.FormatBytes(st.Bytes))
				return map[string]any{"records": st.Records, "distinct": st.Distinct, "bytes": st.Bytes}, err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&records, "records", "1M", "number of records (k, M, G suffixes)")
	f.StringVar(&format, "format", "lines", "lines, csv or jsonl")
	f.StringVarP(&output, "output", "o", "", "write to FILE (default stdout)")
	f.Float64Var(&repeat, "repeat", 0.38, "fraction of records that repeat an earlier one")
	f.Float64Var(&far, "far", 0.5, "fraction of repeats copied from far back")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	return cmd
}
