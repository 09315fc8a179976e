package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// NoiseBand is the relative change below which Compare calls a figure the
// same: the run-to-run spread of medians on a shared 2-core machine.
const NoiseBand = 0.05

// Comparison is this run against an older report.json.
type Comparison struct {
	OldStarted  time.Time `json:"old_started"`
	OldMachine  string    `json:"old_machine"`
	OldFpdedup  string    `json:"old_fpdedup"`
	SameMachine bool      `json:"same_machine"`
	SameData    bool      `json:"same_data"`
	Changes     []Change  `json:"changes"`
}

// Change is one figure in both reports. Lower is better for every metric
// compared (times, bytes); Change is new/old - 1.
type Change struct {
	Job     string  `json:"job"`
	Tool    string  `json:"tool"`
	Metric  string  `json:"metric"` // wall_s, cpu_s, max_rss_bytes, p50_ns, …
	Old     float64 `json:"old"`
	New     float64 `json:"new"`
	Change  float64 `json:"change"`
	Verdict string  `json:"verdict"` // faster/slower (times), smaller/larger (bytes), same
}

func machineLine(m Machine) string {
	return fmt.Sprintf("%s, %d cores, %s RAM, %s", m.CPU, m.Cores, siBytes(float64(m.RAMBytes)), m.Kernel)
}

// compareReports lists what moved between old and cur: every row both
// measured (wall, CPU, peak RSS), the lookup percentiles and the index
// bytes per key.
func compareReports(old, cur *Report) *Comparison {
	c := &Comparison{
		OldStarted:  old.Started,
		OldMachine:  machineLine(old.Machine),
		OldFpdedup:  old.Machine.Fpdedup,
		SameMachine: machineLine(old.Machine) == machineLine(cur.Machine),
		SameData:    old.Data.Records == cur.Data.Records && old.Options.Seed == cur.Options.Seed && old.Data.LinesBytes == cur.Data.LinesBytes,
		Changes:     []Change{},
	}
	add := func(job, tool, metric string, o, n float64, time bool) {
		if o <= 0 || n <= 0 || math.IsNaN(o) || math.IsNaN(n) {
			return
		}
		ch := Change{Job: job, Tool: tool, Metric: metric, Old: o, New: n, Change: n/o - 1}
		better, worse := "smaller", "larger"
		if time {
			better, worse = "faster", "slower"
		}
		switch {
		case ch.Change <= -NoiseBand:
			ch.Verdict = better
		case ch.Change >= NoiseBand:
			ch.Verdict = worse
		default:
			ch.Verdict = "same"
		}
		c.Changes = append(c.Changes, ch)
	}
	for _, nj := range cur.Jobs {
		oj := old.job(nj.Name)
		if oj == nil {
			continue
		}
		for _, nr := range nj.Rows {
			or := oj.row(nr.Tool)
			if or == nil || or.Median == nil || nr.Median == nil {
				continue
			}
			add(nj.Name, nr.Tool, "wall_s", or.Median.WallS, nr.Median.WallS, true)
			add(nj.Name, nr.Tool, "cpu_s", or.Median.CPUS, nr.Median.CPUS, true)
			add(nj.Name, nr.Tool, "max_rss_bytes", float64(or.Median.MaxRSS), float64(nr.Median.MaxRSS), false)
		}
	}
	if old.Lookup != nil && cur.Lookup != nil {
		for _, ph := range []struct {
			name     string
			old, cur LookupPhase
		}{{"warm", old.Lookup.Warm, cur.Lookup.Warm}, {"cold", old.Lookup.Cold, cur.Lookup.Cold}} {
			for _, kind := range []string{"present", "absent"} {
				o, n := ph.old.Present, ph.cur.Present
				if kind == "absent" {
					o, n = ph.old.Absent, ph.cur.Absent
				}
				if o == nil || n == nil {
					continue
				}
				tool := "Index.Contains " + ph.name + " " + kind
				add("lookup", tool, "p50_ns", o.P50Ns, n.P50Ns, true)
				add("lookup", tool, "p99_ns", o.P99Ns, n.P99Ns, true)
				add("lookup", tool, "p999_ns", o.P999Ns, n.P999Ns, true)
			}
		}
	}
	if old.Index != nil && cur.Index != nil {
		add("index", "index.fpx", "bytes_per_key", old.Index.BytesPerKey, cur.Index.BytesPerKey, false)
	}
	return c
}

// WriteText prints the comparison for a person: one line per figure, the
// fpdedup rows first.
func (c *Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "compared with the run of %s (%s)\n", c.OldStarted.Format("2006-01-02 15:04 UTC"), c.OldFpdedup)
	if !c.SameMachine {
		fmt.Fprintf(w, "  note: another machine (%s): the changes say little about the code\n", c.OldMachine)
	}
	if !c.SameData {
		fmt.Fprintf(w, "  note: other data (records or seed differ): compare rates, not times\n")
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "job\ttool\tmetric\told\tnew\tchange\t")
	for pass := range 2 {
		for _, ch := range c.Changes {
			if isFpdedupTool(ch.Tool) != (pass == 0) {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", ch.Job, ch.Tool, ch.Metric,
				metricValue(ch.Metric, ch.Old), metricValue(ch.Metric, ch.New), ch.Describe())
		}
	}
	return tw.Flush()
}

// Describe says how much a figure moved: "1.25× faster (-20.0%)".
func (ch Change) Describe() string {
	if ch.Verdict == "same" {
		return fmt.Sprintf("same (%+.1f%%, within ±%.0f%%)", 100*ch.Change, 100*NoiseBand)
	}
	factor := ch.Old / ch.New
	if factor < 1 {
		factor = 1 / factor
	}
	return fmt.Sprintf("%.2f× %s (%+.1f%%)", factor, ch.Verdict, 100*ch.Change)
}

func isFpdedupTool(t string) bool {
	return strings.HasPrefix(t, "fpdedup") || strings.HasPrefix(t, "Index.") || t == "index.fpx"
}

func metricValue(metric string, v float64) string {
	switch {
	case strings.HasSuffix(metric, "_s"):
		return fmtSeconds(v)
	case strings.HasSuffix(metric, "_ns"):
		return fmtNs(v)
	case metric == "max_rss_bytes":
		return fmtMiB(int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}
