package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path/filepath"
	"strings"
)

// parquetMem is the bounded Parquet dedup's --mem, and DuckDB's
// memory_limit beside it: the figure.
const parquetMem = "256MiB"

// The rows the targets of issue 29 name: DuckDB's dedup of events.parquet
// (and under memory_limit), and the CSV jobs beside count and build.
const (
	duckParquetDedup   = "duckdb QUALIFY row_number() to Parquet"
	duckParquetBounded = duckParquetDedup + ", memory_limit " + parquetMem
	csvCountRow        = "fpdedup count --format csv (events.csv)"
	csvBuildRow        = "fpdedup build --format csv (events.csv)"
)

// parquetJobs are the Parquet jobs (issue 29): dedup of events.parquet
// to Parquet against DuckDB's, the same under --mem, and count and build
// from Parquet against the same commands on the CSV of the same records.
func (b *runner) parquetJobs(duck func(string, ...string) command) []jobSpec {
	d := &b.rep.Data
	n, dist := d.Records, d.Distinct
	pq, csv := b.path("events.parquet"), b.path("events.csv")
	out, duckOut := b.path("dedup.parquet"), b.path("duckdb-dedup.parquet")
	boundedOut, duckBoundedOut := b.path("dedup-bounded.parquet"), b.path("duckdb-dedup-bounded.parquet")
	pqIndex, csvIndex := b.path("parquet.fpx"), b.path("parquet-csv.fpx")
	duckDedup := func(o string, extra ...string) command {
		args := append([]string{"dedup", "--key", parquetKey, "--ts-ms", "timestamp_ms"}, extra...)
		return duck("duckdb-parquet.mjs", append(args, pq, o)...)
	}
	// kept checks a dedup's stats: the generator's distinct count kept.
	kept := func(_ outStats, st map[string]any) (string, *bool) {
		got, ok := num(st, "dedup", "emitted")
		if !ok {
			return "no dedup.emitted in --stats-json", truth(false)
		}
		return fmt.Sprintf("%d rows kept, generator says %d distinct keys", int64(got), dist), truth(int64(got) == dist)
	}
	// sameRows checks a Parquet output against fpdedup's unbounded one
	// (ref: it is that one, whose rows the others are compared with): the
	// same rows, every column, in the same order; an fpdedup row's stats
	// too (kept).
	sameRows := func(file, what string, fpdedup, ref bool) func(outStats, map[string]any) (string, *bool) {
		return func(o outStats, st map[string]any) (string, *bool) {
			msg, ok := "", truth(true)
			if fpdedup {
				msg, ok = kept(o, st)
				msg += "; "
			}
			lines, h, err := b.parquetRows(file)
			if err != nil {
				return msg + "its rows not read: " + err.Error(), truth(false)
			}
			if lines != dist {
				return fmt.Sprintf("%s%d rows, want %d", msg, lines, dist), truth(false)
			}
			if ref {
				b.hashes["parquet-dedup"] = h
				return strings.TrimSuffix(msg, "; "), ok
			}
			switch want := b.hashes["parquet-dedup"]; {
			case want == "":
				return fmt.Sprintf("%s%d rows; not compared (%s did not run): not judged", msg, lines, what), nil
			case h != want:
				return fmt.Sprintf("%s%d rows; rows DIFFER from %s", msg, lines, what), truth(false)
			}
			return fmt.Sprintf("%s%d rows, the same rows in the same order as %s", msg, lines, what), ok
		}
	}
	distinct := buildDistinct(dist)
	return []jobSpec{{
		name: "parquet-dedup", title: "the first row of each " + parquetKey + " of events.parquet, written as Parquet (every column, input order)",
		input: "events.parquet", inputBytes: d.ParquetBytes, units: n, unit: "rows", distinct: dist,
		ref: "fpdedup dedup (Parquet)",
		rows: []rowSpec{
			{tool: "fpdedup dedup (Parquet)", kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-parquet-dedup.json"), "dedup", "--key", parquetKey, "-o", out, pq),
				stats: b.path("stats-parquet-dedup.json"), verify: sameRows(out, "", true, true)},
			{tool: duckParquetDedup, kind: kindPeer, needs: []string{"duckdb"},
				cmd: duckDedup(duckOut), verify: sameRows(duckOut, "fpdedup dedup", false, false)},
		},
	}, {
		name: "parquet-bounded", title: "the same under --mem " + parquetMem + " (DuckDB: memory_limit " + parquetMem + ")",
		input: "events.parquet", inputBytes: d.ParquetBytes, units: n, unit: "rows", distinct: dist,
		ref: "fpdedup --mem " + parquetMem + " dedup (Parquet)",
		rows: []rowSpec{
			{tool: "fpdedup --mem " + parquetMem + " dedup (Parquet)", kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-parquet-bounded.json"), "--mem", parquetMem, "dedup", "--tmpdir", b.work, "--key", parquetKey, "-o", boundedOut, pq),
				stats: b.path("stats-parquet-bounded.json"), verify: sameRows(boundedOut, "fpdedup dedup in memory", true, false)},
			{tool: duckParquetBounded, kind: kindPeer, needs: []string{"duckdb"}, givesUp: "Out of Memory Error",
				cmd: duckDedup(duckBoundedOut, "--memory-limit", parquetMem), verify: sameRows(duckBoundedOut, "fpdedup dedup", false, false)},
		},
	}, {
		name: "parquet-count", title: "each distinct " + parquetKey + " of events.parquet with its count (beside: the same of events.csv)",
		input: "events.parquet", inputBytes: d.ParquetBytes, units: n, unit: "rows", distinct: dist,
		ref: "fpdedup count (Parquet)",
		rows: []rowSpec{
			{tool: "fpdedup count (Parquet)", kind: kindFpdedup,
				cmd:    b.fp(b.path("stats-parquet-count.json"), "count", "--tmpdir", b.work, "--key", parquetKey, pq),
				stats:  b.path("stats-parquet-count.json"),
				verify: linesEqual(dist, "distinct")},
			{tool: csvCountRow, kind: kindFpdedup,
				cmd: b.fp("", "count", "--tmpdir", b.work, "--format", "csv", "--header", "--key", csvKey, csv),
				verify: func(o outStats, st map[string]any) (string, *bool) {
					msg, ok := linesEqual(dist, "distinct")(o, st)
					// The CSV's counts, each with its record's key fields
					// joined as the Parquet count prints its key text.
					pqLines := &lineHash{h: sha256.New()}
					csvHash := &lineHash{h: sha256.New()}
					csvLines := &keyedCounts{out: csvHash}
					_, errP := b.tool(context.Background(), nil, pqLines, "--progress", "never", "-q", "count", "--tsv", "--tmpdir", b.work, "--key", parquetKey, pq)
					_, errC := b.tool(context.Background(), nil, csvLines, "--progress", "never", "-q", "count", "--tsv", "--tmpdir", b.work, "--format", "csv", "--header", "--key", csvKey, csv)
					switch {
					case errP != nil || errC != nil:
						return msg + "; not compared with the Parquet count: " + errors.Join(errP, errC).Error(), truth(false)
					case !bytes.Equal(pqLines.h.Sum(nil), csvHash.h.Sum(nil)):
						return msg + "; counts or keys DIFFER from the Parquet count's", truth(false)
					}
					return msg + "; the Parquet count's keys and counts, in its order", ok
				}},
		},
	}, {
		name: "parquet-build", title: "an index of the " + parquetKey + " of events.parquet (beside: the same of events.csv)",
		input: "events.parquet", inputBytes: d.ParquetBytes, units: n, unit: "rows", distinct: dist,
		ref: "fpdedup build (Parquet)",
		rows: []rowSpec{
			{tool: "fpdedup build (Parquet)", kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-parquet-build.json"), "build", "--key", parquetKey, "-o", pqIndex, pq),
				stats: b.path("stats-parquet-build.json"), verify: distinct},
			{tool: csvBuildRow, kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-parquet-csv-build.json"), "build", "--format", "csv", "--header", "--key", csvKey, "-o", csvIndex, csv),
				stats: b.path("stats-parquet-csv-build.json"),
				verify: func(o outStats, st map[string]any) (string, *bool) {
					msg, ok := distinct(o, st)
					a, errA := b.dumpHash(pqIndex)
					c, errC := b.dumpHash(csvIndex)
					switch {
					case errA != nil || errC != nil:
						return msg + "; not compared with the Parquet build", ok
					case a != c:
						return msg + "; fingerprints DIFFER from the Parquet build's", truth(false)
					}
					return msg + "; the same fingerprints as the Parquet build (dump)", ok
				}},
		},
	}}
}

// parquetRows counts the rows of a Parquet output by all its columns
// (fpdedup count: a line a distinct row, in first-occurrence order) and
// hashes the lines: two files with the same hash hold the same rows in
// the same order.
func (b *runner) parquetRows(file string) (int64, string, error) {
	h := &lineHash{h: sha256.New()}
	if _, err := b.tool(context.Background(), nil, h, "--progress", "never", "-q", "count", "--tmpdir", b.work, "--key", parquetAllColumns, file); err != nil {
		return 0, "", fmt.Errorf("count %s: %w", filepath.Base(file), err)
	}
	return h.lines, hex.EncodeToString(h.h.Sum(nil)), nil
}

// dumpHash hashes fpdedup dump of an index: its fingerprints in order.
func (b *runner) dumpHash(index string) (string, error) {
	h := sha256.New()
	if _, err := b.tool(context.Background(), nil, h, "--progress", "never", "-q", "dump", index); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// keyedCounts turns count --tsv lines of the generator's CSV records,
// COUNT<TAB>u1,d2,ts,event,amount, into COUNT<TAB>u1:d2:ts, the Parquet
// count's line for the same key, and writes them to out.
type keyedCounts struct {
	out     io.Writer
	partial []byte
}

func (k *keyedCounts) Write(p []byte) (int, error) {
	k.partial = append(k.partial, p...)
	var line []byte
	for {
		i := bytes.IndexByte(k.partial, '\n')
		if i < 0 {
			break
		}
		rec := k.partial[:i]
		fields := bytes.SplitN(rec, []byte(","), 4)
		if len(fields) == 4 {
			rec = bytes.Join(fields[:3], []byte(":"))
		}
		line = append(append(line[:0], rec...), '\n')
		if _, err := k.out.Write(line); err != nil {
			return 0, err
		}
		k.partial = k.partial[i+1:]
	}
	k.partial = append([]byte(nil), k.partial...)
	return len(p), nil
}

type lineHash struct {
	h     hash.Hash
	lines int64
}

func (l *lineHash) Write(p []byte) (int, error) {
	for _, c := range p {
		if c == '\n' {
			l.lines++
		}
	}
	return l.h.Write(p)
}
