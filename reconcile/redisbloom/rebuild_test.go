package redisbloom_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// dumpOf is a filter's whole dump (header and bits) as BF.SCANDUMP gives
// it; nil when the key does not exist.
func dumpOf(t *testing.T, c redis.UniversalClient, key string) []byte {
	t.Helper()
	ctx := context.Background()
	var all []byte
	it := int64(0)
	for {
		v, err := c.Do(ctx, "BF.SCANDUMP", key, it).Slice()
		if err != nil {
			if err.Error() == "ERR not found" {
				return nil
			}
			t.Fatal(err)
		}
		it = v[0].(int64)
		if it == 0 {
			return all
		}
		all = append(all, v[1].(string)...)
	}
}

// refFilter is the filter the module itself builds for shard s's truth
// keys: BF.RESERVE with the parameters (opts: EXPANSION n, NONSCALING),
// then BF.MADD of their items in the records' order; its dump.
func (rc *rbCase) refFilter(t *testing.T, s int, errRate float64, capacity int, opts ...any) []byte {
	t.Helper()
	ctx := context.Background()
	ref := "ref:" + rc.key(s)
	rc.c.Del(ctx, ref)
	if err := rc.c.Do(ctx, append([]any{"BF.RESERVE", ref, errRate, capacity}, opts...)...).Err(); err != nil {
		t.Fatal(err)
	}
	var items []any
	for _, k := range rc.keys {
		if rc.router.shard(k) == s {
			items = append(items, refItem(rc.item, k))
		}
	}
	for len(items) > 0 {
		m := min(len(items), 1000)
		if err := rc.c.Do(ctx, append([]any{"BF.MADD", ref}, items[:m]...)...).Err(); err != nil {
			t.Fatal(err)
		}
		items = items[m:]
	}
	d := dumpOf(t, rc.c, ref)
	rc.c.Del(ctx, ref)
	return d
}

// TestRebuild: shards flushed (the filter deleted) and damaged (items
// lost) are rebuilt from the truth, at the capacity and error given or
// the live filter's own: each is, byte for byte, the filter the module
// builds for those keys (BF.RESERVE, then BF.MADD in the records' order);
// no KEY:rebuild is left; the run exits 0 only after reading them back,
// and a re-audit exits 0. The dry run writes nothing. Standalone and in
// the Cluster.
func TestRebuild(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster bool
		router  *refRouter
		item    string
	}{
		{"sha256, mod-md5", false, newRefRouter("mod-md5", 4, nil, 0), "sha256"},
		{"key, ring, cluster", true, newRefRouter("ring", 0, []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"}, 40), "key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			rc := &rbCase{template: "rb:{*}", router: c.router, item: c.item, n: 8000, capacity: 300, errRate: 0.01}
			if c.cluster {
				rc.c, rc.url = reconciletest.ClusterClient(t), func(q string) string { return reconciletest.ClusterURL(t, q) }
			} else {
				rc.c, rc.url = reconciletest.RedisDB(t, 9), func(q string) string { return reconciletest.RedisURL(t, 9, q) }
			}
			rc.setup(t)
			rc.c.Del(ctx, rc.key(0)) // flushed
			name0, name1 := rc.router.name(0), rc.router.name(1)

			// A missing filter needs its parameters.
			r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", name0)...).Want(t, 2)
			if !strings.Contains(r.Stderr, rc.key(0)) || !strings.Contains(r.Stderr, "--capacity") {
				t.Fatalf("stderr: %s", r.Stderr)
			}

			// The dry run says what it would do and writes nothing.
			before := dumpOf(t, rc.c, rc.key(1))
			r = reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", name0+","+name1, "--capacity", "5000", "--error", "0.001", "--dry-run")...).Want(t, 1)
			if !strings.Contains(r.Stdout, "REBUILD "+rc.key(0)) || !strings.Contains(r.Stdout, "REBUILD "+rc.key(1)) {
				t.Fatalf("dry run: %s", r.Stdout)
			}
			if n := rc.c.Exists(ctx, rc.key(0), rc.key(0)+":rebuild", rc.key(1)+":rebuild").Val(); n != 0 || !bytes.Equal(dumpOf(t, rc.c, rc.key(1)), before) {
				t.Fatal("the dry run wrote")
			}

			// Given parameters (shards 0 and 1), then the live filter's
			// own (every shard).
			// (Exit 1: the shards not rebuilt miss keys.)
			reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", name0+","+name1, "--capacity", "5000", "--error", "0.001", "--report", "r.json")...).Want(t, 1)
			rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json"))
			if rs := rep.Rebuild; rs == nil || rs.Rebuilt != 2 || rs.Swapped != 2 || rep.ReadBack == nil || rep.ReadBack.Short != 0 || rep.ReadBack.NotHeld != 0 {
				t.Fatalf("rebuild %+v, read back %+v", rep.Rebuild, rep.ReadBack)
			}
			var dumped int64
			for s := range 2 {
				got, want := dumpOf(t, rc.c, rc.key(s)), rc.refFilter(t, s, 0.001, 5000, "EXPANSION", 2)
				if !bytes.Equal(got, want) {
					t.Fatalf("shard %d: the rebuilt filter (%d bytes) is not the module's (%d bytes)", s, len(got), len(want))
				}
				dumped += int64(len(got))
			}
			// Every shard's chunks counted, each once.
			if rep.Rebuild.BytesWritten != dumped {
				t.Fatalf("the report says %d bytes written, the two filters' dumps are %d", rep.Rebuild.BytesWritten, dumped)
			}
			all := []string{"--rebuild-shard", "all"}
			reconciletest.Fpdedup(t, rc.dir, nil, rc.args(all...)...).Want(t, 0)
			for s := range rc.router.shards {
				errRate, capacity := rc.errRate, rc.capacity
				if s < 2 {
					errRate, capacity = 0.001, 5000
				}
				if got, want := dumpOf(t, rc.c, rc.key(s)), rc.refFilter(t, s, errRate, capacity, "EXPANSION", 2); !bytes.Equal(got, want) {
					t.Fatalf("shard %d, rebuilt as it was reserved: not the module's filter", s)
				}
				if rc.c.Exists(ctx, rc.key(s)+":rebuild").Val() != 0 {
					t.Fatalf("%s:rebuild left behind", rc.key(s))
				}
			}
			rc.wantAllHeld(t, "the rebuild")
			reconciletest.Fpdedup(t, rc.dir, nil, rc.args()...).Want(t, 0)
		})
	}
}

// TestRebuildItemsArrived: an item added to the live filter while the
// shard is rebuilt (its swap held back meanwhile) is not dropped by the
// swap: the rebuild refuses (exit 2), saying how many arrived and how to
// run it, the live filter keeps the item, and the rebuilt key is deleted.
func TestRebuildItemsArrived(t *testing.T) {
	reconciletest.PlainOnly(t, "the swap's refusal; the rebuild runs under -race in TestRebuild")
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, template: "ar:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 4000, capacity: 300, errRate: 0.01}
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "evalsha", -1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--rebuild-shard", "1")...)
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("the swap was never sent: exit %d\n%s", r.Code, r.Stderr)
	}
	before := rc.info(t, 1)["Number of items inserted"]
	for i := range 3 {
		db.Do(ctx, "BF.ADD", rc.key(1), fmt.Sprintf("arrived-%d", i))
	}
	p.Release()
	r := <-done
	r.Want(t, 2)
	for _, want := range []string{"RedisBloom shard 1: not rebuilt: 3 items arrived", "writers paused", "dual-writing"} {
		if !strings.Contains(r.Stderr, want) {
			t.Fatalf("stderr lacks %q: %s", want, r.Stderr)
		}
	}
	if got := rc.info(t, 1)["Number of items inserted"]; got != before+3 {
		t.Fatalf("the live filter holds %d items, want %d", got, before+3)
	}
	if v, _ := db.Do(ctx, "BF.MEXISTS", rc.key(1), "arrived-0", "arrived-1", "arrived-2").Int64Slice(); fmt.Sprint(v) != "[1 1 1]" {
		t.Fatalf("the items that arrived: %v", v)
	}
	if db.Exists(ctx, rc.key(1)+":rebuild").Val() != 0 {
		t.Fatal("the rebuilt key was left behind")
	}
}

// TestRebuildCutMidWrite: the connection cut while the rebuilt filter is
// written (BF.LOADCHUNK) leaves the live filter as it was, never a
// partial one swapped in (exit 2 without retries); the rerun rebuilds it.
func TestRebuildCutMidWrite(t *testing.T) {
	reconciletest.PlainOnly(t, "a write cut and rerun; the rebuild runs under -race in TestRebuild")
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, template: "cw:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 30_000, capacity: 200, errRate: 0.001}
	p := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), "BF.LOADCHUNK", 0, 0)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	live := dumpOf(t, db, rc.key(0))
	r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "0", "--retries", "0")...).Want(t, 2)
	if !strings.Contains(r.Stderr, "the live filter is as it was") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if !bytes.Equal(dumpOf(t, db, rc.key(0)), live) {
		t.Fatal("the live filter changed")
	}
	rc.url = func(q string) string { return reconciletest.RedisURL(t, 9, q) }
	// Exit 1: shard 1 misses keys, which the rebuild of shard 0 leaves.
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "0", "--report", "r.json")...).Want(t, 1)
	if rs := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")).Rebuild; rs == nil || rs.Rebuilt != 1 {
		t.Fatalf("the rerun: %+v", rs)
	}
	if got, want := dumpOf(t, db, rc.key(0)), rc.refFilter(t, 0, rc.errRate, rc.capacity, "EXPANSION", 2); !bytes.Equal(got, want) {
		t.Fatal("the rerun's filter is not the module's")
	}
}

// TestRebuildServerRestarted: the server killed and started again, empty,
// between the rebuilt filter's write and its swap: the swap finds it gone
// and says so (exit 2), swapping nothing in; the rerun (the filter now
// missing: --capacity and --error given) rebuilds it.
func TestRebuildServerRestarted(t *testing.T) {
	reconciletest.NeedKill(t)
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, template: "rs:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 4000, capacity: 300, errRate: 0.01}
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "evalsha", -1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--rebuild-shard", "all", "--retries", "8", "--timeout", "20s")...)
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("the swap was never sent: exit %d\n%s", r.Code, r.Stderr)
	}
	reconciletest.RestartRedis(t)
	p.Release()
	r := <-done
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "was lost before the swap") || !strings.Contains(r.Stderr, "the live filter is as it was") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if n := keysOnRestarted(t); n != 0 {
		t.Fatalf("%d keys on the restarted server: made by the run", n)
	}
	db = reconciletest.RedisDB(t, 9) // the restarted server's
	rc.c = db
	rc.url = func(q string) string { return reconciletest.RedisURL(t, 9, q) }
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "all", "--capacity", "300", "--error", "0.01")...).Want(t, 0)
	for s := range 2 {
		if got, want := dumpOf(t, db, rc.key(s)), rc.refFilter(t, s, 0.01, 300, "EXPANSION", 2); !bytes.Equal(got, want) {
			t.Fatalf("shard %d: the rerun's filter is not the module's", s)
		}
	}
}

// TestRebuildOutgrowsMem: a rebuilt filter larger than --mem is refused
// before anything is allocated or written, naming the shard (exit 2).
func TestRebuildOutgrowsMem(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "om:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 2000, capacity: 300, errRate: 0.01}
	rc.setup(t)
	r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "1", "--capacity", "1000000000", "--error", "0.0001", "--mem", "100MiB")...).Want(t, 2)
	if !strings.Contains(r.Stderr, `RedisBloom shard 1: the filter rebuilt for "om:{1}" outgrows --mem 100.0 MiB`) {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if db.Exists(context.Background(), rc.key(1)+":rebuild").Val() != 0 {
		t.Fatal("written")
	}
}

// TestRebuildBadHeader: a filter whose header no filter the module makes
// has (loaded with BF.LOADCHUNK; the audit refuses it) is what a rebuild
// is for: with --capacity and --error it is replaced by the module's
// filter of its truth keys.
func TestRebuildBadHeader(t *testing.T) {
	reconciletest.PlainOnly(t, "headers refused before any write; the rebuild runs under -race in TestRebuild")
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "bh:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 3000, capacity: 300, errRate: 0.01}
	rc.setup(t)
	hdr, err := db.Do(ctx, "BF.SCANDUMP", rc.key(0), 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(hdr[1].(string))
	binary.LittleEndian.PutUint64(b[20+32:], math.Float64bits(-1)) // bpe -1, hashes 0 (TestAuditShardKeys)
	binary.LittleEndian.PutUint32(b[20+40:], 0)
	db.Del(ctx, rc.key(0))
	if err := db.Do(ctx, "BF.LOADCHUNK", rc.key(0), 1, b).Err(); err != nil {
		t.Fatalf("the module refuses the header: %v", err)
	}
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args()...).Want(t, 2)
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "0")...).Want(t, 2) // its parameters are not known
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "all", "--capacity", "300", "--error", "0.01")...).Want(t, 0)
	if got, want := dumpOf(t, db, rc.key(0)), rc.refFilter(t, 0, 0.01, 300, "EXPANSION", 2); !bytes.Equal(got, want) {
		t.Fatal("the rebuilt filter is not the module's")
	}
}

// TestRebuildKeepsParams: without --capacity and --error a filter is
// rebuilt as it was reserved, its expansion and scaling kept: EXPANSION 4,
// and NONSCALING (which must hold its truth keys: else a larger capacity
// is asked for, exit 2, nothing written).
func TestRebuildKeepsParams(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "kp:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "key", n: 4000, capacity: 150, errRate: 0.02, expansion: 4}
	rc.setup(t)
	// Shard 1 made again NONSCALING, large enough for its keys.
	db.Del(ctx, rc.key(1))
	if err := db.Do(ctx, "BF.RESERVE", rc.key(1), 0.02, 3000, "NONSCALING").Err(); err != nil {
		t.Fatal(err)
	}
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "all")...).Want(t, 0)
	if got, want := dumpOf(t, db, rc.key(0)), rc.refFilter(t, 0, 0.02, 150, "EXPANSION", 4); !bytes.Equal(got, want) {
		t.Fatal("shard 0 (EXPANSION 4): not the module's filter")
	}
	if got, want := dumpOf(t, db, rc.key(1)), rc.refFilter(t, 1, 0.02, 3000, "NONSCALING"); !bytes.Equal(got, want) {
		t.Fatal("shard 1 (NONSCALING): not the module's filter")
	}
	// A NONSCALING filter too small for its truth keys.
	db.Del(ctx, rc.key(1))
	if err := db.Do(ctx, "BF.RESERVE", rc.key(1), 0.02, 100, "NONSCALING").Err(); err != nil {
		t.Fatal(err)
	}
	r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "1")...).Want(t, 2)
	if !strings.Contains(r.Stderr, "a NONSCALING filter of capacity 100 cannot hold its") || db.Exists(ctx, rc.key(1)+":rebuild").Val() != 0 {
		t.Fatalf("stderr: %s", r.Stderr)
	}
}

// TestRebuildUncovered: records that give the keys of only some of the
// index's fingerprints rebuild nothing (exit 2): the filters rebuilt from
// them would lack the other keys' items, which the live ones hold.
func TestRebuildUncovered(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "uc:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "key", n: 2000, capacity: 300, errRate: 0.01}
	rc.setup(t)
	before := [][]byte{dumpOf(t, db, rc.key(0)), dumpOf(t, db, rc.key(1))}
	some := strings.Join(rc.keys[:1500], "\n") + "\n"
	if err := os.WriteFile(filepath.Join(rc.dir, "records.txt"), []byte(some), 0o644); err != nil {
		t.Fatal(err)
	}
	r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "all")...).Want(t, 2)
	if !strings.Contains(r.Stderr, "the records give the keys of 1500 of the index's 2000 fingerprints") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	for s := range 2 {
		if !bytes.Equal(dumpOf(t, db, rc.key(s)), before[s]) {
			t.Fatalf("shard %d changed", s)
		}
	}
}
