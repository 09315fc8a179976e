package bench

import (
	"fmt"
	"strings"
)

// SummaryLines is the short account printed at the end of a run: per job,
// fpdedup's median against the fastest peer; the lookup percentiles, the
// index figures, the capacity estimate, and anything wrong.
func (r *Report) SummaryLines() []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	add("bench: %s records (%s distinct), %d run(s) per row, %s; load %s before, %s after",
		fmtCount(float64(r.Data.Records)), fmtCount(float64(r.Data.Distinct)), r.Options.Runs, fmtDuration(r.Seconds),
		fmtLoad(r.Machine.LoadBefore), fmtLoad(r.Machine.LoadAfter))
	width := 0
	for _, j := range r.Jobs {
		width = max(width, len(j.Name))
	}
	for _, j := range r.Jobs {
		ref := j.ref()
		var b strings.Builder
		fmt.Fprintf(&b, "  %-*s  ", width, j.Name)
		if ref == nil {
			fmt.Fprintf(&b, "%s: %s", j.Reference, rowStatus(j.row(j.Reference)))
		} else {
			fmt.Fprintf(&b, "%s %s (%.0f MB/s)", ref.Tool, fmtSeconds(ref.Median.WallS), ref.MBPerS)
			if best := fastestPeer(&j); best != nil {
				fmt.Fprintf(&b, ", %s than %s (%s)", fasterBy(best.Ratio), best.Tool, fmtSeconds(best.Median.WallS))
			}
		}
		missing := 0
		for _, row := range j.Rows {
			if row.Status == "missing" {
				missing++
			}
		}
		if missing > 0 {
			fmt.Fprintf(&b, "; %d missing", missing)
		}
		out = append(out, b.String())
	}
	if lk := r.Lookup; lk != nil && lk.Warm.Present != nil {
		s := fmt.Sprintf("  lookup: warm p50 %s p99.9 %s", fmtNs(lk.Warm.Present.P50Ns), fmtNs(lk.Warm.Present.P999Ns))
		if lk.Cold.Present != nil {
			s += fmt.Sprintf("; cold p50 %s p99.9 %s", fmtNs(lk.Cold.Present.P50Ns), fmtNs(lk.Cold.Present.P999Ns))
		} else {
			s += "; cold " + lk.Cold.Status
		}
		out = append(out, s)
	}
	if x := r.Index; x != nil {
		add("  index: %.2f bytes/key; filter FPR %.3f%% measured vs %.3f%% theory", x.BytesPerKey, 100*x.FilterFPRMeasured, 100*x.FilterFPRTheory)
	}
	if bf := r.Bounded; bf != nil && bf.Status == "ok" {
		add("  dedup --mem %s: bloom FPR %.4f%% measured vs %.4f%% formula", bf.Mem, 100*bf.FilterFPRMeasured, 100*bf.FilterFPRFormula)
	}
	if m := r.Memory; m != nil {
		add("  mem: largest excess of anonymous memory over --mem %.1f MiB (%d commands × %d --mem)", float64(m.WorstOverBytes)/(1<<20), len(m.Rows)/max(len(r.Options.MemSweep), 1), len(r.Options.MemSweep))
	}
	if c := r.Capacity; c != nil {
		for _, s := range c.Steps {
			if s.Job == "build" || s.Job == "dedup-zstd" {
				add("  %s a day, %s (%s input): %.1f h on this machine, %d machine(s) flat out, %d at 50%% load",
					siBytes(c.VolumeBytes), s.Job, s.Input, s.HoursOnThisMachine, s.Machines, s.MachinesHalfLoad)
			}
		}
	}
	met, missed, unknown := 0, 0, 0
	for _, t := range r.Targets {
		switch {
		case t.Met == nil:
			unknown++
		case *t.Met:
			met++
		default:
			missed++
		}
	}
	if len(r.Targets) > 0 {
		add("  targets of the issues: %d met, %d not met, %d not measured (report.md lists them)", met, missed, unknown)
	}
	if m := r.Memory; m != nil {
		for _, row := range m.Rows {
			if row.Status != "ok" {
				add("  FAILED: mem: %s --mem %s: %s", row.Command, row.Mem, row.Why)
			}
		}
	}
	for _, j := range r.Jobs {
		for _, row := range j.Rows {
			if row.CheckOK != nil && !*row.CheckOK {
				add("  WRONG: %s: %s: %s", j.Name, row.Tool, row.Check)
			}
			switch row.Status {
			case "failed":
				add("  FAILED: %s: %s: %s", j.Name, row.Tool, row.Why)
			case "gave up":
				add("  gave up under its limit (how it fares): %s: %s: %s", j.Name, row.Tool, row.Why)
			}
		}
	}
	return out
}

// Problems counts rows that failed or gave a wrong answer, and commands
// of the mem job past their stated bound: a run with any is not a
// benchmark to publish. (A command that refused a --mem too small for it
// did as it should.)
func (r *Report) Problems() int {
	n := 0
	for _, j := range r.Jobs {
		for _, row := range j.Rows {
			if row.Status == "failed" || row.CheckOK != nil && !*row.CheckOK {
				n++
			}
		}
	}
	if r.Memory != nil {
		for _, row := range r.Memory.Rows {
			if row.Status == "failed" || row.BoundBytes > 0 && !row.Within {
				n++
			}
		}
	}
	return n
}
