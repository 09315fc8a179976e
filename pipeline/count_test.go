package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fpdedup/fpdedup/ingest"
)

// TestCountAndKeepLastMatchMap: Count prints what a Go map of counts in
// first-occurrence order says, and dedup --keep last the last occurrences,
// with the key table in memory and spilled to runs (a small budget), on one
// thread and two, from a file and from stdin (spooled).
func TestCountAndKeepLastMatchMap(t *testing.T) {
	if testing.Short() {
		t.Skip("the spilled tally needs 400k distinct keys")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	var in bytes.Buffer
	var lines []string
	for i := range 700_000 {
		k := i % 400_000
		if i%2 == 1 {
			k = r.IntN(400_000)
		}
		l := fmt.Sprintf("k%d", k)
		lines = append(lines, l)
		in.WriteString(l + "\n")
	}
	path := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(path, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	var order []string
	lastAt := map[string]int{}
	for i, l := range lines {
		if counts[l] == 0 {
			order = append(order, l)
		}
		counts[l]++
		lastAt[l] = i
	}
	var wantCount, wantMin3, wantLast, wantTop bytes.Buffer
	for _, l := range order {
		fmt.Fprintf(&wantCount, "%7d %s\n", counts[l], l)
		if counts[l] >= 3 {
			fmt.Fprintf(&wantMin3, "%d\t%s\n", counts[l], l)
		}
	}
	// --top 50: the most frequent, ties in first-occurrence order (a
	// stable sort of the keys in that order).
	top := slices.Clone(order)
	slices.SortStableFunc(top, func(a, b string) int { return counts[b] - counts[a] })
	for _, l := range top[:50] {
		fmt.Fprintf(&wantTop, "%7d %s\n", counts[l], l)
	}
	for i, l := range lines {
		if lastAt[l] == i {
			wantLast.WriteString(l + "\n")
		}
	}
	records := func() ingest.RecordOptions {
		bad, _ := ingest.ParseOnBad("fail")
		return ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}, Hash: ingest.XXH3, OnBad: bad}
	}
	for _, mem := range []int64{1 << 30, 16 << 20} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("mem=%d/threads=%d", mem>>20, threads), func(t *testing.T) {
				var out bytes.Buffer
				st, err := Count(context.Background(), CountOptions{Inputs: []string{path}, Records: records(), Threads: threads, Mem: mem, TmpDir: t.TempDir()}, &out)
				if err != nil {
					t.Fatal(err)
				}
				if spilled := st.Runs > 0; spilled != (mem < 1<<30) {
					t.Fatalf("runs spilled: %d, at --mem %d MiB", st.Runs, mem>>20)
				}
				if !bytes.Equal(out.Bytes(), wantCount.Bytes()) || st.Distinct != int64(len(order)) || st.Records != int64(len(lines)) {
					t.Fatalf("count differs from the map's (%d bytes vs %d; %+v)", out.Len(), wantCount.Len(), st)
				}
				out.Reset()
				if _, err := Count(context.Background(), CountOptions{Inputs: []string{path}, Records: records(), MinCount: 3, TSV: true, Threads: threads, Mem: mem, TmpDir: t.TempDir()}, &out); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), wantMin3.Bytes()) {
					t.Fatal("--min-count 3 --tsv differs from the map's")
				}
				out.Reset()
				if _, err := Count(context.Background(), CountOptions{Inputs: []string{path}, Records: records(), Top: 50, Threads: threads, Mem: mem, TmpDir: t.TempDir()}, &out); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), wantTop.Bytes()) {
					t.Fatalf("--top 50 differs from the map's:\n%s\nwant:\n%s", out.Bytes(), wantTop.Bytes())
				}
				out.Reset()
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				_, err = Dedup(context.Background(), DedupOptions{Inputs: []string{"-"}, Stdin: f, Records: records(), KeepLast: true, Threads: threads, Mem: mem, TmpDir: t.TempDir()}, &out)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), wantLast.Bytes()) {
					t.Fatalf("--keep last from stdin differs from the map's (%d bytes vs %d)", out.Len(), wantLast.Len())
				}
			})
		}
	}
}

// TestCountInputsMatchMap: count over several csv inputs with a header (an
// empty one among them, one whose last record lacks its line feed, one with
// bad and too-long records, skipped under --on-bad skip but numbered)
// prints what a map over their concatenated good records says, and it
// does so from counts by record number (byPosition), whose arrays the
// first pass sizes: sized one short, they would not be made (the second
// pass then probes the table).
func TestCountInputsMatchMap(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	var order []string
	counts := map[string]int{}
	var inputs []string
	good := 0
	for i, n := range []int{3000, 0, 1, 40_000, 7, 500} {
		var b bytes.Buffer
		b.WriteString("id,v\n")
		for j := range n {
			rec := fmt.Sprintf("%d,%d", r.IntN(5000), r.IntN(2)) // repeats across inputs
			if i == 5 && j%7 == 3 {
				// A bad record (no second column) or a too-long one (over
				// MaxRecord): skipped, yet numbered.
				rec = fmt.Sprintf("%d", j)
				if j%2 == 0 {
					rec = fmt.Sprintf("%d,%0200d", j, j)
				}
				b.WriteString(rec + "\n")
				continue
			}
			good++
			if counts[rec] == 0 {
				order = append(order, rec)
			}
			counts[rec]++
			b.WriteString(rec)
			if j < n-1 || i != 3 {
				b.WriteByte('\n')
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("in%d.csv", i))
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, path)
	}
	var want bytes.Buffer
	for _, rec := range order {
		fmt.Fprintf(&want, "%7d %s\n", counts[rec], rec)
	}
	for _, threads := range []int{1, 2, 3} {
		bad, _ := ingest.ParseOnBad("skip")
		records := ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatCSV, Header: true, Keys: []string{"id", "v"}, Sep: ":"}, Hash: ingest.XXH3, OnBad: bad, MaxRecord: 100}
		var out bytes.Buffer
		if _, err := Count(context.Background(), CountOptions{Inputs: inputs, Records: records, Threads: threads, Mem: 1 << 30, TmpDir: t.TempDir()}, &out); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want.Bytes()) {
			t.Fatalf("threads %d: count differs from the map's (%d bytes vs %d)", threads, out.Len(), want.Len())
		}
		ts, _, done, err := twoPasses(context.Background(), tallyOptions{Inputs: inputs, Records: records, Threads: threads, Tables: 1 << 30, TmpDir: t.TempDir(), Progress: &ingest.Progress{}}, newHeaders())
		if err != nil {
			t.Fatal(err)
		}
		bp := ts.countsByPosition(1<<30, threads)
		if bp == nil {
			t.Fatalf("threads %d: no counts by position", threads)
		}
		var n int
		for _, c := range bp.counts {
			for _, k := range c {
				n += int(k)
			}
		}
		if n != good {
			t.Fatalf("threads %d: the counts by position add up to %d records", threads, n)
		}
		bp.free()
		ts.free()
		done()
	}
}
