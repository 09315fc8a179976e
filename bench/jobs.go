package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
)

// rowSpec is one tool's way of doing a job.
type rowSpec struct {
	tool, kind string
	needs      []string // peers it needs (Peer.Name)
	needsFile  string   // a file an earlier job makes
	cmd        command
	wantExit   int
	// givesUp, for a peer run under a limit it may not finish within
	// (DuckDB under memory_limit), is what its error says when it gives up
	// on the limit: that is how it fares, reported as "gave up", not a
	// failure of the run; any other failure is one.
	givesUp string
	stats   string // fpdedup's --stats-json file, read after the checked run
	// before, if set, runs untimed before every run: it puts back the
	// state a run starts from (an apply's prefix emptied).
	before func(ctx context.Context) error
	// verify judges the checked run: what it found, and whether that is
	// right (nil: nothing to judge, e.g. a floor).
	verify func(o outStats, stats map[string]any) (string, *bool)
}

// jobSpec is a job before it runs.
type jobSpec struct {
	name, title, input string
	inputBytes, units  int64
	unit               string
	ref                string
	distinct           int64 // distinct keys of the input, for RSS per key
	rows               []rowSpec
	prep               func(ctx context.Context, j *Job) error
}

const (
	kindFpdedup = "fpdedup"
	kindPeer    = "peer"
	kindFloor   = "floor"
)

// The CSV key of the dedup jobs: user_id,device_id,timestamp_ms, as online.
const csvKey = "1,2,3"

// awkCSVKey keeps the header and the first record of each key, the awk
// equivalent of fpdedup dedup --format csv --header --key 1,2,3 on data
// without quoted fields.
const awkCSVKey = `NR==1 || !s[$1 FS $2 FS $3]++`

// bloomP is the bloom CLI's false-positive rate: about that of fpdedup's
// own index filters (10 bits a key, ~0.96%), so both make a filter of the
// same quality.
const bloomP = "0.01"

func truth(b bool) *bool { return &b }

func (b *runner) fp(stats string, args ...string) command {
	argv := []string{b.exe, "--progress", "never"}
	if stats != "" {
		argv = append(argv, "--stats-json", stats)
	}
	return command{argv: append(argv, args...)}
}

// awkCount is count in awk: what fpdedup count must equal byte for byte.
const awkCount = `{c[$0]++; if (!o[$0]++) k[++n] = $0} END {for (i = 1; i <= n; i++) printf "%7d %s\n", c[k[i]], k[i]}`

func sh(script string) command { return command{argv: []string{"sh", "-c", script}} }

func linesEqual(want int64, what string) func(outStats, map[string]any) (string, *bool) {
	return func(o outStats, _ map[string]any) (string, *bool) {
		if o.Lines == want {
			return fmt.Sprintf("%d lines = %s", o.Lines, what), truth(true)
		}
		return fmt.Sprintf("%d lines, want %d (%s)", o.Lines, want, what), truth(false)
	}
}

// buildDistinct checks a build's --stats-json: the index holds the
// generator's distinct count.
func buildDistinct(dist int64) func(outStats, map[string]any) (string, *bool) {
	return func(_ outStats, st map[string]any) (string, *bool) {
		got, ok := num(st, "build", "distinct")
		if !ok {
			return "no build.distinct in --stats-json", truth(false)
		}
		return fmt.Sprintf("%d distinct in the index, generator says %d", int64(got), dist), truth(int64(got) == dist)
	}
}

// sameOutput checks lines and that the bytes hash like the reference's.
func (b *runner) sameOutput(want int64, what, refKey, refName string) func(outStats, map[string]any) (string, *bool) {
	return func(o outStats, st map[string]any) (string, *bool) {
		msg, ok := linesEqual(want, what)(o, st)
		ref := b.hashes[refKey]
		switch {
		case ref == "":
			msg += "; not compared (" + refName + " did not run)"
		case o.Hash == ref:
			msg += "; byte-identical to " + refName
		default:
			msg += "; bytes DIFFER from " + refName
			ok = truth(false)
		}
		return msg, ok
	}
}

// keepHash records a row's output hash for later rows to compare with.
func (b *runner) keepHash(key string, v func(outStats, map[string]any) (string, *bool)) func(outStats, map[string]any) (string, *bool) {
	return func(o outStats, st map[string]any) (string, *bool) {
		b.hashes[key] = o.Hash
		return v(o, st)
	}
}

func (b *runner) jobs() []jobSpec {
	d := &b.rep.Data
	n, dist := d.Records, d.Distinct
	lines, linesZst := b.path("events.txt"), b.path("events.txt.zst")
	csv, csvZst := b.path("events.csv"), b.path("events.csv.zst")
	absent, bounded := b.path("absent.txt"), b.boundedPath
	index, bloom := b.path("index.fpx"), b.path("filter.bloom")
	halfA, halfB := b.path("half-a.fpx"), b.path("half-b.fpx")
	hexA, hexB := b.path("half-a.hex"), b.path("half-b.hex")
	merged := b.path("merged.fpx")
	par := fmt.Sprintf("--parallel=%d", b.rep.Machine.Cores)
	duck := func(script string, args ...string) command {
		dir := b.duckDir
		if dir == "" {
			dir = "bench" // not run: shown as the repository's path
		}
		return command{argv: append([]string{"node", filepath.Join(dir, script)}, args...)}
	}
	q := shellQuote
	floorWrite := b.floorWrite
	cat := catFloor
	zcat := func(f string) rowSpec {
		return rowSpec{tool: "floor: zstd -dc", kind: kindFloor, needs: []string{"zstd"}, cmd: command{argv: []string{"zstd", "-dc", f}}}
	}
	boundedN, boundedD := d.BoundedRecords, d.BoundedDistinct

	return append([]jobSpec{{
		name: "build", title: "an exact set of the distinct lines (bloom: approximate)",
		input: "events.txt", inputBytes: d.LinesBytes, units: n, unit: "records", distinct: dist,
		ref: "fpdedup build",
		rows: []rowSpec{
			{tool: "fpdedup build", kind: kindFpdedup, cmd: b.fp(b.path("stats-build.json"), "build", "-o", index, lines),
				stats: b.path("stats-build.json"), verify: buildDistinct(dist)},
			{tool: "sort -u", kind: kindPeer, needs: []string{"sort"},
				cmd: command{argv: []string{"sort", "-u", "-S", "50%", par, "-T", b.work, lines}}, verify: linesEqual(dist, "distinct")},
			{tool: duckHashTool, kind: kindPeer, needs: []string{"duckdb"},
				cmd: duck("duckdb-distinct.mjs", lines), verify: printsCount(dist, "two lines sharing a 64-bit hash count once")},
			{tool: "duckdb count(DISTINCT l)", kind: kindPeer, needs: []string{"duckdb"},
				cmd: duck("duckdb-distinct.mjs", "--exact", lines), verify: printsCount(dist, "")},
			{tool: "bloom create + insert (p=" + bloomP + ")", kind: kindPeer, needs: []string{"bloom", "sh"},
				cmd: sh(fmt.Sprintf("rm -f %s && bloom create -p %s -n %d %s && bloom insert %s < %s", q(bloom), bloomP, dist, q(bloom), q(bloom), q(lines)))},
			{tool: "mawk '!s[$0]++'", kind: kindPeer, needs: []string{"mawk"},
				cmd: command{argv: []string{"mawk", "!s[$0]++", lines}}, verify: linesEqual(dist, "distinct")},
			{tool: "gawk '!s[$0]++'", kind: kindPeer, needs: []string{"gawk"},
				cmd: command{argv: []string{"gawk", "!s[$0]++", lines}}, verify: linesEqual(dist, "distinct")},
			cat(lines),
			zcat(linesZst),
			{tool: "floor: cat + dd conv=fsync of the index", kind: kindFloor, needs: []string{"sh", "cat", "dd"}, needsFile: "",
				cmd: floorWrite([]string{lines}, index)},
		},
	}, {
		name: "query-present", title: "look every line up in the index (all present)",
		input: "events.txt", inputBytes: d.LinesBytes, units: n, unit: "records",
		ref: "fpdedup query --only present",
		rows: []rowSpec{
			// Like bloom check, it prints the keys found, verbatim.
			{tool: "fpdedup query --only present", kind: kindFpdedup, needsFile: index,
				cmd: withStdin(b.fp("", "query", "--only", "present", index), lines), verify: linesEqual(n, "every line present")},
			{tool: "fpdedup query", kind: kindFpdedup, needsFile: index,
				cmd: withStdin(b.fp("", "query", index), lines),
				verify: func(o outStats, _ map[string]any) (string, *bool) {
					p := o.LineStarts['p']
					return fmt.Sprintf("%d of %d answers present", p, n), truth(p == n && o.Lines == n)
				}},
			{tool: "bloom check", kind: kindPeer, needs: []string{"bloom"}, needsFile: bloom,
				cmd: withStdin(command{argv: []string{"bloom", "check", bloom}}, lines), verify: linesEqual(n, "every line (no false negative)")},
			cat(lines),
		},
	}, {
		name: "query-absent", title: "look up as many lines that are not in the index (all absent)",
		input: "absent.txt", inputBytes: d.AbsentBytes, units: n, unit: "records",
		ref: "fpdedup query --only present",
		rows: []rowSpec{
			// Like bloom check, it prints the keys found: none.
			{tool: "fpdedup query --only present", kind: kindFpdedup, needsFile: index, wantExit: 1,
				cmd: withStdin(b.fp("", "query", "--only", "present", index), absent), verify: linesEqual(0, "no line present")},
			{tool: "fpdedup query", kind: kindFpdedup, needsFile: index, wantExit: 1,
				cmd: withStdin(b.fp("", "query", index), absent),
				verify: func(o outStats, _ map[string]any) (string, *bool) {
					a := o.LineStarts['a']
					return fmt.Sprintf("%d of %d answers absent", a, n), truth(a == n && o.Lines == n)
				}},
			{tool: "bloom check", kind: kindPeer, needs: []string{"bloom"}, needsFile: bloom,
				cmd: withStdin(command{argv: []string{"bloom", "check", bloom}}, absent),
				verify: func(o outStats, _ map[string]any) (string, *bool) {
					return fmt.Sprintf("%d false positives (%.3f%%, created for p=%s)", o.Lines, 100*float64(o.Lines)/float64(max(n, 1)), bloomP), nil
				}},
			cat(absent),
		},
	}, {
		name: "dedup-lines", title: "keep the first copy of each distinct line (sort -u, DuckDB: one copy, in their own order)",
		input: "events.txt", inputBytes: d.LinesBytes, units: n, unit: "records", distinct: dist,
		ref: "fpdedup dedup",
		rows: []rowSpec{
			{tool: "fpdedup dedup", kind: kindFpdedup, cmd: b.fp(b.path("stats-dedup.json"), "dedup", lines),
				stats: b.path("stats-dedup.json"), verify: b.keepHash("dedup-lines", linesEqual(dist, "distinct"))},
			{tool: "sort -u", kind: kindPeer, needs: []string{"sort"},
				cmd: command{argv: []string{"sort", "-u", "-S", "50%", par, "-T", b.work, lines}}, verify: linesEqual(dist, "distinct")},
			{tool: "duckdb SELECT DISTINCT", kind: kindPeer, needs: []string{"duckdb"},
				cmd: duck("duckdb-dedup.mjs", lines), verify: linesEqual(dist, "distinct")},
			{tool: "mawk '!s[$0]++'", kind: kindPeer, needs: []string{"mawk"},
				cmd:    command{argv: []string{"mawk", "!s[$0]++", lines}},
				verify: b.sameOutput(dist, "distinct", "dedup-lines", "fpdedup dedup")},
			{tool: "gawk '!s[$0]++'", kind: kindPeer, needs: []string{"gawk"},
				cmd:    command{argv: []string{"gawk", "!s[$0]++", lines}},
				verify: b.sameOutput(dist, "distinct", "dedup-lines", "fpdedup dedup")},
			b.boundRow(lines, dist),
			cat(lines),
			zcat(linesZst),
		},
	}, {
		name: "dedup-bounded", title: "the same in bounded memory, --mem " + b.o.BoundedMem + " (sort -u -S " + b.o.BoundedMem + ")",
		input: filepath.Base(bounded), inputBytes: d.BoundedBytes, units: boundedN, unit: "records", distinct: boundedD,
		ref: "fpdedup --mem " + b.o.BoundedMem + " dedup",
		rows: []rowSpec{
			{tool: "fpdedup --mem " + b.o.BoundedMem + " dedup", kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-bounded.json"), "--mem", b.o.BoundedMem, "dedup", "--tmpdir", b.work, bounded),
				stats: b.path("stats-bounded.json"),
				verify: func(o outStats, st map[string]any) (string, *bool) {
					msg, ok := linesEqual(boundedD, "distinct")(o, st)
					mode, _ := str(st, "dedup", "mode")
					msg += "; mode " + mode
					if mode != "lsm" {
						msg += " (the bounded path was not exercised)"
					}
					if b.hashes["dedup-lines"] != "" && bounded == lines {
						if o.Hash == b.hashes["dedup-lines"] {
							msg += "; byte-identical to fpdedup dedup in memory"
						} else {
							msg += "; bytes DIFFER from fpdedup dedup in memory"
							ok = truth(false)
						}
					}
					return msg, ok
				}},
			{tool: "sort -u -S " + sortSize(b.o.BoundedMem), kind: kindPeer, needs: []string{"sort"},
				cmd:    command{argv: []string{"sort", "-u", "-S", sortSize(b.o.BoundedMem), par, "-T", b.work, bounded}},
				verify: linesEqual(boundedD, "distinct")},
			cat(bounded),
		},
	}, {
		name: "dedup-csv", title: "distinct CSV records by user_id,device_id,timestamp_ms (DuckDB: SELECT DISTINCT *, typed)",
		input: "events.csv", inputBytes: d.CSVBytes, units: n, unit: "records", distinct: dist,
		ref: "fpdedup dedup --format csv",
		rows: []rowSpec{
			{tool: "fpdedup dedup --format csv", kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-csv.json"), "dedup", "--format", "csv", "--header", "--key", csvKey, csv),
				stats: b.path("stats-csv.json"), verify: b.keepHash("dedup-csv", linesEqual(dist+1, "distinct + header"))},
			{tool: "duckdb SELECT DISTINCT * FROM read_csv", kind: kindPeer, needs: []string{"duckdb"},
				cmd: duck("duckdb-dedup.mjs", "--csv", csv), verify: linesEqual(dist+1, "distinct + header")},
			{tool: "mawk -F, (key columns)", kind: kindPeer, needs: []string{"mawk"},
				cmd:    command{argv: []string{"mawk", "-F,", awkCSVKey, csv}},
				verify: b.sameOutput(dist+1, "distinct + header", "dedup-csv", "fpdedup dedup --format csv")},
			{tool: "gawk -F, (key columns)", kind: kindPeer, needs: []string{"gawk"},
				cmd:    command{argv: []string{"gawk", "-F,", awkCSVKey, csv}},
				verify: b.sameOutput(dist+1, "distinct + header", "dedup-csv", "fpdedup dedup --format csv")},
			cat(csv),
		},
	}, {
		name: "dedup-zstd", title: "the same CSV zstd-compressed (MB/s of the plain CSV)",
		input: "events.csv.zst", inputBytes: d.CSVBytes, units: n, unit: "records", distinct: dist,
		ref: "fpdedup dedup --format csv (.zst)",
		rows: []rowSpec{
			{tool: "fpdedup dedup --format csv (.zst)", kind: kindFpdedup,
				cmd:    b.fp(b.path("stats-zstd.json"), "dedup", "--format", "csv", "--header", "--key", csvKey, csvZst),
				stats:  b.path("stats-zstd.json"),
				verify: b.sameOutput(dist+1, "distinct + header", "dedup-csv", "fpdedup dedup --format csv on the plain CSV")},
			{tool: "duckdb read_csv (.zst)", kind: kindPeer, needs: []string{"duckdb"},
				cmd: duck("duckdb-dedup.mjs", "--csv", csvZst), verify: linesEqual(dist+1, "distinct + header")},
			{tool: "zstd -dc | mawk -F, (key columns)", kind: kindPeer, needs: []string{"sh", "zstd", "mawk"},
				cmd:    sh(fmt.Sprintf("zstd -dc %s | mawk -F, %s", q(csvZst), q(awkCSVKey))),
				verify: b.sameOutput(dist+1, "distinct + header", "dedup-csv", "fpdedup dedup --format csv")},
			zcat(csvZst),
		},
	}, {
		name: "count", title: "each distinct line once with its count, as uniq -c prints it (sort | uniq -c: in sorted order)",
		input: "events.txt", inputBytes: d.LinesBytes, units: n, unit: "records", distinct: dist,
		ref: "fpdedup count",
		rows: []rowSpec{
			{tool: "fpdedup count", kind: kindFpdedup, cmd: b.fp(b.path("stats-count.json"), "count", "--tmpdir", b.work, lines),
				stats: b.path("stats-count.json"), verify: b.keepHash("count", linesEqual(dist, "distinct"))},
			{tool: "sort | uniq -c", kind: kindPeer, needs: []string{"sh", "sort"},
				cmd:    sh(fmt.Sprintf("LC_ALL=C sort -S 50%% %s -T %s %s | LC_ALL=C uniq -c", par, q(b.work), q(lines))),
				verify: linesEqual(dist, "distinct")},
			{tool: "duckdb GROUP BY l ORDER BY first", kind: kindPeer, needs: []string{"duckdb"},
				cmd: duck("duckdb-count.mjs", lines), verify: b.sameOutput(dist, "distinct", "count", "fpdedup count")},
			{tool: "mawk (counts, first-occurrence order)", kind: kindPeer, needs: []string{"mawk"},
				cmd:    command{argv: []string{"mawk", awkCount, lines}},
				verify: b.sameOutput(dist, "distinct", "count", "fpdedup count")},
			cat(lines),
		},
	}, {
		name: "merge", title: "the union of the indexes of the two halves of events.txt",
		input: "half-a.fpx + half-b.fpx", unit: "fingerprints", distinct: dist,
		ref: "fpdedup merge",
		prep: func(ctx context.Context, j *Job) error {
			return b.prepMerge(ctx, j, lines, halfA, halfB, hexA, hexB)
		},
		rows: []rowSpec{
			{tool: "fpdedup merge", kind: kindFpdedup, cmd: b.fp(b.path("stats-merge.json"), "merge", "-o", merged, halfA, halfB),
				stats: b.path("stats-merge.json"),
				verify: func(_ outStats, _ map[string]any) (string, *bool) {
					same, err := sameFile(merged, index)
					switch {
					case err != nil:
						return "not compared with the single build: " + err.Error(), nil
					case same:
						return "byte-identical to the single build of events.txt", truth(true)
					}
					return "bytes DIFFER from the single build of events.txt", truth(false)
				}},
			{tool: "sort -m -u (hex)", kind: kindPeer, needs: []string{"sort"}, needsFile: hexA,
				cmd: command{argv: []string{"sort", "-m", "-u", "-S", "50%", "-T", b.work, hexA, hexB}}, verify: linesEqual(dist, "distinct")},
			{tool: "floor: cat + dd conv=fsync of the output", kind: kindFloor, needs: []string{"sh", "cat", "dd"},
				cmd: floorWrite([]string{halfA, halfB}, merged)},
		},
	}}, append(append(b.parquetJobs(duck), b.mergePartitionsJob(), b.buildPartitionsJob()), append(b.redisbloomJobs(), b.etcdJobs()...)...)...)
}

// floorWrite reads the inputs and writes (with fsync) as many bytes as
// the command publishes to out: what no tool that reads those files and
// publishes that file can beat.
func (b *runner) floorWrite(inputs []string, out string) command {
	return sh(fmt.Sprintf("cat %s > /dev/null && dd if=/dev/zero of=%s bs=1M count=$(stat -c %%s %s) iflag=count_bytes conv=fsync status=none",
		strings.Join(mapQ(inputs), " "), shellQuote(b.path("floor.out")), shellQuote(out)))
}

// boundRow is dedup's floor: fpdedup-bench bound, the least an exact
// order-keeping dedup of lines does (its output checked like dedup's).
func (b *runner) boundRow(lines string, dist int64) rowSpec {
	return rowSpec{tool: "floor: split+hash+table", kind: kindFloor, needs: []string{boundPeer},
		cmd:    command{argv: []string{b.o.Bound, "-q", "bound", "--distinct", strconv.FormatInt(dist, 10), lines}},
		verify: b.sameOutput(dist, "distinct", "dedup-lines", "fpdedup dedup")}
}

// boundPeer names the bound row's binary among the peers.
const boundPeer = "fpdedup-bench bound"

// catFloor is reading f, the floor of every job that reads it once.
func catFloor(f string) rowSpec {
	return rowSpec{tool: "floor: cat", kind: kindFloor, needs: []string{"cat"}, cmd: command{argv: []string{"cat", f}}}
}

// duckHashTool is DuckDB's fastest distinct count, the peer issue 2's
// build target names.
const duckHashTool = "duckdb count(DISTINCT hash(l))"

// printsCount checks a tool that prints one number.
func printsCount(want int64, caveat string) func(outStats, map[string]any) (string, *bool) {
	return func(o outStats, _ map[string]any) (string, *bool) {
		msg := fmt.Sprintf("printed %s, generator says %d", strings.TrimSpace(o.Head), want)
		ok := strings.TrimSpace(o.Head) == fmt.Sprint(want)
		if !ok && caveat != "" {
			msg += " (" + caveat + ")"
		}
		return msg, truth(ok)
	}
}

// sortSize turns 16MiB into GNU sort's 16M.
func sortSize(s string) string {
	return strings.NewReplacer("KiB", "K", "MiB", "M", "GiB", "G").Replace(s)
}

func withStdin(c command, f string) command {
	c.stdin = f
	return c
}

// prepMerge builds the indexes of the two halves of the lines file (the
// first Records/2 records and the rest) and, for sort -m, their hex dumps.
func (b *runner) prepMerge(ctx context.Context, j *Job, lines, a, bb, hexA, hexB string) error {
	if err := b.buildHalves(ctx, "merge", lines, a, bb); err != nil {
		return err
	}
	var units uint64
	for _, p := range []string{a, bb} {
		x, err := fpstore.Open(p)
		if err != nil {
			return err
		}
		units += x.Len()
		j.InputBytes += x.Size()
		x.Close()
	}
	j.Units = int64(units)
	if b.peers["sort"].Status == "ok" {
		for _, h := range [][2]string{{a, hexA}, {bb, hexB}} {
			out, err := os.Create(h[1])
			if err != nil {
				return err
			}
			_, err = b.tool(ctx, nil, out, "--progress", "never", "-q", "dump", h[0])
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("dump %s: %w", filepath.Base(h[0]), err)
			}
		}
	}
	return nil
}

// buildHalves builds the indexes a and bb of the two halves of the lines
// file, unless they were built already (by the merge job, for the mem job).
func (b *runner) buildHalves(ctx context.Context, job, lines, a, bb string) error {
	if _, err := os.Stat(bb); err == nil {
		return nil
	}
	f, err := os.Open(lines)
	if err != nil {
		return err
	}
	defer f.Close()
	size := b.rep.Data.LinesBytes
	for i, half := range []struct {
		out      string
		off, len int64
	}{{a, 0, b.mid}, {bb, b.mid, size - b.mid}} {
		b.progress(Step{Phase: "prepare", Msg: fmt.Sprintf("%s: building the index of half %d of 2", job, i+1)})
		if _, err := b.tool(ctx, io.NewSectionReader(f, half.off, half.len), nil, "--progress", "never", "-q", "build", "-o", half.out, "-"); err != nil {
			return fmt.Errorf("build half %d: %w", i+1, err)
		}
	}
	return nil
}

// sameFile reports whether two files hold the same bytes.
func sameFile(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	// Block by block: the scale job compares indexes of tens of GB.
	x, y := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		n, errA := io.ReadFull(fa, x)
		m, errB := io.ReadFull(fb, y)
		if n != m || !bytes.Equal(x[:n], y[:m]) {
			return false, nil
		}
		if errA == io.EOF || errA == io.ErrUnexpectedEOF {
			return errB == io.EOF || errB == io.ErrUnexpectedEOF, nil
		}
		if errA != nil {
			return false, errA
		}
		if errB != nil {
			return false, errB
		}
	}
}

// num digs a number out of decoded JSON.
func num(m map[string]any, path ...string) (float64, bool) {
	v, ok := dig(m, path...)
	f, isNum := v.(float64)
	return f, ok && isNum
}

func str(m map[string]any, path ...string) (string, bool) {
	v, ok := dig(m, path...)
	s, isStr := v.(string)
	return s, ok && isStr
}

func dig(m map[string]any, path ...string) (any, bool) {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func mapQ(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shellQuote(s)
	}
	return out
}
