package redisbloom_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// TestAudit: each router and item, against the module: the keys missing
// are exactly those BF.MEXISTS does not find, shard by shard, and each
// filter is described as BF.INFO describes it.
func TestAudit(t *testing.T) {
	for _, c := range []struct {
		name   string
		router *refRouter
		item   string
		plain  bool // under -race the others run: the same audit, other routes
	}{
		{"fp, all (the index alone)", newRefRouter("all", 4, nil, 0), "fp", false},
		{"sha256, mod-md5", newRefRouter("mod-md5", 8, nil, 0), "sha256", true},
		{"key, ring", newRefRouter("ring", 0, []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"}, 40), "key", false},
		{"fp, mod-md5", newRefRouter("mod-md5", 3, nil, 0), "fp", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.plain {
				reconciletest.PlainOnly(t, "a route and an item; the audit runs under -race in the other cases")
			}
			db := reconciletest.RedisDB(t, 9)
			rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "l2:rb:{*}",
				router: c.router, item: c.item, n: 20_000, capacity: 500, errRate: 0.01}
			rc.setup(t)
			rc.audit(t)
		})
	}
}

// TestAuditCluster: the same in the 3-master Cluster.
func TestAuditCluster(t *testing.T) {
	c := reconciletest.ClusterClient(t)
	rc := &rbCase{c: c, url: func(q string) string { return reconciletest.ClusterURL(t, q) }, template: "l2:rb:{*}",
		router: newRefRouter("mod-md5", 16, nil, 0), item: "sha256", n: 30_000, capacity: 300, errRate: 0.001}
	rc.setup(t)
	rc.audit(t)
}

// TestAuditInPasses: filters larger than a pass (--mem 48MiB leaves
// about 13 MiB a pass): a 28 MB sub-filter (capacity 16M after 100 and
// 40k, EXPANSION 400) read in three, split between them.
func TestAuditInPasses(t *testing.T) {
	reconciletest.PlainOnly(t, "60 MB of filters read; the passes' logic is rbloom's, raced there")
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "big:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 100_000, capacity: 100, errRate: 0.01, expansion: 400, mem: "48MiB"}
	rc.setup(t)
	rep := rc.audit(t)
	for _, sh := range rep.RedisBloom.Shards {
		if sh.Passes < 2 {
			t.Fatalf("shard %s: %d passes: not read in several", sh.Shard, sh.Passes)
		}
	}
}

// TestAuditShardKeys: a shard's key that is missing, of another type, or
// a filter whose header the module loads but no filter it makes has, is
// an error naming the shard and the key (exit 2), never "all missing".
func TestAuditShardKeys(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "sk:{*}",
		router: newRefRouter("mod-md5", 3, nil, 0), item: "sha256", n: 3000, capacity: 500, errRate: 0.01}
	rc.setup(t)
	hdr, err := db.Do(ctx, "BF.SCANDUMP", rc.key(2), 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		spoil func()
		want  string
	}{
		{"missing", func() { db.Del(ctx, rc.key(1)) }, `RedisBloom shard 1: filter "sk:{1}" does not exist`},
		{"a set", func() { db.Del(ctx, rc.key(2)); db.SAdd(ctx, rc.key(2), "x") }, `RedisBloom shard 2: key "sk:{2}" holds a set, not a RedisBloom filter`},
		{"a header no filter has", func() {
			// bpe -1, hashes 0: the module loads it (it checks only that
			// hashes is ceil(ln2·bpe)); no filter it makes has it.
			b := []byte(hdr[1].(string))
			binary.LittleEndian.PutUint64(b[20+32:], math.Float64bits(-1))
			binary.LittleEndian.PutUint32(b[20+40:], 0)
			db.Del(ctx, rc.key(0))
			if err := db.Do(ctx, "BF.LOADCHUNK", rc.key(0), 1, b).Err(); err != nil {
				t.Fatalf("the module refuses the header: %v", err)
			}
		}, `RedisBloom shard 0: filter "sk:{0}": its dump's header is not one the module would load or could have made`},
	} {
		t.Run(c.name, func(t *testing.T) {
			db.FlushDB(ctx)
			rc.setup(t)
			c.spoil()
			r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--report", "r.json")...).Want(t, 2)
			if !strings.Contains(r.Stderr, c.want) {
				t.Fatalf("stderr %q, want %q in it", r.Stderr, c.want)
			}
			if rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")); rep.ExitCode != 2 || !strings.Contains(rep.Error, c.want) {
				t.Fatalf("report: exit %d, error %q", rep.ExitCode, rep.Error)
			}
		})
	}
}

// TestAuditRefused: options that mean nothing for RedisBloom filters, or
// that their router and item cannot do, are usage errors naming them.
func TestAuditRefused(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	reconciletest.NeedRedisBloom(t, db)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "k.txt"), []byte("a\nb\n"), 0o644)
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "-o", "truth.fpx", "k.txt").Want(t, 0)
	base := reconciletest.RedisURL(t, 9, "")
	for _, c := range []struct {
		query string
		args  []string
		want  string
	}{
		{"bf=x:{*}&shards=2&item=key", nil, "bf= needs route=mod-md5, ring or all"},
		{"bf=x:{*}&shards=2&route=mod-md5", nil, "bf= needs item=key, sha256 or fp"},
		{"bf=x:{*}&route=mod-md5&item=key", nil, "bf= with route=mod-md5 needs shards=N"},
		{"bf=x:{*}&shards=2&route=modulo&item=key", nil, `route="modulo": want mod-md5, ring or all`},
		{"bf=x:{*}&shards=2&route=all&item=hex", nil, `item="hex": want key, sha256 or fp`},
		{"bf=x:{*}&route=ring&nodes=a,b&item=key", nil, "route=ring needs vnodes=V"},
		{"bf=x:{*}&route=ring&vnodes=10&item=key", nil, "route=ring needs nodes=A,B"},
		{"bf=x:{*}&route=ring&nodes=a,a&vnodes=10&item=key", nil, `an empty or repeated node "a"`},
		{"bf=x:{*}&shards=2&route=mod-md5&item=key&vnodes=3", nil, "nodes= and vnodes= are for route=ring"},
		{"bf=x:{*}&shards=0&route=all&item=fp", nil, "shards=0: want 1 to"},
		{"bf=x:{*}:{*}&shards=2&route=all&item=fp", nil, "at most one '*'"},
		{"bf=x&shards=2&route=all&item=fp", nil, "has no '*' for the shard's name"},
		{"bf=x:{*}&shards=2&route=all&item=fp&bits=100", nil, `unknown parameter "bits"`},
		{"bf=x:{*}&bloom=y:{*}&shards=2&route=all&item=fp", nil, "exclude each other"},
		{"bf=x:{*}&shards=2&route=mod-md5&item=fp", nil, "give --records FILE…"},
		{"bf=x:{*}&shards=2&route=all&item=key", nil, "give --records FILE…"},
		{"bf=x:{*}&shards=2&route=all&item=fp", []string{"--probe"}, "--probe is not for RedisBloom filters"},
		{"bf=x:{*}&shards=2&route=all&item=fp", []string{"--extra", "x.fpx"}, "--extra lists what only the online side holds"},
		{"bf=x:{*}&shards=2&route=all&item=fp", []string{"--apply"}, "with route=all no shard is known for an item"},
		{"bf=x:{*}&shards=2&route=all&item=fp", []string{"--capacity", "10"}, "--capacity and --error go with --rebuild-shard"},
		{"bf=x:{*}&shards=2&route=all&item=fp", []string{"--records", "k.txt"}, "--records is read for --backfill OUT or for --apply"},
		{"bf=x:{*}&shards=2&route=mod-md5&item=fp", []string{"--records", "k.txt", "--rebuild-shard", "2"}, `"2" names no shard`},
	} {
		r := reconciletest.Fpdedup(t, dir, nil, append([]string{"reconcile", "--index", "truth.fpx", "--online", base + c.query}, c.args...)...).Want(t, 2)
		if !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s %v: stderr %q, want %q in it", c.query, c.args, r.Stderr, c.want)
		}
	}
}

// TestAuditRecords: the keys audited are those of the records whose
// fingerprints the index holds, once each, keyed by the index's recipe
// (csv columns joined); the index's fingerprints no record gives are
// counted unaudited, and the sides are not said to agree (exit 1) even
// where every key audited is held.
func TestAuditRecords(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	reconciletest.NeedRedisBloom(t, db)
	ctx := context.Background()
	dir := t.TempDir()
	var all, some strings.Builder
	all.WriteString("user,device,ts\n")
	some.WriteString("user,device,ts\n")
	router := newRefRouter("mod-md5", 2, nil, 0)
	adds := [2][]any{}
	const n = 1000
	for i := range n {
		rec := fmt.Sprintf("u%d,d%d,%d\n", i, i%7, 1700000000000+i)
		all.WriteString(rec)
		if i%10 != 0 {
			some.WriteString(rec)
			some.WriteString(rec) // a repeat is one key
		}
		key := fmt.Sprintf("u%d:d%d:%d", i, i%7, 1700000000000+i)
		adds[router.shard(key)] = append(adds[router.shard(key)], key)
	}
	some.WriteString("u-x,d-x,1\n") // not in the index
	os.WriteFile(filepath.Join(dir, "all.csv"), []byte(all.String()), 0o644)
	os.WriteFile(filepath.Join(dir, "some.csv"), []byte(some.String()), 0o644)
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "--format", "csv", "--header", "--key", "user,device,ts", "-o", "truth.fpx", "all.csv").Want(t, 0)
	for s := range 2 {
		db.Do(ctx, "BF.RESERVE", fmt.Sprintf("rec:{%d}", s), 0.001, 10_000)
		db.Do(ctx, append([]any{"BF.MADD", fmt.Sprintf("rec:{%d}", s)}, adds[s]...)...)
	}
	url := reconciletest.RedisURL(t, 9, "bf=rec:{*}&shards=2&route=mod-md5&item=key")
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--records", "all.csv").Want(t, 0)
	r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--records", "some.csv", "--report", "r.json").Want(t, 1)
	b := reconciletest.ReadReport(t, filepath.Join(dir, "r.json")).RedisBloom
	if b.TruthKeys != n-n/10 || b.Unaudited != n/10 || b.Missing != 0 || b.Held != n-n/10 || b.Records != 2*(n-n/10)+1 || b.RecordsNotInIndex != 1 {
		t.Fatalf("report: %+v", b)
	}
	if !strings.Contains(r.Stderr, fmt.Sprintf("%d of the index's %d fingerprints are not audited", n/10, n)) {
		t.Fatalf("summary: %s", r.Stderr)
	}
}

// TestAuditSizing: --fpr gives, for each shard, the filter its truth keys
// need (BF.RESERVE's capacity at that error, its expansion kept) and the
// memory it takes, which is what the module's BF.INFO says of a filter
// reserved so; without --fpr each shard is sized for its own error rate.
func TestAuditSizing(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "sz:{*}",
		router: newRefRouter("mod-md5", 3, nil, 0), item: "sha256", n: 9000, capacity: 400, errRate: 0.01, expansion: 4}
	rc.setup(t)
	for _, fpr := range []float64{0.001, 0} {
		args := []string{"--report", "r.json"}
		if fpr > 0 {
			args = append(args, "--fpr", fmt.Sprint(fpr))
		}
		r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args(args...)...).Want(t, 1)
		if said := strings.Contains(r.Stderr, "sized for a false-positive rate of 0.1% (--fpr)"); said != (fpr > 0) {
			t.Fatalf("--fpr %g: summary %s", fpr, r.Stderr)
		}
		want := fpr
		if want == 0 {
			want = rc.errRate
		}
		for _, sh := range reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")).RedisBloom.Shards {
			if sh.SizedFor != want || sh.NeedCapacity < uint64(sh.TruthKeys) {
				t.Fatalf("--fpr %g: shard %s sized for %g, capacity %d for %d keys", fpr, sh.Shard, sh.SizedFor, sh.NeedCapacity, sh.TruthKeys)
			}
			db.Del(ctx, "sz:ref")
			if err := db.Do(ctx, "BF.RESERVE", "sz:ref", want, sh.NeedCapacity, "EXPANSION", 4).Err(); err != nil {
				t.Fatal(err)
			}
			v, err := db.Do(ctx, "BF.INFO", "sz:ref", "SIZE").Slice()
			if err != nil || len(v) != 1 {
				t.Fatalf("BF.INFO SIZE: %v %v", v, err)
			}
			if info, _ := v[0].(int64); uint64(info) != sh.NeedMemory {
				t.Fatalf("--fpr %g: shard %s needs %d bytes, the module's filter of capacity %d takes %v", fpr, sh.Shard, sh.NeedMemory, sh.NeedCapacity, v[0])
			}
		}
	}
}

// TestAuditBackfill: --backfill gets the records whose keys the filters
// miss, in input order, bytes unchanged; --missing their fingerprints.
func TestAuditBackfill(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "bk:{*}",
		router: newRefRouter("ring", 0, []string{"a", "b"}, 20), item: "key", n: 5000, capacity: 300, errRate: 0.01}
	rc.setup(t)
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--backfill", "back.txt", "--missing", "m.fpx")...).Want(t, 1)
	miss := map[string]bool{}
	for _, fp := range rc.missing {
		miss[fp] = true
	}
	var want strings.Builder
	for _, k := range rc.keys {
		if miss[reconciletest.FPHex(k)] {
			want.WriteString(k + "\n")
		}
	}
	got, err := os.ReadFile(filepath.Join(rc.dir, "back.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() || len(rc.missing) == 0 {
		t.Fatalf("backfill: %d bytes, want %d (%d keys missing)", len(got), want.Len(), len(rc.missing))
	}

	// With --apply too, the records read again for the backfill give the
	// items written, not what the audit kept of them.
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--backfill", "back2.txt", "--apply", "--report", "ap.json")...).Want(t, 0)
	rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "ap.json"))
	if rep.RedisBloom.ItemsFromAudit || rep.Records == nil || rep.Records.KeyTexts != int64(len(rc.missing)) || rep.ReadBack.Keys != int64(len(rc.missing)) || rep.ReadBack.NotHeld != 0 {
		t.Fatalf("apply with --backfill: items from the audit %v, records %+v, read back %+v", rep.RedisBloom.ItemsFromAudit, rep.Records, rep.ReadBack)
	}
	rc.wantAllHeld(t, "--apply")
}
