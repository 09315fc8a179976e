package main

import (
	"bufio"
	"os"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench"
)

func newBenchCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks and the deterministic event generator",
	}
	cmd.AddCommand(newBenchGenCommand(g))
	return cmd
}

func newBenchGenCommand(g *globals) *cobra.Command {
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
		Example: `  fpdedup bench gen --records 10M -o events.csv
  fpdedup bench gen --records 1M --format jsonl | zstd > events.jsonl.zst`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseCount(records)
			if err != nil {
				return usageErrorf("--records: %v", err)
			}
			w := g.stdout
			var f *os.File
			if output != "" && output != "-" {
				if f, err = os.Create(output); err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			// GenOptions reads 0 as "the default" and a negative value as
			// "none"; on the command line 0 means none.
			if repeat == 0 {
				repeat = -1
			}
			if far == 0 {
				far = -1
			}
			bw := bufio.NewWriterSize(w, 1<<20)
			st, err := bench.Generate(bw, bench.GenOptions{Records: n, Repeat: repeat, Seed: seed, Format: format, Far: far})
			if err == nil {
				err = bw.Flush()
			}
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					os.Remove(output) // no partial data file
				}
			}
			if err != nil {
				return err
			}
			g.summary("gen: %d records, %d distinct, %s", st.Records, st.Distinct, formatBytes(st.Bytes))
			return g.writeStats(map[string]any{"command": "bench gen", "records": st.Records, "distinct": st.Distinct, "bytes": st.Bytes})
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
