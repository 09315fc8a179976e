package bench

import (
	"fmt"
	"strings"
)

// Target is a performance goal of an issue, judged on this run. Met is nil
// when the run lacks a figure it needs (a peer missing, a row failed).
type Target struct {
	Issue    int    `json:"issue"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      *bool  `json:"met"`
	Caveat   string `json:"caveat,omitempty"` // where this run differs from the issue's setting
}

// Judge judges the report's targets again with this code's goals: for a
// report written before a goal it measures was listed.
func (r *Report) Judge() { r.Targets = judgeTargets(r) }

// judgeTargets checks the goals the issues set against this run's figures,
// for the jobs it ran. The goals are the issues'; they are copied here, and
// when an issue changes its numbers, this list changes with it.
func judgeTargets(r *Report) []Target {
	ts := []Target{}
	// add judges a goal of the job that measures it, if the run chose it.
	add := func(issue int, job, goal, caveat string, f func() (string, *bool)) {
		if !r.ran(job) {
			return
		}
		t := Target{Issue: issue, Goal: goal, Caveat: caveat}
		t.Measured, t.Met = f()
		ts = append(ts, t)
	}
	// faster: fpdedup's row in job against a peer, wanting at least x.
	faster := func(job, peer string, x float64) func() (string, *bool) {
		return func() (string, *bool) {
			j := r.job(job)
			ref, p := j.ref(), j.row(peer)
			if ref == nil || p == nil || p.Median == nil {
				return "not measured (" + rowStatus(p) + ")", nil
			}
			return fmt.Sprintf("%s vs %s: %.2f×", fmtSeconds(ref.Median.WallS), fmtSeconds(p.Median.WallS), p.Ratio), truth(p.Ratio >= x)
		}
	}
	anonUnder := func(job string, limit float64, what string) func() (string, *bool) {
		return func() (string, *bool) {
			ref := r.job(job).ref()
			if ref == nil || ref.PeakAnon <= 0 {
				return "not measured", nil
			}
			return fmt.Sprintf("%s (%s = %s)", fmtMiB(ref.PeakAnon), what, fmtMiB(int64(limit))), truth(float64(ref.PeakAnon) <= limit)
		}
	}
	small := ""
	if r.Data.Records < DefaultRecords {
		small = fmt.Sprintf("this run has %s records; the issues' figures are for 10M", commas(r.Data.Records))
	}

	add(2, "build", "build ≥ 8× faster than LC_ALL=C sort -u", small, faster("build", "sort -u", 8))
	add(2, "build", "build ≥ 2× faster than DuckDB count(DISTINCT hash(l))", small, faster("build", duckHashTool, 2))
	add(2, "build", "build: anonymous peak RSS under 400 MB", small, anonUnder("build", 400e6, "limit"))
	add(2, "build", "index ≤ 17.5 bytes per distinct key, filters and directories included", "", func() (string, *bool) {
		if r.Index == nil {
			return "not measured", nil
		}
		return fmt.Sprintf("%.2f bytes/key", r.Index.BytesPerKey), truth(r.Index.BytesPerKey <= 17.5)
	})
	add(2, "query-present", "query of every line ≥ 10× faster than bloom check", small, faster("query-present", "bloom check", 10))
	add(2, "build", "warm lookup p50 under 300 ns", fmt.Sprintf("on this run's %s-key index; the issue's is 100M keys (go test -bench BenchmarkLookup in fpstore)", fmtCount(float64(r.Data.Distinct))), func() (string, *bool) {
		lk := r.Lookup
		if lk == nil || lk.Warm.Present == nil || lk.Warm.Absent == nil {
			return "not measured", nil
		}
		p50 := max(lk.Warm.Present.P50Ns, lk.Warm.Absent.P50Ns)
		return fmt.Sprintf("present %s, absent %s", fmtNs(lk.Warm.Present.P50Ns), fmtNs(lk.Warm.Absent.P50Ns)), truth(p50 < 300)
	})
	add(3, "dedup-lines", "dedup (lines) ≥ 5× faster than the faster of DuckDB and sort -u", small, func() (string, *bool) {
		j := r.job("dedup-lines")
		ref := j.ref()
		var best *Row
		for _, name := range []string{"sort -u", "duckdb SELECT DISTINCT"} {
			if p := j.row(name); p != nil && p.Median != nil && (best == nil || p.Median.WallS < best.Median.WallS) {
				best = p
			}
		}
		if ref == nil || best == nil {
			return "not measured", nil
		}
		return fmt.Sprintf("%s vs %s %s: %.2f×", fmtSeconds(ref.Median.WallS), best.Tool, fmtSeconds(best.Median.WallS), best.Ratio), truth(best.Ratio >= 5)
	})
	add(3, "dedup-csv", "dedup --format csv --key 1,2,3 ≥ 3× faster than DuckDB SELECT DISTINCT * FROM read_csv", small, faster("dedup-csv", "duckdb SELECT DISTINCT * FROM read_csv", 3))
	add(3, "dedup-zstd", "dedup of the zstd CSV within 2× of zstd -dc alone", small, func() (string, *bool) {
		j := r.job("dedup-zstd")
		ref, z := j.ref(), j.row("floor: zstd -dc")
		if ref == nil || z == nil || z.Median == nil {
			return "not measured", nil
		}
		x := ref.Median.WallS / z.Median.WallS
		return fmt.Sprintf("%s vs %s: %.2f× its time", fmtSeconds(ref.Median.WallS), fmtSeconds(z.Median.WallS), x), truth(x <= 2)
	})
	add(12, "count", "count ≥ 3× faster than sort | uniq -c", small, faster("count", "sort | uniq -c", 3))
	add(12, "count", "count ≥ 3× faster than DuckDB GROUP BY l ORDER BY first occurrence", small, faster("count", "duckdb GROUP BY l ORDER BY first", 3))
	add(3, "dedup-lines", "dedup in memory: anonymous peak RSS ≤ 32 bytes per distinct key + 64 MiB", small,
		anonUnder("dedup-lines", 32*float64(r.Data.Distinct)+64<<20, "32 B × "+commas(r.Data.Distinct)+" + 64 MiB"))
	add(3, "dedup-bounded", "dedup --mem M: anonymous peak RSS under M + 64 MiB", "the issue asks it of --mem 128MiB on 50M lines; this run's is --mem "+r.Options.BoundedMem+" on "+commas(r.Data.BoundedRecords)+" lines",
		func() (string, *bool) {
			m, ok := parseMiB(r.Options.BoundedMem)
			if !ok {
				return "not measured", nil
			}
			return anonUnder("dedup-bounded", float64(m+64<<20), r.Options.BoundedMem+" + 64 MiB")()
		})
	add(3, "dedup-bounded", "bounded mode's bloom: measured false-positive rate within 10% of the formula", "", func() (string, *bool) {
		bf := r.Bounded
		if bf == nil || bf.Status != "ok" || bf.FilterFPRFormula <= 0 {
			return "not measured", nil
		}
		x := bf.FilterFPRMeasured / bf.FilterFPRFormula
		return fmt.Sprintf("%.4f%% vs %.4f%%: ×%.3f", 100*bf.FilterFPRMeasured, 100*bf.FilterFPRFormula, x), truth(x >= 0.9 && x <= 1.1)
	})
	// within: fpdedup's row in job at most x times the time of row other
	// (a floor) of job otherJob.
	within := func(job, otherJob, other string, x float64) func() (string, *bool) {
		return func() (string, *bool) {
			ref, f := r.job(job).ref(), r.job(otherJob).row(other)
			if otherJob == job && f == nil {
				return "not measured (no " + other + " row)", nil
			}
			if ref == nil || ref.Median == nil || f == nil || f.Median == nil || f.Median.WallS <= 0 {
				return "not measured (" + rowStatus(f) + ")", nil
			}
			y := ref.Median.WallS / f.Median.WallS
			return fmt.Sprintf("%s vs %s: %.2f× its time", fmtSeconds(ref.Median.WallS), fmtSeconds(f.Median.WallS), y), truth(y <= x)
		}
	}
	// withinSum: fpdedup's row in job within x of two of its rows' times
	// added: work that reads what both of them read, one after the other.
	withinSum := func(job, a, b string, x float64) func() (string, *bool) {
		return func() (string, *bool) {
			j := r.job(job)
			ref, fa, fb := j.ref(), j.row(a), j.row(b)
			for _, f := range []*Row{fa, fb} {
				if f == nil || f.Median == nil || f.Median.WallS <= 0 {
					return "not measured (" + rowStatus(f) + ")", nil
				}
			}
			if ref == nil || ref.Median == nil {
				return "not measured", nil
			}
			sum := fa.Median.WallS + fb.Median.WallS
			y := ref.Median.WallS / sum
			return fmt.Sprintf("%s vs %s + %s = %s: %.2f× their time", fmtSeconds(ref.Median.WallS), fmtSeconds(fa.Median.WallS), fmtSeconds(fb.Median.WallS), fmtSeconds(sum), y), truth(y <= x)
		}
	}
	add(11, "dedup-lines", "dedup (lines) within 1.1× of the split+hash+table bound (fpdedup-bench bound)", small, within("dedup-lines", "dedup-lines", "floor: split+hash+table", 1.1))
	add(11, "dedup-lines", "dedup (lines) ≥ 5× faster than DuckDB SELECT DISTINCT", small, faster("dedup-lines", "duckdb SELECT DISTINCT", 5))
	if r.ran("dedup-lines") {
		if l := r.job("dedup-lines").ref(); l != nil {
			add(11, "dedup-csv", "dedup --format csv --key 1,2,3 within 1.2× of dedup of lines", small,
				within("dedup-csv", "dedup-lines", l.Tool, 1.2))
		}
	}
	add(11, "dedup-zstd", "dedup of .zst input within 1.3× of zstd -dc alone", small, within("dedup-zstd", "dedup-zstd", "floor: zstd -dc", 1.3))
	add(11, "build", "build ≥ 10× faster than LC_ALL=C sort -u --parallel", small, faster("build", "sort -u", 10))
	add(11, "query-present", "query of 10M present keys ≥ 15× faster than bloom check", small, faster("query-present", "bloom check", 15))
	add(11, "query-absent", "query of 10M absent keys ≥ 5× faster than bloom check", small, faster("query-absent", "bloom check", 5))
	add(11, "merge", "merge within 1.5× of its I/O floor (cat of the inputs + dd conv=fsync of the output)", "the issue asks it of two 50M-key indexes; this run merges the two halves of its own index",
		within("merge", "merge", "floor: cat + dd conv=fsync of the output", 1.5))
	add(6, "merge", "merge ≥ 10× faster than LC_ALL=C sort -m -u of the hex dumps", "the issue asks it of two 50M-key indexes; this run merges the two halves of its own index", faster("merge", "sort -m -u (hex)", 10))
	add(6, "merge", "merge: anonymous peak RSS under 64 MiB", "", anonUnder("merge", 64<<20, "limit"))
	pqCaveat := "events.parquet is the generator's records written by parquet-go (zstd, dictionary pages, DuckDB's row groups of " + commas(parquetRowGroup) + " rows); the issue's is the same events written by DuckDB (bench/parquet.sh)"
	if small != "" {
		pqCaveat = small + "; " + pqCaveat
	}
	add(29, "parquet-dedup", "dedup of Parquet to Parquet ≥ 2× faster than DuckDB's QUALIFY row_number() to Parquet, same threads", pqCaveat, faster("parquet-dedup", duckParquetDedup, 2))
	add(29, "parquet-count", "count from Parquet within 1.5× of count of the same records as CSV", pqCaveat, within("parquet-count", "parquet-count", csvCountRow, 1.5))
	add(29, "parquet-build", "build from Parquet within 1.5× of build of the same records as CSV", pqCaveat, within("parquet-build", "parquet-build", csvBuildRow, 1.5))
	// dedup --help: --mem, 16 MiB of slack, and on top the row groups a
	// copy holds: two row groups' key values and two being copied (their
	// rows decoded, and the output's pages), each at most a row group
	// decoded.
	pqMem, _ := parseMiB(parquetMem)
	pqBound := float64(pqMem + 16<<20 + 4*r.Data.ParquetRowGroupBytes)
	add(29, "parquet-bounded", "dedup --mem "+parquetMem+" of Parquet: anonymous peak within --mem + 16 MiB + the row groups a copy holds (dedup --help: 4 × the largest decoded, its bytes and 24 B a value); DuckDB with memory_limit "+parquetMem+" as it fares", pqCaveat,
		func() (string, *bool) {
			msg, ok := anonUnder("parquet-bounded", pqBound, parquetMem+" + 16 MiB + 4 × "+fmtMiB(r.Data.ParquetRowGroupBytes))()
			if d := r.job("parquet-bounded").row(duckParquetBounded); d != nil {
				switch {
				case d.Median != nil:
					msg += fmt.Sprintf("; DuckDB: %s, peak RSS %s", fmtSeconds(d.Median.WallS), fmtMiB(d.Median.MaxRSS))
				default:
					msg += "; DuckDB: " + rowStatus(d)
				}
			}
			return msg, ok
		})
	etcdCaveat := "a single member on loopback, on this machine"
	add(45, "etcd-audit", "etcd audit within 1.5× of etcdctl at the same page size (page after page, one revision)", etcdCaveat,
		within("etcd-audit", "etcd-audit", etcdctlPagesTool, 1.5))
	add(45, "etcd-apply", "etcd --apply within 1.25× of a bare loop of the client sending the same transactions at the same concurrency (whole processes)", etcdCaveat,
		within("etcd-apply", "etcd-apply", etcdBareTool, 1.25))
	if m, ok := parseMiB(r.Options.EtcdMem); ok {
		for _, job := range EtcdJobs {
			add(45, job, "etcd "+strings.TrimPrefix(job, "etcd-")+": anonymous peak RSS within --mem "+r.Options.EtcdMem, etcdCaveat, anonUnder(job, float64(m), "--mem"))
		}
	}
	rbCaveat := "one redis-server on loopback, on this machine; the job's title gives its keys, filters and history"
	add(44, "redisbloom-audit", "RedisBloom audit within 1.5× of the bare BF.SCANDUMP reads of the same dumps", rbCaveat,
		within("redisbloom-audit", "redisbloom-audit", rbScandumpTool, 1.5))
	// The bare rows read no truth. Read as "what the audit adds to its
	// two reads", the goal compares it with the dump reads and the
	// truth's own pass together: a reading of the issue's, said so.
	add(44, "redisbloom-audit", "RedisBloom audit within 1.5× of the dump reads plus the truth's own pass (this bench's reading of the goal above)", rbCaveat,
		withinSum("redisbloom-audit", rbScandumpTool, rbTruthTool, 1.5))
	add(44, "redisbloom-audit", "RedisBloom audit ahead of pipelined BF.MEXISTS of every key", rbCaveat,
		within("redisbloom-audit", "redisbloom-audit", rbMexistsTool, 1))
	add(44, "redisbloom-rebuild", "RedisBloom --rebuild-shard within 1.25× of the bare BF.LOADCHUNK of the same bytes", rbCaveat,
		within("redisbloom-rebuild", "redisbloom-rebuild", rbLoadchunkTool, 1.25))
	add(44, "redisbloom-rebuild", "RedisBloom --rebuild-shard within 1.25× of the bare loads plus the truth's own pass (this bench's reading of the goal above)", rbCaveat,
		withinSum("redisbloom-rebuild", rbLoadchunkTool, rbTruthTool, 1.25))
	add(44, "redisbloom-apply", "RedisBloom --apply within 1.25× of redis-cli --pipe of the same BF.INSERT commands", rbCaveat,
		within("redisbloom-apply", "redisbloom-apply", rbPipeTool, 1.25))
	ts = append(ts, scaleTargets(r)...)
	return ts
}

// scaleTargets are issue 30's goals, and issue 47's (coldTargets), judged at the scale job's largest
// size (the issue's figures are for 10^9 keys).
func scaleTargets(r *Report) []Target {
	sc := r.Scale
	if !r.ran("scale") || sc == nil || len(sc.Sizes) == 0 {
		return nil
	}
	small, large := sc.Sizes[0], sc.Sizes[len(sc.Sizes)-1]
	caveat := ""
	if large.Keys < 1_000_000_000 {
		caveat = fmt.Sprintf("the largest index here has %s keys; the issue's figures are for 10^9", commas(large.Keys))
	}
	var ts []Target
	add := func(goal, measured string, met *bool) {
		ts = append(ts, Target{Issue: 30, Goal: goal, Measured: measured, Met: met, Caveat: caveat})
	}
	query := func(s ScaleSize, batch int64, present, cold bool) *ScaleQuery {
		for i, q := range s.Queries {
			if q.Batch == batch && q.Present == present && q.Cold == cold {
				return &s.Queries[i]
			}
		}
		return nil
	}
	dev := sc.Device
	devOK := dev != nil && dev.Status == "ok" && dev.Depth32IOPS > 0
	if q := query(large, 100_000, true, true); q != nil {
		if devOK {
			share := float64(q.Run.DeviceReads) / q.Run.WallS / dev.Depth32IOPS
			add("cold batch of 10^5 present keys: ≥ 70% of fio's depth-32 IOPS", fmt.Sprintf("%.0f%% (%s reads/s of %s)", 100*share, fmtCount(float64(q.Run.DeviceReads)/q.Run.WallS), fmtCount(dev.Depth32IOPS)), truth(share >= 0.70))
		}
		add("cold batch of 10^5 present keys: ≤ 1.3 device reads a key", fmt.Sprintf("%.2f", q.ReadsPerKey), truth(q.ReadsPerKey <= 1.3))
	}
	if q := query(large, 100_000, false, true); q != nil {
		add("cold batch of 10^5 absent keys: ≤ 1.1 device reads a key", fmt.Sprintf("%.2f", q.ReadsPerKey), truth(q.ReadsPerKey <= 1.1))
	}
	if x := large.Single; x != nil && devOK {
		limit := 2.5 * dev.Depth1LatencyUs
		add("single cold lookup in process: p50 ≤ 2.5× fio's depth-1 latency", fmt.Sprintf("%.0f µs (limit %.0f µs)", x.InProcessP50Us, limit), truth(x.InProcessP50Us <= limit))
		plimit := 3*dev.Depth1LatencyUs/1e3 + x.VersionP50Ms
		add("a whole fpdedup query IDX KEY: p50 ≤ 3× fio's depth-1 latency + fpdedup --version", fmt.Sprintf("%.1f ms (limit %.1f ms)", x.ProcessP50Ms, plimit), truth(x.ProcessP50Ms <= plimit))
	}
	if w0, w1 := query(small, 10_000, true, false), query(large, 10_000, true, false); w0 != nil && w1 != nil && w0.NsPerKey > 0 && large.Keys > small.Keys {
		g := w1.NsPerKey / w0.NsPerKey
		add("warm 10^4 keys: time a key at the largest size within 2× the smallest's", fmt.Sprintf("%.2f× (%s vs %s)", g, fmtNs(w1.NsPerKey), fmtNs(w0.NsPerKey)), truth(g <= 2))
	}
	if m := large.BuildMem; m != nil && m.Status == "ok" {
		x := m.WallS / large.Build.WallS
		add("build --mem 2GiB: anonymous peak within 2 GiB, output identical, ≤ 1.5× the time", fmt.Sprintf("%s, identical %v, %.2f×", fmtMiB(m.PeakAnonBytes), large.BuildMemIdentical, x),
			truth(m.PeakAnonBytes <= 2<<30 && large.BuildMemIdentical && x <= 1.5))
	}
	if m := large.Merge; m != nil && m.Ratio > 0 {
		add("merge a day into the history: ≤ 1.3× the I/O floor", fmt.Sprintf("%.2f× (%s vs %s)", m.Ratio, fmtSeconds(m.Merge.WallS), fmtSeconds(m.Floor.WallS)), truth(m.Ratio <= 1.3))
	}
	return append(ts, coldTargets(large, dev, caveat)...)
}

// coldTargets are issue 47's goals for cold lookups at the largest size.
// The device's depth-1 read is its read of a cold page taking turns with
// the lookups (ScaleSingle.DeviceP50Us), not fio's back-to-back reads.
func coldTargets(large ScaleSize, dev *ScaleDevice, caveat string) []Target {
	var ts []Target
	add := func(goal, measured string, met *bool) {
		ts = append(ts, Target{Issue: 47, Goal: goal, Measured: measured, Met: met, Caveat: caveat})
	}
	if x := large.Single; x != nil && x.DeviceP50Us > 0 {
		// Measured again once the process has looked up more single
		// keys (Held), both runs are judged: the device's read, which
		// the ratio is taken against, moves between them on these VMs.
		ratio := x.InProcessP50Us / x.DeviceP50Us
		measured := fmt.Sprintf("%.0f µs, %.2f× (the device: %.0f µs)", x.InProcessP50Us, ratio, x.DeviceP50Us)
		reads, readsText := x.InProcessReads, fmt.Sprintf("%.2f", x.InProcessReads)
		if h := x.Held; h != nil && h.DeviceP50Us > 0 {
			ratio = max(ratio, h.P50Us/h.DeviceP50Us)
			measured += fmt.Sprintf("; after %s single lookups: %.0f µs, %.2f× (the device: %.0f µs)", commas(int64(h.After)), h.P50Us, h.P50Us/h.DeviceP50Us, h.DeviceP50Us)
			reads = max(reads, h.Reads)
			readsText += fmt.Sprintf("; after %s single lookups: %.2f", commas(int64(h.After)), h.Reads)
		}
		add("single cold lookup in a running process: p50 ≤ 1.5× the device's depth-1 4 KiB read", measured, truth(ratio <= 1.5))
		add("single cold lookup in a running process: ≤ 1.2 device reads", readsText, truth(reads <= 1.2))
		limit := x.VersionP50Ms + 2*x.DeviceP50Us/1e3
		add("a whole fpdedup query IDX KEY: p50 ≤ its start (fpdedup --version) + 2 device reads", fmt.Sprintf("%.2f ms (limit %.2f ms)", x.ProcessP50Ms, limit), truth(x.ProcessP50Ms <= limit))
		add("a whole fpdedup query IDX KEY: ≤ 2 device reads", fmt.Sprintf("%.2f", x.ProcessReads), truth(x.ProcessReads <= 2))
	}
	devOK := dev != nil && dev.Status == "ok" && dev.Depth32IOPS > 0
	for _, g := range large.coldBatches() {
		for _, q := range g.qs {
			what := fmt.Sprintf("%s of a cold batch of %s %s keys", g.how, commas(q.Batch), map[bool]string{true: "present", false: "absent"}[q.Present])
			add(what+": ≤ 1.3 device reads a key", fmt.Sprintf("%.2f", q.ReadsPerKey), truth(q.ReadsPerKey <= 1.3))
			pages := float64(q.Run.ReadBytes) / float64(q.Batch) / 4096
			add(what+": ≤ 1.5 pages read a key", fmt.Sprintf("%.2f (%s)", pages, fmtMB(q.Run.ReadBytes)), truth(pages <= 1.5))
			if devOK {
				share := 1e9 / q.NsPerKey / dev.Depth32IOPS
				add(what+": keys a second ≥ 85% of fio's depth-32 IOPS", fmt.Sprintf("%.0f%% (%s keys/s of %s)", 100*share, fmtCount(1e9/q.NsPerKey), fmtCount(dev.Depth32IOPS)), truth(share >= 0.85))
			}
		}
	}
	return ts
}

// parseMiB reads the MiB and GiB sizes --bounded-mem takes.
func parseMiB(s string) (int64, bool) {
	var n int64
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil {
		return 0, false
	}
	switch strings.ToLower(unit) {
	case "mib", "m":
		return n << 20, true
	case "gib", "g":
		return n << 30, true
	}
	return 0, false
}
