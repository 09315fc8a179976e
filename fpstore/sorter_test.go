package fpstore

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

func TestSorterMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	base := randomFPs(r, 50_000)
	// Duplicates near and far, and a skewed cluster sharing all of Hi.
	input := slices.Clone(base)
	for i := 0; i < 30_000; i++ {
		input = append(input, base[r.IntN(len(base))])
	}
	for i := 0; i < 3000; i++ {
		input = append(input, Fingerprint{42, r.Uint64()})
	}
	want := sortUnique(input)
	for _, tc := range []struct {
		name       string
		collectors int
		budget     int64
	}{{"memory-1", 1, 1 << 30}, {"memory-3", 3, 1 << 30}, {"spill-1", 1, 1}, {"spill-4", 4, 200_000}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := NewSorter(dir, tc.budget)
			defer s.Close()
			cs := make([]*Collector, tc.collectors)
			for i := range cs {
				var err error
				if cs[i], err = s.NewCollector(len(cs)); err != nil {
					t.Fatal(err)
				}
				defer cs[i].Free()
			}
			for i := 0; i < len(input); i += 1000 {
				if err := cs[(i/1000)%len(cs)].Add(input[i:min(i+1000, len(input))]); err != nil {
					t.Fatal(err)
				}
			}
			var got []Fingerprint
			if err := s.Emit(cs, 2, func(b []Fingerprint) error { got = append(got, b...); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %d fingerprints, want %d", len(got), len(want))
			}
			if tc.budget < 1<<20+1 && s.Spills() == 0 {
				t.Fatal("tiny budget did not spill")
			}
			s.Close()
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("runs left behind: %d", len(left))
			}
		})
	}
}

func TestSortUniqueSkewedIsNotQuadratic(t *testing.T) {
	a := make([]Fingerprint, 200_000)
	for i := range a {
		a[i] = Fingerprint{7, uint64(len(a) - i)}
	}
	got, moves := sortUniqueCounting([][]Fingerprint{a[:1000], a[1000:]}, len(a), nil)
	if len(got) != len(a) || !slices.IsSortedFunc(got, Fingerprint.Compare) {
		t.Fatal("not sorted")
	}
	// Insertion sort only ever moves a fingerprint within a bucket of at
	// most 16 (it runs over the whole array only when every bucket is that
	// small, and compares across buckets move nothing): at most 15·16/2
	// moves a bucket, so at most 8 a fingerprint. All of them in one bucket
	// would be n²/2 = 2e10 moves.
	if moves > 8*len(a) {
		t.Fatalf("insertion sort moved %d fingerprints for %d: quadratic", moves, len(a))
	}
}

// BenchmarkSortPartition sorts and dedups one partition as a build of the
// 10M-line reference file makes them: ~9.8k fingerprints (10M / 2^10) in
// blocks, 38% of them repeats of others in the partition, sharing their
// first partBits bits.
func BenchmarkSortPartition(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 9766
	distinct := make([]Fingerprint, n*62/100)
	for i := range distinct {
		distinct[i] = Fingerprint{r.Uint64()>>partBits | 5<<(64-partBits), r.Uint64()}
	}
	in := slices.Clone(distinct)
	for len(in) < n {
		in = append(in, distinct[r.IntN(len(distinct))])
	}
	r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	blocks := [][]Fingerprint{in[:16], in[16:48], in[48:112], in[112:4208], in[4208:]}
	dst := make([]Fingerprint, n+n/4)
	b.ReportAllocs()
	for b.Loop() {
		if out := sortUniqueBlocks(blocks, n, dst); len(out) != len(distinct) {
			b.Fatalf("%d distinct, want %d", len(out), len(distinct))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/fingerprint")
}
