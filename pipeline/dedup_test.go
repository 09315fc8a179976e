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

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// TestDedupMatchesMap: Dedup keeps exactly the records a Go map calls new,
// in input order, and --emit duplicates the others, whatever the threads
// and whether the seen-set fits in memory or runs in the bounded mode; the
// --record index holds exactly the fingerprints of the first occurrences.
func TestDedupMatchesMap(t *testing.T) {
	if testing.Short() {
		t.Skip("the bounded mode needs 600k distinct keys")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	var in bytes.Buffer
	var lines []string
	for i := range 900_000 {
		// 600k distinct: more than a 16 MiB --mem's table holds; repeats
		// near and far.
		k := i
		if i%3 == 2 {
			k = r.IntN(i)
		}
		l := fmt.Sprintf("key-%d", k%600_000)
		lines = append(lines, l)
		in.WriteString(l + "\n")
	}
	path := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(path, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var first, dups bytes.Buffer
	seen := map[string]bool{}
	var firstFPs []fpstore.Fingerprint
	for _, l := range lines {
		if seen[l] {
			dups.WriteString(l + "\n")
			continue
		}
		seen[l] = true
		first.WriteString(l + "\n")
		firstFPs = append(firstFPs, ingest.XXH3.Sum([]byte(l)))
	}
	slices.SortFunc(firstFPs, fpstore.Fingerprint.Compare)

	for _, tc := range []struct {
		threads int
		mem     int64
		mode    string
	}{{1, 1 << 30, "memory"}, {2, 1 << 30, "memory"}, {1, 16 << 20, "lsm"}, {2, 16 << 20, "lsm"}} {
		for _, emitDups := range []bool{false, true} {
			t.Run(fmt.Sprintf("threads=%d/%s/duplicates=%v", tc.threads, tc.mode, emitDups), func(t *testing.T) {
				bad, err := ingest.ParseOnBad("fail")
				if err != nil {
					t.Fatal(err)
				}
				rec := filepath.Join(t.TempDir(), "rec.fpx")
				opts := DedupOptions{
					Inputs:         []string{path},
					Records:        ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}, Hash: ingest.XXH3, OnBad: bad},
					EmitDuplicates: emitDups, Record: rec, RecordSpec: fpstore.Spec{Hash: ingest.XXH3.String()},
					Threads: tc.threads, Mem: tc.mem, TmpDir: t.TempDir(),
				}
				var out bytes.Buffer
				st, err := Dedup(context.Background(), opts, &out)
				if err != nil {
					t.Fatal(err)
				}
				want := first.Bytes()
				if emitDups {
					want = dups.Bytes()
				}
				if !bytes.Equal(out.Bytes(), want) {
					t.Fatalf("output differs from the map's (%d bytes vs %d)", out.Len(), len(want))
				}
				if st.Mode != tc.mode || st.FirstOccurrences != int64(len(seen)) || st.Records != int64(len(lines)) {
					t.Fatalf("stats %+v", st)
				}
				x, err := fpstore.Open(rec)
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
				var got []fpstore.Fingerprint
				if err := x.Scan(func(fps []fpstore.Fingerprint) error { got = append(got, fps...); return nil }); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, firstFPs) {
					t.Fatalf("--record holds %d fingerprints, want the %d of the first occurrences", len(got), len(firstFPs))
				}
			})
		}
	}
}
