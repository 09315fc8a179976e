package redisbloom_test

// Benchmarks against the RedisBloom module of FPDEDUP_REDIS_ADDR (database
// 10, kept between runs: loading takes a while), side by side: the audit
// (the CLI, records read for the key texts) beside the bare reads of the
// same dumps (BF.SCANDUMP loops) and beside asking every key with
// pipelined BF.MEXISTS; the rebuild of every shard beside the bare
// BF.LOADCHUNK of the same dumps. Sizes from the environment:
//
//	FPDEDUP_BENCH_RB_KEYS      truth keys (10^6), 1% of them never added
//	FPDEDUP_BENCH_RB_SHARDS    filters, routed by mod-md5 (16)
//	FPDEDUP_BENCH_RB_CAPACITY  BF.RESERVE's capacity a filter (keys/shards/6:
//	                           three sub-filters or more at EXPANSION 2)
//	FPDEDUP_BENCH_RB_EXTRA     items added besides the truth's, spread over
//	                           the shards (0): the history an online filter
//	                           holds beside a day's keys
//
//	go test -run '^$' -bench . -benchtime 5x ./reconcile/redisbloom/

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// rbBench is the loaded filters and the truth's files.
type rbBench struct {
	c      *redis.Client
	dir    string
	shards int
	keys   int
	router *rbloom.Router
}

func (rb *rbBench) key(s int) string { return fmt.Sprintf("rbbench:{%d}", s) }

func (rb *rbBench) url() string {
	return fmt.Sprintf("redis://%s/10?bf=rbbench:{*}&shards=%d&route=mod-md5&item=key", os.Getenv("FPDEDUP_REDIS_ADDR"), rb.shards)
}

// setup writes the records and the index, and loads the filters unless
// they hold what this size adds already.
func setup(b *testing.B) *rbBench {
	b.Helper()
	addr := os.Getenv("FPDEDUP_REDIS_ADDR")
	if addr == "" {
		b.Skip("FPDEDUP_REDIS_ADDR is not set (scripts/services/with-services.sh sets it)")
	}
	rb := &rbBench{c: redis.NewClient(&redis.Options{Addr: addr, DB: 10, Protocol: 2}), dir: b.TempDir(),
		shards: envInt("FPDEDUP_BENCH_RB_SHARDS", 16), keys: envInt("FPDEDUP_BENCH_RB_KEYS", 1_000_000)}
	b.Cleanup(func() { rb.c.Close() })
	var err error
	if rb.router, err = rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: rb.shards}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	f, err := os.Create(filepath.Join(rb.dir, "keys.txt"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	adds := make([][]any, rb.shards)
	added := 0
	for i := range rb.keys {
		k := fmt.Sprintf("k%09d", i)
		w.WriteString(k + "\n")
		if i%100 != 0 {
			s := rb.router.Shard([]byte(k))
			adds[s] = append(adds[s], k)
			added++
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	extra := envInt("FPDEDUP_BENCH_RB_EXTRA", 0)
	cmd := exec.Command(reconciletest.CLIBinary(b), "build", "-q", "-o", "truth.fpx", "keys.txt")
	cmd.Dir = rb.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	capacity := envInt("FPDEDUP_BENCH_RB_CAPACITY", max(rb.keys/rb.shards/6, 1))
	// What was loaded last, marked once it was whole.
	mark := fmt.Sprintf("keys=%d shards=%d capacity=%d extra=%d", rb.keys, rb.shards, capacity, extra)
	if v, _ := rb.c.Get(ctx, "rbbench:loaded").Result(); v == mark {
		return rb
	}
	rb.c.FlushDB(ctx)
	for s := range rb.shards {
		if err := rb.c.Do(ctx, "BF.RESERVE", rb.key(s), 0.01, capacity, "EXPANSION", 2).Err(); err != nil {
			b.Fatal(err)
		}
		p := rb.c.Pipeline()
		for items := adds[s]; len(items) > 0; {
			m := min(len(items), 1000)
			p.Do(ctx, append([]any{"BF.MADD", rb.key(s)}, items[:m]...)...)
			items = items[m:]
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for from := 0; from < extra; from += 100_000 {
		p := rb.c.Pipeline()
		items := make([][]any, rb.shards)
		for i := from; i < min(from+100_000, extra); i++ {
			items[i%rb.shards] = append(items[i%rb.shards], fmt.Sprintf("x%010d", i))
		}
		for s, its := range items {
			for len(its) > 0 {
				m := min(len(its), 1000)
				p.Do(ctx, append([]any{"BF.MADD", rb.key(s)}, its[:m]...)...)
				its = its[m:]
			}
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := rb.c.Set(ctx, "rbbench:loaded", mark, 0).Err(); err != nil {
		b.Fatal(err)
	}
	return rb
}

func (rb *rbBench) fpdedup(b *testing.B, args ...string) {
	b.Helper()
	cmd := exec.Command(reconciletest.CLIBinary(b), args...)
	cmd.Dir = rb.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			b.Fatalf("fpdedup %v: %v\n%s", args, err, out)
		}
	}
}

// dumps reads every filter's dump: its header then its bits, each chunk
// with the iterator BF.LOADCHUNK takes it with.
func (rb *rbBench) dumps(b *testing.B) (bytes int64, chunks [][][2]any) {
	ctx := context.Background()
	chunks = make([][][2]any, rb.shards)
	for s := range rb.shards {
		it := int64(0)
		for {
			v, err := rb.c.Do(ctx, "BF.SCANDUMP", rb.key(s), it).Slice()
			if err != nil {
				b.Fatal(err)
			}
			if it = v[0].(int64); it == 0 {
				break
			}
			data := v[1].(string)
			bytes += int64(len(data))
			chunks[s] = append(chunks[s], [2]any{it, data})
		}
	}
	return bytes, chunks
}

// BenchmarkAuditCLI is the audit, as run: the records read for their key
// texts, each filter's dump read, every key tested, the missing asked
// again.
func BenchmarkAuditCLI(b *testing.B) {
	rb := setup(b)
	for b.Loop() {
		rb.fpdedup(b, "reconcile", "-q", "--index", "truth.fpx", "--records", "keys.txt", "--online", rb.url())
	}
}

// BenchmarkBareScandump reads the same dumps with bare BF.SCANDUMP loops.
func BenchmarkBareScandump(b *testing.B) {
	rb := setup(b)
	var n int64
	for b.Loop() {
		n, _ = rb.dumps(b)
	}
	b.SetBytes(n)
}

// BenchmarkMExistsAll asks every truth key of the records in its shard,
// BF.MEXISTS of 1000 keys a command, 64 commands a pipeline.
func BenchmarkMExistsAll(b *testing.B) {
	rb := setup(b)
	ctx := context.Background()
	for b.Loop() {
		f, err := os.Open(filepath.Join(rb.dir, "keys.txt"))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		batch := make([][]any, rb.shards)
		p := rb.c.Pipeline()
		send := func(s int) {
			p.Do(ctx, append([]any{"BF.MEXISTS", rb.key(s)}, batch[s]...)...)
			batch[s] = batch[s][:0]
			if p.Len() == 64 {
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		for sc.Scan() {
			k := sc.Text()
			s := rb.router.Shard([]byte(k))
			if batch[s] = append(batch[s], k); len(batch[s]) == 1000 {
				send(s)
			}
		}
		for s := range batch {
			if len(batch[s]) > 0 {
				send(s)
			}
		}
		if _, err := p.Exec(ctx); err != nil && p.Len() > 0 {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkRebuild rebuilds every shard from the truth, as reserved
// (cli: the rebuilt filters hold the truth's keys alone, each run's live
// ones the last run's), then writes the same filters' dumps with bare
// BF.LOADCHUNK into new keys, pipelined a filter at a time
// (bare-loadchunk). The history loaded is replaced: the next setup loads
// it again.
func BenchmarkRebuild(b *testing.B) {
	rb := setup(b)
	ctx := context.Background()
	b.Cleanup(func() { rb.c.Del(ctx, "rbbench:loaded") })
	b.Run("cli", func(b *testing.B) {
		for b.Loop() {
			rb.fpdedup(b, "reconcile", "-q", "--index", "truth.fpx", "--records", "keys.txt", "--online", rb.url(), "--rebuild-shard", "all")
		}
	})
	b.Run("bare-loadchunk", func(b *testing.B) {
		n, chunks := rb.dumps(b)
		b.SetBytes(n)
		for b.Loop() {
			for s := range rb.shards {
				p := rb.c.Pipeline()
				k := rb.key(s) + ":bare"
				p.Del(ctx, k)
				for _, c := range chunks[s] {
					p.Do(ctx, "BF.LOADCHUNK", k, c[0], c[1])
				}
				p.Del(ctx, k)
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
