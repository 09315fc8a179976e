package etcdkv

// Benchmarks against the etcd of FPDEDUP_ETCD (bench/etcd.sh runs them
// side by side with etcdctl): sizes from the environment, since a
// 10^6-key prefix takes a while to load and is kept between runs.
//
//	FPDEDUP_BENCH_SCAN_KEYS   keys under the scan's prefix (10^6)
//	FPDEDUP_BENCH_PAGE        the scan's page size (10000)
//	FPDEDUP_BENCH_CREATE_KEYS keys a create run writes (10^5)
//	FPDEDUP_BENCH_PERKEY_KEYS keys a one-key-a-transaction run writes (2000)
//	FPDEDUP_BENCH_CONNS       writers at once (4)

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchPrefix holds the scan benchmark's keys, loaded once.
const benchPrefix = "/fpdedup-bench/scan/sha256/"

// loadScan makes benchPrefix hold exactly n keys, writing them with
// Create when it does not.
func loadScan(b *testing.B, eps []string, n int) {
	rc := raw(b, eps)
	ctx := context.Background()
	r, err := rc.Get(ctx, benchPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	if r.Count == int64(n) {
		return
	}
	if _, err := rc.Delete(ctx, benchPrefix, clientv3.WithPrefix()); err != nil {
		b.Fatal(err)
	}
	c := dial(b, eps, benchPrefix, nil)
	all := items(b, KeyFormat{Prefix: benchPrefix}, 0, n)
	if _, err := createParallel(ctx, c, all, 4, 1024); err != nil {
		b.Fatal(err)
	}
}

// createParallel writes items by conns goroutines, batch items a call.
func createParallel(ctx context.Context, c *Client, all []Item, conns, batch int) (CreateStats, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var total CreateStats
	var first error
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(int64(batch))) - batch
				if lo >= len(all) {
					return
				}
				st, err := c.Create(ctx, all[lo:min(lo+batch, len(all))], nil)
				mu.Lock()
				total.Add(st)
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return total, first
}

// BenchmarkScan reads the 10^6 keys (keys only) at one revision.
func BenchmarkScan(b *testing.B) {
	eps := single(b)
	n, page := envInt("FPDEDUP_BENCH_SCAN_KEYS", 1_000_000), envInt("FPDEDUP_BENCH_PAGE", 10000)
	loadScan(b, eps, n)
	c := dial(b, eps, benchPrefix, nil)
	b.ReportAllocs()
	var st ScanStats
	for b.Loop() {
		s := c.Scan(context.Background(), ScanOptions{Format: KeyFormat{Prefix: benchPrefix}, PageSize: page})
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		st = s.Stats()
		if st.Fingerprints != int64(n) {
			b.Fatalf("%d keys, want %d", st.Fingerprints, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(st.Pages), "pages")
	b.ReportMetric(float64(st.MaxPageBytes), "max-page-bytes")
}

// BenchmarkCreate writes 10^5 missing keys by FPDEDUP_BENCH_CONNS writers:
// Create (batch: flat transactions of up to 128 keys) beside a bare loop of
// the client sending the same transactions at the same concurrency; and,
// on 2000 keys (one key a transaction is ~20× slower), both sending one
// If(CreateRevision == 0) Then(Put) transaction a key.
func BenchmarkCreate(b *testing.B) {
	eps := single(b)
	nBatch, nPerKey := envInt("FPDEDUP_BENCH_CREATE_KEYS", 100_000), envInt("FPDEDUP_BENCH_PERKEY_KEYS", 2000)
	conns := envInt("FPDEDUP_BENCH_CONNS", 4)
	rc := raw(b, eps)
	ctx := context.Background()
	run := 0
	// fresh gives a new prefix of n missing keys, deleted at the end.
	fresh := func(b *testing.B, n int) []Item {
		b.StopTimer()
		defer b.StartTimer()
		run++
		p := fmt.Sprintf("/fpdedup-bench/create/%d/%d/", os.Getpid(), run)
		// Deleted and compacted away, so that runs do not pile up history
		// that slows the next ones.
		b.Cleanup(func() {
			if r, err := rc.Delete(ctx, p, clientv3.WithPrefix()); err == nil {
				rc.Compact(ctx, r.Header.Revision)
			}
		})
		return items(b, KeyFormat{Prefix: p}, 0, n)
	}
	check := func(b *testing.B, all []Item) {
		b.StopTimer()
		defer b.StartTimer()
		r, err := rc.Get(ctx, string(all[0].Key[:len(all[0].Key)-64]), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || r.Count != int64(len(all)) {
			b.Fatalf("%v keys written of %d: %v", r, len(all), err)
		}
	}
	for _, mode := range []struct {
		name      string
		perTxn, n int
	}{{"batch", 128, nBatch}, {"perkey", 1, nPerKey}} {
		n := mode.n
		b.Run("etcdkv/"+mode.name, func(b *testing.B) {
			c := dial(b, eps, "/fpdedup-bench/", func(o *Options) { o.MaxTxnOps = mode.perTxn })
			for b.Loop() {
				all := fresh(b, n)
				st, err := createParallel(ctx, c, all, conns, 1024)
				if err != nil || st.Created != n {
					b.Fatalf("%+v %v", st, err)
				}
				check(b, all)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
		b.Run("bare/"+mode.name, func(b *testing.B) {
			for b.Loop() {
				all := fresh(b, n)
				bareLoop(b, rc, all, conns, mode.perTxn)
				check(b, all)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// bareLoop is the client alone: conns goroutines, each sending
// If(CreateRevision(k) == 0 …) Then(Put(k, v) …) for per keys at a time.
func bareLoop(b *testing.B, rc *clientv3.Client, all []Item, conns, per int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(int64(per))) - per
				if lo >= len(all) {
					return
				}
				batch := all[lo:min(lo+per, len(all))]
				cmps := make([]clientv3.Cmp, len(batch))
				puts := make([]clientv3.Op, len(batch))
				for i, it := range batch {
					cmps[i] = clientv3.Compare(clientv3.CreateRevision(string(it.Key)), "=", 0)
					puts[i] = clientv3.OpPut(string(it.Key), string(it.Value))
				}
				r, err := rc.Txn(context.Background()).If(cmps...).Then(puts...).Commit()
				if err != nil || !r.Succeeded {
					failed.Store(fmt.Sprint(err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
}
