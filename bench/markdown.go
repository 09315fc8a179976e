package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/internal/memplan"
)

// Markdown renders the report as the tables a person reads (report.md).
func (r *Report) Markdown() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	m := r.Machine
	p("# fpdedup bench, %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"))
	p("- **Machine:** %s · %d cores · %s RAM · %s · %s/%s · temp dir %s on %s", m.CPU, m.Cores, fmtGiB(m.RAMBytes), m.Kernel, m.OS, m.Arch, m.TmpDir, m.TmpFS)
	if m.CgroupCPU != "" && m.CgroupCPU != "max 100000" {
		p(" · cgroup cpu.max %s", m.CgroupCPU)
	}
	p("\n- **fpdedup:** %s", m.Fpdedup)
	if m.Commit != "" {
		p(" · source %s", m.Commit)
	}
	p(" · bench built with %s\n", m.GoVersion)
	p("- **Load average** (1, 5, 15 min): %s before, %s after. The machine is shared: other work running at the same time slows every row of a job alike (their runs are interleaved), so ratios hold better than absolute times.\n",
		fmtLoad(m.LoadBefore), fmtLoad(m.LoadAfter))
	d := r.Data
	files := "lines " + fmtMB(d.LinesBytes)
	if d.CSVBytes > 0 {
		files += ", CSV " + fmtMB(d.CSVBytes)
	}
	if d.CSVZstBytes > 0 {
		files += fmt.Sprintf(", CSV.zst %s (%.2f:1)", fmtMB(d.CSVZstBytes), d.ZstdRatio)
	}
	if d.ParquetBytes > 0 {
		files += fmt.Sprintf(", Parquet %s (zstd; row groups of %s rows, the largest %s decoded)", fmtMB(d.ParquetBytes), commas(parquetRowGroup), fmtMB(d.ParquetRowGroupBytes))
	}
	p("- **Data** (`fpdedup gen`, seed %d, %.0f%% repeats): %s records, %s distinct; %s; %.1f bytes a record.\n",
		r.Options.Seed, 100*r.Options.Repeat, commas(d.Records), commas(d.Distinct), files, d.BytesPerRecord)
	warm := "no warm-up run"
	if r.Options.WarmUp {
		warm = "one untimed warm-up run (it is also the checked run)"
	}
	quick := ""
	if r.Options.Quick {
		quick = " **--quick**: fewer records, one run, fewer lookups: indicative only."
	}
	p("- **Method:** whole processes, %s, then %d timed run(s) of each row in turn (row 1, row 2, …, then again), medians. CPU = user + sys (wait4); peak RSS = the largest resident set among the process and its children, by %s; for fpdedup, its own sampled peak of anonymous memory in parentheses. stdout drains through a pipe into the bench and is counted and checked; LC_ALL=C. *ratio* = the row's wall time / fpdedup's (above 1: slower than fpdedup). Peers run with their defaults on all cores.%s\n",
		warm, r.Options.Runs, m.RSSMeter, quick)
	p("- **Whole run:** %s.\n\n", fmtDuration(r.Seconds))

	p("## Summary\n\n")
	p("| job | fpdedup | wall | fastest peer | its wall | fpdedup is |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, j := range r.Jobs {
		ref := j.ref()
		if ref == nil {
			p("| %s | %s | %s | | | |\n", j.Name, j.Reference, rowStatus(j.row(j.Reference)))
			continue
		}
		best := fastestPeer(&j)
		if best == nil {
			p("| %s | %s | %s | no peer measured | | |\n", j.Name, ref.Tool, fmtSeconds(ref.Median.WallS))
			continue
		}
		p("| %s | %s | %s | %s | %s | %s |\n", j.Name, cell(ref.Tool), fmtSeconds(ref.Median.WallS), cell(best.Tool), fmtSeconds(best.Median.WallS), fasterBy(best.Ratio))
	}
	if lk := r.Lookup; lk != nil && lk.Warm.Present != nil {
		p("| lookup | Index.Contains, warm | p50 %s, p99.9 %s | | | |\n", fmtNs(lk.Warm.Present.P50Ns), fmtNs(lk.Warm.Present.P999Ns))
		if lk.Cold.Present != nil {
			p("| lookup | Index.Contains, cold | p50 %s, p99.9 %s | | | |\n", fmtNs(lk.Cold.Present.P50Ns), fmtNs(lk.Cold.Present.P999Ns))
		}
	}
	p("\n")

	for _, j := range r.Jobs {
		p("## %s: %s\n\n", j.Name, j.Title)
		p("Input %s: %s, %s %s.\n\n", j.Input, fmtMB(j.InputBytes), commas(j.Units), j.Unit)
		p("| tool | wall (min–max) | CPU | peak RSS | MB/s | %s/s | ratio | check |\n", j.Unit)
		p("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, row := range j.Rows {
			name := cell(row.Tool)
			if row.Kind == kindFpdedup {
				name = "**" + name + "**"
			}
			if row.Median == nil {
				p("| %s | %s | | | | | | |\n", name, cell(rowStatus(&row)))
				continue
			}
			s := row.Median
			ratio := ""
			if row.Ratio > 0 {
				ratio = fmt.Sprintf("%.2f", row.Ratio)
			}
			rss := fmtMiB(s.MaxRSS)
			if row.PeakAnon > 0 {
				rss += fmt.Sprintf(" (anon %s)", fmtMiB(row.PeakAnon))
			}
			p("| %s | %s (%s–%s) | %s | %s | %.0f | %s | %s | %s |\n", name, fmtSeconds(s.WallS), fmtSeconds(s.WallMinS), fmtSeconds(s.WallMaxS),
				fmtSeconds(s.CPUS), rss, row.MBPerS, fmtCount(row.UnitsPerS), ratio, checkText(&row))
		}
		p("\n<details><summary>commands</summary>\n\n")
		for _, row := range j.Rows {
			p("- %s: `%s`\n", row.Tool, strings.ReplaceAll(row.Command, "`", "'"))
		}
		p("\n</details>\n\n")
		for _, c := range j.Checks {
			p("- %s\n", c)
		}
		if len(j.Checks) > 0 {
			p("\n")
		}
	}

	r.markdownFigures(&b)
	r.markdownMemory(&b)
	r.markdownScale(&b)
	if len(r.Targets) > 0 {
		p("## Targets of the issues\n\n| issue | goal | measured | met |\n| --- | --- | --- | --- |\n")
		for _, t := range r.Targets {
			met := "not measured"
			if t.Met != nil {
				met = map[bool]string{true: "yes", false: "**no**"}[*t.Met]
			}
			m := cell(t.Measured)
			if t.Caveat != "" {
				m += " (" + cell(t.Caveat) + ")"
			}
			p("| %d | %s | %s | %s |\n", t.Issue, cell(t.Goal), m, met)
		}
		p("\n")
	}
	r.markdownCapacity(&b)
	if r.Compare != nil {
		p("## Compared with %s\n\n", r.Compare.OldStarted.Format("2006-01-02 15:04 UTC"))
		if !r.Compare.SameMachine {
			p("Another machine (%s): the changes say little about the code.\n\n", r.Compare.OldMachine)
		}
		p("| job | tool | metric | old | new | change |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, ch := range r.Compare.Changes {
			p("| %s | %s | %s | %s | %s | %s |\n", ch.Job, cell(ch.Tool), ch.Metric, metricValue(ch.Metric, ch.Old), metricValue(ch.Metric, ch.New), ch.Describe())
		}
		p("\n")
	}

	p("## Charts\n\n")
	p("- Throughput per tool per job: [throughput.svg](throughput.svg) ([png](throughput.png))\n")
	p("- Lookup latency distribution: [latency.svg](latency.svg) ([png](latency.png))\n")
	p("- Peak RSS per distinct key: [rss.svg](rss.svg) ([png](rss.png))\n")
	if r.Scale != nil {
		p("- Query time per key against the index's size: [scale.svg](scale.svg) ([png](scale.png))\n")
	}
	p("\n![throughput](throughput.svg)\n\n![latency](latency.svg)\n\n![rss](rss.svg)\n\n")
	if r.Scale != nil {
		p("![scale](scale.svg)\n\n")
	}

	p("## Peers\n\n| peer | status | version or why |\n| --- | --- | --- |\n")
	for _, pe := range r.Peers {
		v := pe.Version
		if pe.Status != "ok" {
			v = pe.Why
		}
		p("| %s | %s | %s |\n", pe.Name, pe.Status, v)
	}
	p("\n")
	if len(r.Notes) > 0 {
		p("## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	return b.String()
}

func (r *Report) markdownFigures(b *strings.Builder) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	if lk := r.Lookup; lk != nil && r.ran("build") {
		p("## lookup: single Index.Contains latency, in process\n\n")
		p("The bench process opens %s (%s keys, %s) with fpstore.Open and times each call; present and absent keys alternate, every answer is checked. Warm: after every page was read once. Cold: before each of the batches the file is dropped from the page cache (POSIX_FADV_DONTNEED) and the index reopened; a batch stays below the lookups after which an index reads ahead in huge folios (fpstore.Index.ReadAheadAfter), so these are lookups read a page a fault.\n\n",
			lk.Index, commas(int64(lk.Keys)), fmtMB(lk.FileBytes))
		p("| phase | keys | n | mean | p50 | p90 | p99 | p99.9 | max |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, ph := range []struct {
			name string
			ph   LookupPhase
		}{{"warm", lk.Warm}, {"cold", lk.Cold}} {
			if ph.ph.Status != "ok" {
				p("| %s | | | %s: %s | | | | | |\n", ph.name, ph.ph.Status, ph.ph.Why)
				continue
			}
			for _, k := range []struct {
				name string
				l    *Latency
			}{{"present", ph.ph.Present}, {"absent", ph.ph.Absent}} {
				if k.l == nil {
					continue
				}
				l := k.l
				p("| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", ph.name, k.name, l.N, fmtNs(l.MeanNs), fmtNs(l.P50Ns), fmtNs(l.P90Ns), fmtNs(l.P99Ns), fmtNs(l.P999Ns), fmtNs(l.MaxNs))
			}
		}
		if lk.Cold.Status == "ok" {
			p("\nCold: %d batches; %.1f%% of the file still cached after each drop on average; %.2f major and %.2f minor page faults per lookup.\n",
				lk.Cold.Batches, 100*lk.Cold.ResidentAfterDrop, lk.Cold.MajorFaults, lk.Cold.MinorFaults)
		}
		p("\n")
	}
	if !r.ran("build") && r.Bounded == nil {
		return // no index measured, no bounded dedup
	}
	p("## index: size and filters\n\n")
	if r.Index != nil || !r.ran("build") {
		p("| figure | value |\n| --- | --- |\n")
	}
	if x := r.Index; x != nil {
		p("| fingerprints | %s |\n| file | %s, %d segment(s) |\n| bytes per key | %.2f |\n", commas(int64(x.Fingerprints)), fmtMB(x.FileBytes), x.Segments, x.BytesPerKey)
		p("| filter | %s, %.2f bits per key |\n", x.FilterKind, x.FilterBitsPerKey)
		p("| filter false-positive rate | %.4f%% measured on %s random probes vs %.4f%% in theory (%s) |\n",
			100*x.FilterFPRMeasured, commas(int64(x.FilterProbes)), 100*x.FilterFPRTheory, fprVerdict(x.FilterFPRMeasured, x.FilterFPRTheory, x.FilterProbes))
	} else if r.ran("build") {
		p("Not measured (no index).\n")
	}
	if bf := r.Bounded; bf != nil {
		if bf.Status == "ok" {
			p("| dedup --mem %s bloom (%s records) | mode %s, %d runs, bloom %s, seen-set %s; false positives %.4f%% measured at the final fill (%s probes) vs %.4f%% by the blocked-bloom formula (%s); %.4f%% of new keys during the run |\n",
				bf.Mem, commas(bf.Records), bf.Mode, bf.Runs, fmtMiB(bf.BloomBytes), fmtMiB(bf.TableBytes), 100*bf.FilterFPRMeasured, "2^20", 100*bf.FilterFPRFormula,
				fprVerdict(bf.FilterFPRMeasured, bf.FilterFPRFormula, 1<<20), 100*bf.FilterFPRInRun)
		} else {
			p("| dedup --mem %s bloom | %s |\n", bf.Mem, bf.Status)
		}
	}
	p("\n")
}

// markdownMemory is the mem job's table: each command's peak anonymous
// memory under each --mem against the stated bound, and the largest
// excesses.
func (r *Report) markdownMemory(b *strings.Builder) {
	m := r.Memory
	if m == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	p("## mem: anonymous memory against --mem\n\n")
	p("Each command once per --mem on the %s records of events.txt; its anonymous resident memory (RssAnon, summed over its processes) sampled every %g ms by the bench, and every 20 ms by the command itself (--stats-json memory.peak_rss_anon_bytes): the larger of the two. The kernel keeps no anonymous peak, so each figure is a lower bound. The bound is the README's, %s, plus a Parquet input's row groups (the plan's row_groups_bytes). *refused*: the command declined that --mem before its work, saying what it needs (its figure is its peak until then). %s.\n\n",
		commas(m.Records), m.SampleEveryMs, memplan.BoundText("--mem", " "), m.Online)
	p("| command | --mem | peak anonymous RSS (MiB) | over --mem (MiB) | bound (MiB) | within | wall |\n| --- | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, row := range m.Rows {
		if row.Status == "failed" {
			p("| %s | %s | %s: %s | | | | |\n", row.Command, row.Mem, row.Status, cell(row.Why))
			continue
		}
		within := "yes"
		if !row.Within {
			within = fmt.Sprintf("**NO** (+%.1f MiB)", mib(row.OverBoundBytes))
		}
		cmd := row.Command
		if row.Status == "refused" {
			cmd += " — refused: " + cell(row.Why)
		}
		p("| %s | %s | %.1f | %.1f | %.1f | %s | %s |\n", cmd, row.Mem, mib(row.PeakAnonBytes), mib(row.OverBytes), mib(row.BoundBytes), within, fmtSeconds(row.WallS))
	}
	p("\nLargest excess over --mem: %.1f MiB. Largest excess over the bound: %.1f MiB (negative: every command within it).\n\n", mib(m.WorstOverBytes), mib(m.WorstOverBoundBytes))
}

// fprVerdict says whether a measured rate agrees with its theory within
// the sampling error of that many probes (3 standard deviations, and 20%).
func fprVerdict(measured, theory float64, probes int) string {
	if theory <= 0 || probes <= 0 {
		return "no theory"
	}
	sd := math.Sqrt(theory * (1 - theory) / float64(probes))
	ratio := measured / theory
	if math.Abs(measured-theory) <= 3*sd || (ratio > 0.8 && ratio < 1.2) {
		return fmt.Sprintf("agrees, ×%.2f", ratio)
	}
	return fmt.Sprintf("**off**, ×%.2f", ratio)
}

func (r *Report) markdownCapacity(b *strings.Builder) {
	c := r.Capacity
	if c == nil {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## capacity: %s a day\n\n", siBytes(c.VolumeBytes))
	p("%s records a day, %s distinct; the day's index ≈ %s.\n\n", fmtCount(c.RecordsPerDay), fmtCount(c.DistinctPerDay), siBytes(c.DayIndexBytes))
	p("| step | input | measured here | CPU s/GB | I/O cap | bound | hours on this machine | machines (flat out) | machines (50%% load) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, s := range c.Steps {
		p("| %s (%s) | %s | %s/s | %.1f | %s/s | %s | %.1f | %d | %d |\n", s.Job, s.Tool, s.Input, siBytes(s.MeasuredBytesPerSec), s.CPUSecondsPerGB,
			siBytes(s.IOCapBytesPerSec), s.Bound, s.HoursOnThisMachine, s.Machines, s.MachinesHalfLoad)
	}
	if c.Merge != nil {
		fits := "fits in a day"
		if !c.Merge.FitsInADay {
			fits = "does NOT fit in a day on one machine: use prefix partitions (each machine merges its range) instead"
		}
		p("| merge of the slices' indexes | %s fingerprints | %s fingerprints/s | | | | %.1f (%s); a prefix stitch instead: %.1f | 1 | 1 |\n",
			fmtCount(c.DistinctPerDay), fmtCount(c.Merge.FingerprintsPerSec), c.Merge.Hours, fits, c.Merge.StitchHours)
	}
	p("\nAssumptions:\n\n")
	for _, a := range c.Assumptions {
		p("- %s\n", a)
	}
	p("\n")
}

func fastestPeer(j *Job) *Row {
	var best *Row
	for i := range j.Rows {
		r := &j.Rows[i]
		if r.Kind != kindPeer || r.Median == nil || r.Ratio == 0 {
			continue
		}
		if best == nil || r.Median.WallS < best.Median.WallS {
			best = r
		}
	}
	return best
}

// fasterBy says how fpdedup compares with a peer whose ratio is given.
func fasterBy(ratio float64) string {
	if ratio >= 1 {
		return fmt.Sprintf("%.2f× faster", ratio)
	}
	return fmt.Sprintf("%.2f× slower", 1/ratio)
}

func rowStatus(r *Row) string {
	if r == nil {
		return "not run"
	}
	if r.Why != "" {
		return r.Status + ": " + r.Why
	}
	return r.Status
}

// cell escapes a table cell's pipes.
func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func checkText(r *Row) string {
	t := cell(r.Check)
	switch {
	case r.CheckOK == nil:
		return t
	case *r.CheckOK:
		return "ok: " + t
	}
	return "**WRONG**: " + t
}

func fmtSeconds(s float64) string {
	switch {
	case s >= 100:
		return fmt.Sprintf("%.0f s", s)
	case s >= 10:
		return fmt.Sprintf("%.1f s", s)
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	}
	return fmt.Sprintf("%.0f ms", s*1000)
}

func fmtDuration(s float64) string {
	if s < 120 {
		return fmt.Sprintf("%.0f s", s)
	}
	return fmt.Sprintf("%.0f min", s/60)
}

func fmtNs(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e4:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func fmtMiB(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
func fmtGiB(b int64) string { return fmt.Sprintf("%.0f GiB", float64(b)/(1<<30)) }
func fmtMB(b int64) string {
	if b < 10e6 {
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	}
	return fmt.Sprintf("%.0f MB", float64(b)/1e6)
}

func fmtCount(v float64) string {
	switch {
	case v >= 1e12:
		return fmt.Sprintf("%.3gT", v/1e12)
	case v >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtLoad(l [3]float64) string {
	return fmt.Sprintf("%.2f %.2f %.2f", l[0], l[1], l[2])
}

// commas writes n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
