package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	var wantCount, wantMin3, wantLast bytes.Buffer
	for _, l := range order {
		fmt.Fprintf(&wantCount, "%7d %s\n", counts[l], l)
		if counts[l] >= 3 {
			fmt.Fprintf(&wantMin3, "%d\t%s\n", counts[l], l)
		}
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
