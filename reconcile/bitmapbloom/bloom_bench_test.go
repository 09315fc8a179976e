package bitmapbloom

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// BenchmarkBloomBitTests is the in-memory half of a bloom audit's bare
// reference (bench/l2bloom.sh): every fingerprint of an index tested
// against a bitmap of the layout already in memory, K bits each, with
// nothing else: no reads, no passes, no missing index. The index and the
// layout come from $FPDEDUP_BENCH_INDEX and $FPDEDUP_BENCH_L2
// (shards=N,bits=M,k=K); without them, 1M random fingerprints in 16 shards
// of 2^24 bits.
func BenchmarkBloomBitTests(b *testing.B) {
	path := os.Getenv("FPDEDUP_BENCH_INDEX")
	l := l2bloom.Layout{Shards: 16, Bits: 1 << 24, K: 3}
	if s := os.Getenv("FPDEDUP_BENCH_L2"); s != "" {
		var err error
		if l, err = parseLayout(s); err != nil {
			b.Fatal(err)
		}
	}
	if path == "" {
		path = filepath.Join(b.TempDir(), "bench.fpx")
		// Ascending, evenly spread: what a sorted index of random keys is.
		fps := make([]fpstore.Fingerprint, 1_000_000)
		step := ^uint64(0) / uint64(len(fps))
		for i := range fps {
			fps[i] = fpstore.Fingerprint{Hi: uint64(i) * step, Lo: uint64(i) * 0xbf58476d1ce4e5b9}
		}
		reconciletest.WriteIndex(b, path, "xxh3", fps)
	}
	x, err := fpstore.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	shardBytes := uint64(l.ShardBytes())
	bitmap, err := hugemem.Alloc(int(shardBytes * l.Shards)) // in huge pages, as the audit's
	if err != nil {
		b.Fatal(err)
	}
	defer hugemem.Free(bitmap)
	for i := range bitmap {
		bitmap[i] = 0xfe // every bit but one in eight: most keys test all K
	}
	loc := l.Locator()
	pos := make([]uint64, l.K)
	held := 0
	b.ResetTimer()
	for b.Loop() {
		held = 0
		err := x.Scan(func(fps []fpstore.Fingerprint) error {
			for _, fp := range fps {
				s := loc.Shard(fp.Hi)
				loc.Bits(fp.Hi, fp.Lo, pos)
				all := true
				for _, p := range pos {
					if !l2bloom.IsSet(bitmap[s*shardBytes:], p) {
						all = false
						break
					}
				}
				if all {
					held++
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(x.Len()), "ns/key")
	b.ReportMetric(float64(held), "held")
}

// parseLayout reads shards=N,bits=M,k=K.
func parseLayout(s string) (l2bloom.Layout, error) {
	q, err := url.ParseQuery(strings.ReplaceAll(s, ",", "&"))
	if err != nil {
		return l2bloom.Layout{}, err
	}
	spec, err := ParseSpec("", "b*", online.NewParams(q))
	return spec.Layout, err
}
