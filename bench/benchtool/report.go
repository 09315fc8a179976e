package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// row is one command of a job as the script ran it once, untimed, for its
// peak RSS and its answer, before hyperfine timed the ones that worked.
type row struct {
	Job, Name string
	Status    string // "ok", "missing: why", "failed: why"
	RSSKB     string // GNU time %M, "" when not measured
	Answer    string // what the command printed when it prints a count
	Command   string
}

type reportInput struct {
	Meta      map[string]string
	Rows      []row
	Hyperfine map[string]json.RawMessage // job -> hyperfine --export-json
	Inspect   json.RawMessage            // fpdedup inspect --json, or nil
	Peers     string
	AnonKB    map[[2]string]string // {job, name} -> sampled peak RssAnon (benchtool rss)
}

type rowReport struct {
	Name      string    `json:"name"`
	Command   string    `json:"command"`
	Status    string    `json:"status"`
	Floor     bool      `json:"floor,omitempty"`
	MedianS   *float64  `json:"median_s,omitempty"`
	MinS      *float64  `json:"min_s,omitempty"`
	MaxS      *float64  `json:"max_s,omitempty"`
	MeanS     *float64  `json:"mean_s,omitempty"`
	StddevS   *float64  `json:"stddev_s,omitempty"`
	UserS     *float64  `json:"user_s,omitempty"` // hyperfine's mean
	SystemS   *float64  `json:"system_s,omitempty"`
	TimesS    []float64 `json:"times_s,omitempty"`
	PeakRSSMB *float64  `json:"peak_rss_mb,omitempty"`
	AnonRSSMB *float64  `json:"peak_anon_rss_mb,omitempty"`   // sampled, a lower bound
	GBps      *float64  `json:"gb_per_s,omitempty"`           // gbps_bytes / median
	Ratio     *float64  `json:"ratio_vs_reference,omitempty"` // median / reference median
	Answer    string    `json:"answer,omitempty"`
	Expected  string    `json:"expected,omitempty"`
	AnswerOK  *bool     `json:"answer_ok,omitempty"` // Answer == Expected
}

type jobReport struct {
	Name      string      `json:"name"`
	Title     string      `json:"title"`
	Reference string      `json:"reference"`
	Rows      []rowReport `json:"rows"`
}

type indexReport struct {
	Bytes       int64           `json:"bytes"`
	Keys        int64           `json:"keys"`
	BytesPerKey float64         `json:"bytes_per_key"`
	Source      string          `json:"bytes_per_key_source"`
	Inspect     json.RawMessage `json:"inspect,omitempty"`
}

type report struct {
	Meta      map[string]string          `json:"meta"`
	Jobs      []jobReport                `json:"jobs"`
	Index     *indexReport               `json:"index,omitempty"`
	Peers     string                     `json:"peers,omitempty"`
	Hyperfine map[string]json.RawMessage `json:"hyperfine"`
}

// hyperfineResult is the part of hyperfine's export the report uses; its
// "command" is the --command-name the script gave.
type hyperfineResult struct {
	Command string    `json:"command"`
	Mean    float64   `json:"mean"`
	Stddev  *float64  `json:"stddev"`
	Median  float64   `json:"median"`
	User    float64   `json:"user"`
	System  float64   `json:"system"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Times   []float64 `json:"times"`
}

// readMeta reads KEY=VALUE lines; a later line overrides an earlier one.
func readMeta(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && k != "" {
			m[k] = v
		}
	}
	return m, sc.Err()
}

func readRows(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "" {
			continue
		}
		f := strings.SplitN(sc.Text(), "\t", 6)
		if len(f) != 6 {
			return nil, fmt.Errorf("%s:%d: want 6 tab-separated fields, got %d", path, n, len(f))
		}
		rows = append(rows, row{Job: f[0], Name: f[1], Status: f[2], RSSKB: f[3], Answer: f[4], Command: f[5]})
	}
	return rows, sc.Err()
}

func ptr[T any](v T) *T { return &v }

func buildReport(in reportInput) (*report, error) {
	rep := &report{Meta: in.Meta, Peers: in.Peers, Hyperfine: in.Hyperfine}
	timed := map[string]map[string]hyperfineResult{}
	for job, raw := range in.Hyperfine {
		var hf struct {
			Results []hyperfineResult `json:"results"`
		}
		if err := json.Unmarshal(raw, &hf); err != nil {
			return nil, fmt.Errorf("hyperfine JSON of job %s: %w", job, err)
		}
		timed[job] = map[string]hyperfineResult{}
		for _, r := range hf.Results {
			timed[job][r.Command] = r
		}
	}
	distinct, distinctErr := strconv.ParseInt(in.Meta["distinct"], 10, 64)

	// Jobs in the order their first row appears.
	jobIndex := map[string]int{}
	for _, r := range in.Rows {
		ji, ok := jobIndex[r.Job]
		if !ok {
			ji = len(rep.Jobs)
			jobIndex[r.Job] = ji
			rep.Jobs = append(rep.Jobs, jobReport{
				Name: r.Job, Title: in.Meta["title."+r.Job], Reference: in.Meta["ref."+r.Job],
			})
		}
		j := &rep.Jobs[ji]
		rr := rowReport{Name: r.Name, Command: r.Command, Status: r.Status, Floor: strings.HasPrefix(r.Name, "floor:")}
		if kb, err := strconv.ParseFloat(r.RSSKB, 64); err == nil {
			rr.PeakRSSMB = ptr(kb / 1024)
		}
		if kb, err := strconv.ParseFloat(in.AnonKB[[2]string{r.Job, r.Name}], 64); err == nil {
			rr.AnonRSSMB = ptr(kb / 1024)
		}
		if a := strings.TrimSpace(r.Answer); a != "" {
			rr.Answer = a
			// What the row should print: its own expectation, its
			// job's distinct count, or the run's.
			want, ok := metaFor(in.Meta, "expect", r.Job, r.Name)
			if !ok {
				want, ok = metaFor(in.Meta, "distinct", r.Job, "")
			}
			if wn, err := strconv.ParseInt(want, 10, 64); ok && err == nil {
				rr.Expected = want
				if n, err := strconv.ParseInt(a, 10, 64); err == nil {
					rr.AnswerOK = ptr(n == wn)
				}
			}
		}
		if h, ok := timed[r.Job][r.Name]; ok {
			rr.MedianS, rr.MinS, rr.MaxS = ptr(h.Median), ptr(h.Min), ptr(h.Max)
			rr.MeanS, rr.StddevS, rr.TimesS = ptr(h.Mean), h.Stddev, h.Times
			rr.UserS, rr.SystemS = ptr(h.User), ptr(h.System)
			if v, ok := metaFor(in.Meta, "gbps_bytes", r.Job, r.Name); ok {
				if n, err := strconv.ParseFloat(v, 64); err == nil && h.Median > 0 {
					rr.GBps = ptr(n / h.Median / 1e9)
				}
			}
		} else if r.Status == "ok" {
			rr.Status = "not timed (hyperfine failed)"
		}
		j.Rows = append(j.Rows, rr)
	}
	for i := range rep.Jobs {
		j := &rep.Jobs[i]
		var ref *float64
		for _, r := range j.Rows {
			if r.Name == j.Reference {
				ref = r.MedianS
			}
		}
		if ref == nil || *ref <= 0 {
			continue
		}
		for k := range j.Rows {
			if m := j.Rows[k].MedianS; m != nil {
				j.Rows[k].Ratio = ptr(*m / *ref)
			}
		}
	}

	idx, err := indexFacts(in, distinct, distinctErr == nil)
	if err != nil {
		return nil, err
	}
	rep.Index = idx
	return rep, nil
}

// metaFor looks KEY up for a row: KEY.JOB.NAME, then KEY.JOB, then KEY.
// (An empty name skips the first.)
func metaFor(m map[string]string, key, job, name string) (string, bool) {
	if name != "" {
		if v, ok := m[key+"."+job+"."+name]; ok {
			return v, true
		}
	}
	if v, ok := m[key+"."+job]; ok {
		return v, true
	}
	v, ok := m[key]
	return v, ok
}

// indexFacts gives bytes per distinct key: inspect's own figure when it
// reports one, else the file size over the distinct count.
func indexFacts(in reportInput, distinct int64, haveDistinct bool) (*indexReport, error) {
	size, sizeErr := strconv.ParseInt(in.Meta["index_bytes"], 10, 64)
	if sizeErr != nil && in.Inspect == nil {
		return nil, nil
	}
	idx := &indexReport{Bytes: size, Inspect: in.Inspect}
	if haveDistinct {
		idx.Keys = distinct
	}
	if in.Inspect != nil {
		var ins map[string]any
		if err := json.Unmarshal(in.Inspect, &ins); err != nil {
			return nil, fmt.Errorf("inspect JSON: %w", err)
		}
		if n, ok := ins["fingerprints"].(float64); ok {
			idx.Keys = int64(n)
		}
		if b, ok := ins["bytes_per_key"].(float64); ok {
			idx.BytesPerKey, idx.Source = b, "inspect --json bytes_per_key"
			return idx, nil
		}
	}
	if sizeErr == nil && idx.Keys > 0 {
		idx.BytesPerKey = float64(size) / float64(idx.Keys)
		idx.Source = "file size / distinct keys"
		return idx, nil
	}
	return idx, nil
}

func secs(p *float64) string {
	if p == nil {
		return "—"
	}
	switch v := *p; {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func ratio(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64) + "×"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "×"
}

func mb(p *float64) string {
	if p == nil {
		return "—"
	}
	if *p < 10 {
		return strconv.FormatFloat(*p, 'f', 1, 64)
	}
	return strconv.FormatFloat(*p, 'f', 0, 64)
}

// thousands writes 6200000 as 6,200,000 for the prose lines.
func thousands(s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return s
	}
	d := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *report) markdown() string {
	var b strings.Builder
	m := r.Meta
	name := m["bench"]
	if name == "" {
		name = "foundation"
	}
	fmt.Fprintf(&b, "# fpdedup %s benchmark, %s\n\n", name, m["date"])
	if s := m["summary"]; s != "" {
		fmt.Fprintf(&b, "%s  \n", s)
	} else {
		mbytes := "?"
		if n, err := strconv.ParseFloat(m["bytes"], 64); err == nil {
			mbytes = strconv.FormatFloat(n/1e6, 'f', 0, 64) + " MB"
		}
		fmt.Fprintf(&b, "%s records (%s format, seed %s): %s distinct, %s; generated by %s.  \n",
			thousands(m["records"]), m["format"], m["seed"], thousands(m["distinct"]), mbytes, m["generator"])
	}
	fmt.Fprintf(&b, "%s timed runs per command after one untimed run (peak RSS, answer check), whole-process wall time by hyperfine, median; user+sys is hyperfine's mean.  \n", m["runs"])
	fmt.Fprintf(&b, "Machine: %s, %s cores, %s RAM, %s; data in %s (%s). Commit %s.\n",
		m["cpu"], m["cores"], m["mem"], m["kernel"], m["tmpdir"], m["tmpfs"], m["commit"])
	if l := m["load_before"]; l != "" {
		fmt.Fprintf(&b, "Load average before the run: %s (other work on the machine skews figures).\n", l)
	}
	if note := m["note"]; note != "" {
		fmt.Fprintf(&b, "\n**Note:** %s\n", note)
	}
	// check.KEY lines: what the script verified outside the timing, in
	// the order of their keys.
	var checks []string
	for k := range m {
		if strings.HasPrefix(k, "check.") {
			checks = append(checks, k)
		}
	}
	sort.Strings(checks)
	if len(checks) > 0 {
		b.WriteString("\n## checks (untimed)\n\n")
		for _, k := range checks {
			fmt.Fprintf(&b, "- %s\n", m[k])
		}
	}

	for _, j := range r.Jobs {
		title := j.Name
		if j.Title != "" {
			title += ": " + j.Title
		}
		fmt.Fprintf(&b, "\n## %s\n\n", title)
		refCol := "÷ " + j.Reference
		if j.Reference == "" {
			refCol = "ratio"
		}
		// Optional columns, shown when a row of the job has them: the
		// sampled anonymous peak and a throughput.
		var anonCol, gbpsCol bool
		for _, row := range j.Rows {
			anonCol = anonCol || row.AnonRSSMB != nil
			gbpsCol = gbpsCol || row.GBps != nil
		}
		head, align := "| tool | median wall s | min–max s | user+sys s | peak RSS MB", "| --- | ---: | ---: | ---: | ---:"
		if anonCol {
			head, align = head+" | peak anon MB", align+" | ---:"
		}
		if gbpsCol {
			head, align = head+" | GB/s", align+" | ---:"
		}
		fmt.Fprintf(&b, "%s | %s | answer |\n%s | ---: | --- |\n", head, refCol, align)
		for _, row := range j.Rows {
			mem := mb(row.PeakRSSMB)
			if anonCol {
				mem += " | " + mb(row.AnonRSSMB)
			}
			if row.MedianS == nil {
				gap := ""
				if gbpsCol {
					gap = " |"
				}
				fmt.Fprintf(&b, "| %s | %s | | | %s%s | | %s |\n", row.Name, row.Status, mem, gap, answer(row))
				continue
			}
			rt := "—"
			if row.Ratio != nil {
				rt = ratio(*row.Ratio)
			}
			if gbpsCol {
				mem += " | " + gbps(row.GBps)
			}
			fmt.Fprintf(&b, "| %s | %s | %s–%s | %s | %s | %s | %s |\n", row.Name, secs(row.MedianS),
				secs(row.MinS), secs(row.MaxS), secs(ptr(*row.UserS+*row.SystemS)), mem, rt, answer(row))
		}
		// The sentences the issue asks for, peers only (floors are
		// bounds, not competitors), slowest first.
		var peers []rowReport
		for _, row := range j.Rows {
			if row.Ratio != nil && !row.Floor && row.Name != j.Reference {
				peers = append(peers, row)
			}
		}
		sort.SliceStable(peers, func(a, c int) bool { return *peers[a].Ratio > *peers[c].Ratio })
		if len(peers) > 0 {
			b.WriteByte('\n')
			for _, p := range peers {
				fmt.Fprintf(&b, "- %s / %s = %s\n", p.Name, j.Reference, ratio(*p.Ratio))
			}
		} else if j.Reference != "" {
			fmt.Fprintf(&b, "\nNo ratios: %s was not timed.\n", j.Reference)
		}
	}

	// The index section belongs to the benchmarks that build one index
	// (they set index_bytes, empty when the build failed).
	if _, ok := m["index_bytes"]; ok || r.Index != nil {
		b.WriteString("\n## index size\n\n")
		switch idx := r.Index; {
		case idx == nil:
			b.WriteString("No index: fpdedup build did not run.\n")
		case idx.Source == "":
			fmt.Fprintf(&b, "Index of %d bytes; no key count to divide by.\n", idx.Bytes)
		default:
			fmt.Fprintf(&b, "%.2f bytes per distinct key (%s): %s bytes for %s keys.\n",
				idx.BytesPerKey, idx.Source, thousands(strconv.FormatInt(idx.Bytes, 10)), thousands(strconv.FormatInt(idx.Keys, 10)))
		}
	}

	b.WriteString("\n## commands\n\n| tool | command |\n| --- | --- |\n")
	seen := map[string]bool{}
	for _, j := range r.Jobs {
		for _, row := range j.Rows {
			key := j.Name + "\x00" + row.Name
			if seen[key] || row.Command == "" {
				continue
			}
			seen[key] = true
			fmt.Fprintf(&b, "| %s | `%s` |\n", row.Name, strings.ReplaceAll(row.Command, "|", `\|`))
		}
	}
	if r.Peers != "" {
		fmt.Fprintf(&b, "\n## peers\n\n```\n%s\n```\n", strings.TrimRight(r.Peers, "\n"))
	}
	return b.String()
}

func gbps(p *float64) string {
	if p == nil {
		return "—"
	}
	return strconv.FormatFloat(*p, 'f', 2, 64)
}

func answer(r rowReport) string {
	switch {
	case r.Answer == "":
		return ""
	case r.AnswerOK == nil:
		return r.Answer
	case *r.AnswerOK:
		return r.Answer + " ✓"
	}
	return r.Answer + " ✗ WRONG (want " + r.Expected + ")"
}

// readAnon reads benchtool rss peaks as TSV: job, name, KiB.
func readAnon(path string) (map[[2]string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[[2]string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "" {
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want job, name, KiB tab-separated", path, n)
		}
		if f[2] != "" {
			m[[2]string{f[0], f[1]}] = f[2]
		}
	}
	return m, sc.Err()
}
