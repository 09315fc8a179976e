package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench"
)

func newReportCommand(e *env) *cobra.Command {
	var out string
	var judge bool
	cmd := &cobra.Command{
		Use:   "report [--out DIR] REPORT.json",
		Short: "Redraw report.md and the charts from a report.json",
		Long: `Report reads a report.json that fpdedup-bench wrote (checked against
bench/schema.json), prints its summary, and draws report.md and the charts
again with this version's code: into the report's own directory, or into
--out DIR with a copy of the report.json. --judge judges the issues' targets
again with this version's goals, into report.json too: for a report written
before a goal it measures was listed.`,
		Example: `  fpdedup-bench report bench/results/2026-12-02/report.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := bench.ReadReport(args[0])
			if err != nil {
				return err
			}
			src := filepath.Dir(args[0])
			if judge {
				rep.Judge()
				if out == "" {
					out = src
				}
				err = rep.Write(out)
			} else if out == "" || sameDir(out, src) {
				out = src
				err = os.WriteFile(filepath.Join(out, "report.md"), []byte(rep.Markdown()), 0o644)
				if err == nil {
					err = rep.WriteCharts(out)
				}
			} else {
				err = rep.Write(out)
			}
			if err != nil {
				return err
			}
			for _, l := range rep.SummaryLines() {
				e.summary("%s", l)
			}
			e.summary("  report: %s", filepath.Join(out, "report.md"))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write report.json, report.md and the charts into `DIR` (default: beside REPORT.json)")
	cmd.Flags().BoolVar(&judge, "judge", false, "judge the issues' targets again with this version's goals (report.json rewritten)")
	return cmd
}

// sameDir says whether two paths name one directory.
func sameDir(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
