package bitmapbloom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/zeebo/xxh3"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func TestMain(m *testing.M) { reconciletest.Main(m, reconcile.QuietRedisLogs) }

// bloomCase is one layout against one server (a database of one Redis, or
// the Cluster).
type bloomCase struct {
	c      redis.Cmdable
	url    func(query string) string
	tmpl   string // the key template, * for the shard
	n      int
	layout struct {
		shards, m uint64
		k         int
	}
	mem string
}

func (bc *bloomCase) key(s uint64) string {
	return strings.Replace(bc.tmpl, "*", fmt.Sprint(s), 1)
}

func (bc *bloomCase) query() string {
	return fmt.Sprintf("bloom=%s&shards=%d&bits=%d&k=%d", bc.tmpl, bc.layout.shards, bc.layout.m, bc.layout.k)
}

// run: 90% of the truth's keys are set online (by the reference); the
// audit must find exactly the others that the 90% do not happen to cover,
// shard by shard; --apply must make every shard equal to the reference
// of all keys, after which an audit finds nothing missing.
func (bc *bloomCase) run(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hexes, fps := reconciletest.BloomTruth(t, dir, bc.n)
	l := bc.layout
	online, all := reconciletest.NewRefBloom(l.shards, l.m, l.k), reconciletest.NewRefBloom(l.shards, l.m, l.k)
	r := rand.New(rand.NewPCG(7, 8))
	for _, fp := range fps {
		if r.IntN(10) != 0 {
			online.Add(fp)
		}
		all.Add(fp)
	}
	var missing []string
	perShard := make([]int64, l.shards)
	for i, fp := range fps {
		if !online.Has(fp) {
			missing = append(missing, hexes[i])
			perShard[fp[0]%l.shards]++
		}
	}
	if len(missing) < bc.n/20 {
		t.Fatalf("the reference left only %d of %d keys out: a test that cannot tell", len(missing), bc.n)
	}
	for s := range l.shards {
		if err := bc.c.Set(ctx, bc.key(s), online.Bytes[s], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	url := bc.url(bc.query())
	args := []string{"reconcile", "--index", "truth.fpx", "--online", url, "--report", "r.json", "--missing", "missing.fpx"}
	if bc.mem != "" {
		args = append(args, "--mem", bc.mem)
	}
	res := reconciletest.Fpdedup(t, dir, nil, args...).Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json"))
	if got := reconciletest.Dump(t, dir, "missing.fpx"); !slices.Equal(got, missing) {
		t.Fatalf("missing.fpx: %d fingerprints, want %d", len(got), len(missing))
	}
	reconciletest.WantCounts(t, rep.Counts, int64(bc.n-len(missing)), int64(len(missing)), -1)
	b := rep.Bloom
	if rep.Mode != "bloom-audit" || b == nil || len(b.Shards) != int(l.shards) || b.Missing != int64(len(missing)) {
		t.Fatalf("report: mode %s, bloom %+v", rep.Mode, b)
	}
	for s, sh := range b.Shards {
		var keys int64
		for _, fp := range fps {
			if fp[0]%l.shards == uint64(s) {
				keys++
			}
		}
		if sh.Key != bc.key(uint64(s)) || sh.SetBits != online.Ones(s) || sh.Missing != perShard[s] || sh.Keys != keys {
			t.Fatalf("shard %d: %+v; want key %s, %d set bits, %d missing, %d keys", s, sh, bc.key(uint64(s)), online.Ones(s), perShard[s], keys)
		}
	}
	if !strings.Contains(res.Stderr, "sizing:") || !strings.Contains(res.Stderr, fmt.Sprintf("%d not", len(missing))) {
		t.Fatalf("summary: %s", res.Stderr)
	}
	if bc.mem != "" && b.Passes < 2 {
		t.Fatalf("--mem %s: %d passes, want the bloom read in several", bc.mem, b.Passes)
	}

	// --probe asks GETBIT of each key's bits instead: the same answer.
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--probe", "--missing", "probed.fpx").Want(t, 1)
	if got := reconciletest.Dump(t, dir, "probed.fpx"); !slices.Equal(got, missing) {
		t.Fatalf("--probe: %d fingerprints missing, the audit %d", len(got), len(missing))
	}
	dry := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--dry-run").Want(t, 1)
	if n := strings.Count(dry.Stdout, "\n"); n != len(missing)*l.k || !strings.HasPrefix(dry.Stdout, "SETBIT "+bc.tmpl[:strings.Index(bc.tmpl, "*")]) {
		t.Fatalf("--dry-run printed %d lines (want %d SETBITs): %.200s", n, len(missing)*l.k, dry.Stdout)
	}
	if got, _ := bc.c.Get(ctx, bc.key(0)).Bytes(); !slices.Equal(got, online.Bytes[0]) {
		t.Fatal("--dry-run changed shard 0")
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--apply").Want(t, 0)
	for s := range l.shards {
		got, err := bc.c.Get(ctx, bc.key(s)).Bytes()
		if err != nil || !slices.Equal(got, all.Bytes[s]) {
			t.Fatalf("shard %d after --apply: %d bytes (%v), not the reference bitmap of all keys", s, len(got), err)
		}
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url).Want(t, 0)
}

func TestBloomAudit(t *testing.T) {
	c := reconciletest.RedisDB(t, 12)
	bc := &bloomCase{c: c, url: func(q string) string { return reconciletest.RedisURL(t, 12, q) }, tmpl: "l2:bf:{*}", n: 40_000}
	bc.layout.shards, bc.layout.m, bc.layout.k = 5, 100_003, 3 // M not a power of two, not a whole byte
	bc.run(t)
}

// TestBloomAuditInPasses: shards of 12.5 MB, four of them, under --mem
// 64MiB: the bloom is read in passes, one of which ends inside a shard.
func TestBloomAuditInPasses(t *testing.T) {
	c := reconciletest.RedisDB(t, 13)
	bc := &bloomCase{c: c, url: func(q string) string { return reconciletest.RedisURL(t, 13, q) }, tmpl: "bf:*", n: 30_000, mem: "64MiB"}
	bc.layout.shards, bc.layout.m, bc.layout.k = 4, 100_000_000, 2
	bc.run(t)
}

func TestBloomAuditCluster(t *testing.T) {
	reconciletest.PlainOnly(t, "the audit of TestBloomAudit through the Cluster client; Cluster routing runs under -race in rediskeys")
	c := reconciletest.ClusterClient(t)
	bc := &bloomCase{c: c, url: func(q string) string { return reconciletest.ClusterURL(t, q) }, tmpl: "l2:bf:{*}", n: 40_000}
	bc.layout.shards, bc.layout.m, bc.layout.k = 16, 1<<17, 3
	bc.run(t)
}

// TestBloomShardKeys: a shard that is missing, of another type or of
// another length is an error naming its key (exit 2), never "empty".
func TestBloomShardKeys(t *testing.T) {
	reconciletest.PlainOnly(t, "errors of shard keys found before any goroutine starts")
	c := reconciletest.RedisDB(t, 14)
	ctx := context.Background()
	dir := t.TempDir()
	reconciletest.BloomTruth(t, dir, 100)
	url := reconciletest.RedisURL(t, 14, "bloom=bf:{*}&shards=3&bits=1000&k=3")
	reset := func() {
		for s := range 3 {
			c.Set(ctx, fmt.Sprintf("bf:{%d}", s), make([]byte, 125), 0)
		}
	}
	for _, cc := range []struct {
		name  string
		spoil func()
		want  string
	}{
		{"missing", func() { c.Del(ctx, "bf:{1}") }, `bloom shard 1: key "bf:{1}" does not exist`},
		{"a set", func() { c.Del(ctx, "bf:{2}"); c.SAdd(ctx, "bf:{2}", "x") }, `key "bf:{2}" holds a set, not a bitmap string`},
		{"short", func() { c.Set(ctx, "bf:{0}", make([]byte, 124), 0) }, `key "bf:{0}" is 124 bytes, the layout's shard is 125`},
		{"other bits=", func() { c.SetBit(ctx, "bf:{2}", 1000, 1) }, `key "bf:{2}" is 126 bytes`},
	} {
		t.Run(cc.name, func(t *testing.T) {
			reset()
			cc.spoil()
			r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--report", "r.json").Want(t, 2)
			if !strings.Contains(r.Stderr, cc.want) {
				t.Fatalf("stderr %q, want %q in it", r.Stderr, cc.want)
			}
		})
	}
	reset()
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url).Want(t, 1)
	// Flags that mean nothing for a bloom are refused, not ignored.
	for _, args := range [][]string{{"--extra", "x.fpx"}, {"--ttl", "1h", "--apply"}, {"--rebuild-shard", "0", "--apply"}} {
		r := reconciletest.Fpdedup(t, dir, nil, append([]string{"reconcile", "--index", "truth.fpx", "--online", url}, args...)...).Want(t, 2)
		if !strings.Contains(r.Stderr, args[0]) {
			t.Fatalf("%v: %s", args, r.Stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.fpx")); err == nil {
		t.Fatal("a refused --extra was written")
	}
}

// TestBloomAgreesWithReplay: replay and the audit place a key's bits
// where the reference does. Replay's lost keys are the reference's (a key
// is lost when the keys accepted before it set all its bits; XXH3-128 from
// the library, as replay and build hash by default); --apply of the
// accepted keys writes the reference's bitmap of them (replay's lost keys
// alone would not tell positions renumbered within a shard); and that
// bloom holds every key, the lost ones included.
func TestBloomAgreesWithReplay(t *testing.T) {
	reconciletest.PlainOnly(t, "bit layouts compared with replay's; no goroutine of its own")
	c := reconciletest.RedisDB(t, 15)
	ctx := context.Background()
	dir := t.TempDir()
	var all, accepted strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&all, "order-%d\n", i)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("all.txt", all.String())
	reconciletest.Fpdedup(t, dir, nil, "replay", "--l2", "shards=4,bits=2^14,k=2", "--lost", "lost.txt", "all.txt").Want(t, 0)
	lostB, err := os.ReadFile(filepath.Join(dir, "lost.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for _, l := range strings.Fields(string(lostB)) {
		lost[l] = true
	}
	ref := reconciletest.NewRefBloom(4, 1<<14, 2)
	for l := range strings.FieldsSeq(all.String()) {
		h := xxh3.Hash128([]byte(l))
		fp := [2]uint64{h.Hi, h.Lo}
		if ref.Has(fp) != lost[l] {
			t.Fatalf("%s: the reference says lost %v, replay %v", l, ref.Has(fp), lost[l])
		}
		if !lost[l] {
			ref.Add(fp)
		}
	}
	if len(lost) < 1000 {
		t.Fatalf("replay lost %d keys: too few for the test to tell", len(lost))
	}
	for l := range strings.FieldsSeq(all.String()) {
		if !lost[l] {
			accepted.WriteString(l + "\n")
		}
	}
	write("accepted.txt", accepted.String())
	reconciletest.Fpdedup(t, dir, nil, "build", "-o", "accepted.fpx", "accepted.txt").Want(t, 0)
	reconciletest.Fpdedup(t, dir, nil, "build", "-o", "all.fpx", "all.txt").Want(t, 0)
	for s := range 4 {
		c.Set(ctx, fmt.Sprintf("r:{%d}", s), make([]byte, 1<<11), 0)
	}
	url := reconciletest.RedisURL(t, 15, "bloom=r:{*}&shards=4&bits=2^14&k=2")
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "accepted.fpx", "--online", url, "--apply").Want(t, 0)
	for s := range 4 {
		got, err := c.Get(ctx, fmt.Sprintf("r:{%d}", s)).Bytes()
		if err != nil || !slices.Equal(got, ref.Bytes[s]) {
			t.Fatalf("shard %d after --apply of the accepted keys: not the reference's bitmap (%v)", s, err)
		}
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "all.fpx", "--online", url, "--report", "r.json").Want(t, 0)
	if rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json")); rep.Bloom == nil || rep.Bloom.Held != 20_000 {
		t.Fatalf("the audit holds %+v of 20000 keys", rep.Bloom)
	}
}

// TestBloomRebuild: --rebuild-shard all makes each shard the truth's
// bitmap ORed with every bit set online, before it and during it: a writer
// keeps setting bits while the shards are rebuilt, and none of its bits,
// nor any set before that the truth does not set, is lost.
func TestBloomRebuild(t *testing.T) {
	c := reconciletest.RedisDB(t, 11)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 30_000)
	const shards, m, k = 3, 100_000_000, 3
	want, before := reconciletest.NewRefBloom(shards, m, k), reconciletest.NewRefBloom(shards, m, k)
	r := rand.New(rand.NewPCG(9, 10))
	for i, fp := range fps {
		if i%2 == 0 {
			before.Add(fp)
		}
		want.Add(fp)
	}
	for s := range shards {
		for range 1000 { // bits the truth has no key for
			p := r.Uint64N(m)
			before.Bytes[s][p/8] |= 0x80 >> (p % 8)
			want.Bytes[s][p/8] |= 0x80 >> (p % 8)
		}
		if err := c.Set(ctx, fmt.Sprintf("rb:{%d}", s), before.Bytes[s], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	url := reconciletest.RedisURL(t, 11, fmt.Sprintf("bloom=rb:{*}&shards=%d&bits=%d&k=%d", shards, m, k))

	dry := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "1", "--dry-run").Want(t, 1)
	if !strings.Contains(dry.Stdout, "REBUILD rb:{1} from ") || strings.Count(dry.Stdout, "\n") != 1 {
		t.Fatalf("--dry-run printed %q", dry.Stdout)
	}
	if got, _ := c.Get(ctx, "rb:{1}").Bytes(); !slices.Equal(got, before.Bytes[1]) {
		t.Fatal("--dry-run changed shard 1")
	}

	// The writer: SETBITs at random places until the rebuild has ended.
	stop := make(chan struct{})
	done := make(chan [][]uint64)
	go func() {
		w := rand.New(rand.NewPCG(11, 12))
		set := make([][]uint64, shards)
		for {
			select {
			case <-stop:
				done <- set
				return
			default:
			}
			s, p := w.Uint64N(shards), w.Uint64N(m)
			if err := c.SetBit(ctx, fmt.Sprintf("rb:{%d}", s), int64(p), 1).Err(); err != nil {
				t.Error(err)
				done <- set
				return
			}
			set[s] = append(set[s], p)
		}
	}()
	// --mem 96MiB holds two shards of 12.5 MB beside its 64 MiB: built two, then one.
	res := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "all", "--mem", "96MiB", "--report", "r.json")
	close(stop)
	written := <-done
	res.Want(t, 0)
	n := 0
	for s := range shards {
		for _, p := range written[s] {
			want.Bytes[s][p/8] |= 0x80 >> (p % 8)
		}
		n += len(written[s])
		got, err := c.Get(ctx, fmt.Sprintf("rb:{%d}", s)).Bytes()
		if err != nil || !slices.Equal(got, want.Bytes[s]) {
			t.Fatalf("shard %d after the rebuild: not the truth's bits OR the live ones (%v)", s, err)
		}
		if c.Exists(ctx, fmt.Sprintf("rb:{%d}:rebuild", s)).Val() != 0 {
			t.Fatalf("rb:{%d}:rebuild is left behind", s)
		}
	}
	if n < 100 {
		t.Fatalf("the writer set %d bits during the rebuild: too few to tell", n)
	}
	rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json"))
	if rb := rep.Rebuild; rb == nil || rb.Rebuilt != shards || rb.Keys != 30_000 || rb.BytesWritten != shards*m/8 {
		t.Fatalf("report: %+v", rep.Rebuild)
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url).Want(t, 0)

	for _, bad := range []struct{ flag, want string }{
		{"3", "--rebuild-shard 3: want all, or shard numbers 0 to 2"},
		{"x", "want all, or shard numbers"},
	} {
		r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", bad.flag).Want(t, 2)
		if !strings.Contains(r.Stderr, bad.want) {
			t.Fatalf("--rebuild-shard %s: %s", bad.flag, r.Stderr)
		}
	}
}

// TestBloomRebuildFlushed: what a rebuild is for. Shard 0 was flushed
// (its key is gone), shard 1 was flushed and the online side's SETBITs
// began it again (a string shorter than the layout's), shards 2 and 3
// hold every key. --rebuild-shard 0,1 neither audits nor refuses those
// two: it makes them the truth's bitmap (OR the bits the short one held),
// and exits 0. A shard it names that is longer than the layout's, or of
// another type, is still refused, naming the key, and left as it was.
func TestBloomRebuildFlushed(t *testing.T) {
	reconciletest.PlainOnly(t, "the same rebuild as TestBloomRebuild against a flushed server")
	c := reconciletest.RedisDB(t, 11)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 20_000)
	const shards, m, k = 4, 1 << 20, 3
	want := reconciletest.NewRefBloom(shards, m, k)
	for _, fp := range fps {
		want.Add(fp)
	}
	for s := 2; s < shards; s++ {
		c.Set(ctx, fmt.Sprintf("rf:{%d}", s), want.Bytes[s], 0)
	}
	short := []int64{5, 77, 1000}
	for _, p := range short { // the online side's SETBITs after the flush
		c.SetBit(ctx, "rf:{1}", p, 1)
		want.Bytes[1][p/8] |= 0x80 >> (p % 8)
	}
	url := reconciletest.RedisURL(t, 11, fmt.Sprintf("bloom=rf:{*}&shards=%d&bits=%d&k=%d", shards, m, k))

	// Without --rebuild-shard, the flushed shard is an error naming it.
	if r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url).Want(t, 2); !strings.Contains(r.Stderr, `"rf:{0}" does not exist`) {
		t.Fatalf("audit of a flushed shard: %s", r.Stderr)
	}
	dry := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "0,1", "--dry-run").Want(t, 1)
	if strings.Count(dry.Stdout, "REBUILD ") != 2 || c.Exists(ctx, "rf:{0}").Val() != 0 {
		t.Fatalf("--dry-run: %q, or it wrote rf:{0}", dry.Stdout)
	}

	res := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "0,1", "--report", "r.json").Want(t, 0)
	for s := range shards {
		if got, err := c.Get(ctx, fmt.Sprintf("rf:{%d}", s)).Bytes(); err != nil || !slices.Equal(got, want.Bytes[s]) {
			t.Fatalf("shard %d after the rebuild: not the truth's bitmap (OR the bits it held) (%v)", s, err)
		}
	}
	rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json"))
	if rep.Bloom == nil || rep.Bloom.Missing != 0 || rep.Bloom.Held != 20_000 {
		t.Fatalf("report: %+v", rep.Bloom)
	}
	for s, sh := range rep.Bloom.Shards {
		rebuilt := s < 2
		if sh.Rebuild != rebuilt || sh.Rebuilt != rebuilt || sh.SetBits != want.Ones(s) {
			t.Fatalf("shard %d in the report: %+v (want %d bits set, rebuilt %v)", s, sh, want.Ones(s), rebuilt)
		}
	}
	if !strings.Contains(res.Stderr, "rebuilt") {
		t.Fatalf("the summary does not say which shards were rebuilt:\n%s", res.Stderr)
	}

	// Longer than the layout's shard, or not a string: refused, untouched.
	long := append(slices.Clone(want.Bytes[0]), 0xff)
	for _, bad := range []struct {
		shard, want string
		make        func(key string)
		same        func(key string) bool
	}{
		{"0", `key "rf:{0}" is 131073 bytes, the layout's shard is 131072`,
			func(key string) { c.Set(ctx, key, long, 0) },
			func(key string) bool { got, _ := c.Get(ctx, key).Bytes(); return slices.Equal(got, long) }},
		{"1", `key "rf:{1}" holds a list`,
			func(key string) { c.Del(ctx, key); c.RPush(ctx, key, "x") },
			func(key string) bool { return c.Type(ctx, key).Val() == "list" }},
	} {
		key := "rf:{" + bad.shard + "}"
		saved, _ := c.Get(ctx, key).Bytes()
		bad.make(key)
		r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", bad.shard).Want(t, 2)
		if !strings.Contains(r.Stderr, bad.want) {
			t.Fatalf("--rebuild-shard %s: %s", bad.shard, r.Stderr)
		}
		if !bad.same(key) {
			t.Fatalf("the refused %s was changed", key)
		}
		c.Del(ctx, key)
		c.Set(ctx, key, saved, 0)
	}
}

// TestBloomServerGone: the server taken away (the proxy in front of it
// shuts) in the middle of the audit's GETRANGE reads, then of --apply's
// SETBITs: each ends with exit 2 and an error naming the server, never a
// short success; with a proxy that listens again, the audit's retries
// finish it whole; and the --apply resumed from its checkpoint leaves
// every shard equal to the reference of all keys, no bit cleared.
func TestBloomServerGone(t *testing.T) {
	c := reconciletest.RedisDB(t, 10)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 40_000)
	const shards, m, k = 4, 8_000_000, 3
	online, all := reconciletest.NewRefBloom(shards, m, k), reconciletest.NewRefBloom(shards, m, k)
	for i, fp := range fps {
		if i%3 != 0 {
			online.Add(fp)
		}
		all.Add(fp)
	}
	for s := range shards {
		c.Set(ctx, fmt.Sprintf("g:{%d}", s), online.Bytes[s], 0)
	}
	query := fmt.Sprintf("bloom=g:{*}&shards=%d&bits=%d&k=%d", shards, m, k)

	gone := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), "getrange", 1<<20, 0)
	r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", fmt.Sprintf("redis://%s/10?%s", gone.Addr, query),
		"--retries", "1", "--timeout", "2s", "--report", "gone.json")
	if !gone.WasShut() {
		t.Fatalf("the proxy never cut the audit; run: %d %s", r.Code, r.Stderr)
	}
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "reading the bloom on redis://"+gone.Addr) || !strings.Contains(r.Stderr, "rerun the audit") {
		t.Fatalf("the audit's error: %s", r.Stderr)
	}

	back := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), "getrange", 1<<20, 300*time.Millisecond)
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", fmt.Sprintf("redis://%s/10?%s", back.Addr, query),
		"--retries", "5", "--timeout", "2s", "--missing", "missing.fpx").Want(t, 1)
	if !back.WasShut() {
		t.Fatal("the proxy never cut the audit")
	}
	wantMissing := 0
	for _, fp := range fps {
		if !online.Has(fp) {
			wantMissing++
		}
	}
	if got := reconciletest.Dump(t, dir, "missing.fpx"); len(got) != wantMissing {
		t.Fatalf("the audit retried past the cut finds %d missing, want %d", len(got), wantMissing)
	}

	// The checkpoint belongs to the URL it was written for: the proxy
	// listens again on its address, for the resumed run, once the cut run
	// (no retries) has failed.
	cut := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), "SETBIT", 16<<10, 2*time.Second)
	cutURL := fmt.Sprintf("redis://%s/10?%s", cut.Addr, query)
	r = reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", cutURL,
		"--apply", "--batch", "200", "--conns", "1", "--rate", "20k", "--checkpoint", "apply.ckpt", "--retries", "0", "--timeout", "2s")
	if !cut.WasShut() {
		t.Fatalf("the proxy never cut the apply; run: %d %s", r.Code, r.Stderr)
	}
	r.Want(t, 2)
	if _, err := os.Stat(filepath.Join(dir, "apply.ckpt")); err != nil {
		t.Fatalf("no checkpoint after the cut apply: %v\n%s", err, r.Stderr)
	}
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(reconciletest.Must(os.ReadFile(filepath.Join(dir, "apply.ckpt"))), &ck); err != nil || ck.Written == 0 {
		t.Fatalf("checkpoint %+v %v", ck, err)
	}
	<-cut.Opened
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", cutURL,
		"--apply", "--checkpoint", "apply.ckpt", "--report", "resumed.json").Want(t, 0)
	// The keys the cut run wrote are held now: the resumed audit does not
	// count them missing.
	if a := reconciletest.ReadReport(t, filepath.Join(dir, "resumed.json")).Apply; a == nil || a.Keys > int64(wantMissing)-ck.Written || a.Written != a.Keys {
		t.Fatalf("the resumed --apply: %+v, after a checkpoint of %d keys of %d missing", a, ck.Written, wantMissing)
	}
	for s := range shards {
		if got, _ := c.Get(ctx, fmt.Sprintf("g:{%d}", s)).Bytes(); !slices.Equal(got, all.Bytes[s]) {
			t.Fatalf("shard %d after the resumed --apply: not the reference of all keys", s)
		}
	}
}

// TestBloomClusterNodeKilled: a master killed (SIGKILL) during a cluster
// audit read in passes: exit 2, an error naming it and saying to rerun,
// never a short "held"; restarted (empty, no persistence) and its shards
// made again, the same audit runs whole.
func TestBloomClusterNodeKilled(t *testing.T) {
	reconciletest.NeedKill(t)
	reconciletest.PlainOnly(t, "25 s waiting for a node to die and come back; the audit's reads are raced by TestBloomAuditCluster")
	c := reconciletest.ClusterClient(t)
	ctx := context.Background()
	dir := t.TempDir()
	reconciletest.BloomTruth(t, dir, 60_000)
	const shards, m = 16, 1 << 26 // 8 MiB a shard: four passes under --mem 64MiB
	make16 := func() {
		for s := range shards {
			if err := c.SetBit(ctx, fmt.Sprintf("kb:{%d}", s), m-1, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	make16()
	victim := reconciletest.ClusterSeeds(t)[2]
	pid := reconciletest.NodePID(t, victim)
	t.Cleanup(func() { reconciletest.RestartCluster(t) })
	url := reconciletest.ClusterURL(t, fmt.Sprintf("bloom=kb:{*}&shards=%d&bits=%d&k=3", shards, m))
	done := make(chan reconciletest.Result, 1)
	go func() {
		// Each pass tests the 60k keys at 20k/s: 3 s a pass.
		done <- reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--mem", "64MiB",
			"--read-rate", "20k", "--retries", "1", "--timeout", "2s", "--report", "k.json")
	}()
	time.Sleep(1500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	r := <-done
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, victim) || !strings.Contains(r.Stderr, "rerun") {
		t.Fatalf("unclear error: %s", r.Stderr)
	}
	t.Logf("stderr: %s", r.Stderr)
	if rep := reconciletest.ReadReport(t, filepath.Join(dir, "k.json")); rep.ExitCode != 2 || rep.Agree {
		t.Fatalf("report after a killed node: exit %d, agree %v", rep.ExitCode, rep.Agree)
	}
	reconciletest.RestartCluster(t)
	c = reconciletest.ClusterClient(t)
	make16()
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--mem", "64MiB", "--report", "again.json").Want(t, 1)
	if rep := reconciletest.ReadReport(t, filepath.Join(dir, "again.json")); rep.Bloom == nil || rep.Bloom.Missing != 60_000 || rep.Bloom.Passes < 2 {
		t.Fatalf("the audit after the restart: %+v", rep.Bloom)
	}
}

// TestBloomSegments: a shard over 2^32 bits is two strings, KEY:0 of
// 512 MiB and KEY:1 of the rest: the audit reads both, and a key with a bit
// in the second is missing while that bit is not set; --apply sets bits in
// both, after which the audit holds every key.
func TestBloomSegments(t *testing.T) {
	reconciletest.PlainOnly(t, "a layout test, whose 512 MiB string costs half a minute")
	c := reconciletest.RedisDB(t, 8)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 100_000)
	const m = 1<<32 + 1<<22
	ref := &reconciletest.RefBloom{Shards: 1, M: m, K: 3} // the places alone: the bitmap would be 512 MiB
	seg1 := 0                                             // keys with a bit in KEY:1
	pipe := c.Pipeline()
	for i, fp := range fps {
		_, pos := ref.Places(fp)
		inSeg1 := false
		for _, p := range pos {
			inSeg1 = inSeg1 || p >= 1<<32
		}
		if inSeg1 {
			seg1++
		}
		if i%2 == 0 || inSeg1 {
			continue // missing online
		}
		for _, p := range pos {
			pipe.SetBit(ctx, fmt.Sprintf("sg:{0}:%d", p>>32), int64(p&(1<<32-1)), 1)
		}
	}
	pipe.SetBit(ctx, "sg:{0}:0", 1<<32-1, 0)
	pipe.SetBit(ctx, "sg:{0}:1", 1<<22-1, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if seg1 < 50 {
		t.Fatalf("%d keys have a bit in the second segment: too few to tell", seg1)
	}
	url := reconciletest.RedisURL(t, 8, fmt.Sprintf("bloom=sg:{*}&shards=1&bits=%d&k=3", m))
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--report", "r.json").Want(t, 1)
	b := reconciletest.ReadReport(t, filepath.Join(dir, "r.json")).Bloom
	// Missing: the even keys, and the odd ones with a bit in KEY:1 — but
	// for those whose bits the others happen to set, rare in 2^32 bits.
	if b == nil || b.Missing < int64(50_000+seg1/2-10) || b.Missing > int64(50_000+seg1) || b.BytesRead != (m+7)/8 {
		t.Fatalf("audit of a two-segment shard: %+v (%d keys with a bit in KEY:1)", b, seg1)
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--apply").Want(t, 0)
	if n := c.BitCount(ctx, "sg:{0}:1", nil).Val(); n == 0 {
		t.Fatal("--apply set no bit in KEY:1")
	}
	for i, fp := range fps[:2000] {
		_, pos := ref.Places(fp)
		for _, p := range pos {
			if c.GetBit(ctx, fmt.Sprintf("sg:{0}:%d", p>>32), int64(p&(1<<32-1))).Val() != 1 {
				t.Fatalf("key %d: bit %d not set after --apply", i, p)
			}
		}
	}
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url).Want(t, 0)
}

// TestBloomRebuildInterrupted: SIGINT once the first shard is swapped in:
// exit 130, the message says how many shards were swapped in and that the
// rest are as they were; those shards hold the truth's bits, the others
// are untouched, and no KEY:rebuild is left behind.
func TestBloomRebuildInterrupted(t *testing.T) {
	c := reconciletest.RedisDB(t, 7)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 100_000)
	const shards, m, k = 40, 32_000_000, 2
	want := reconciletest.NewRefBloom(shards, m, k)
	for _, fp := range fps {
		want.Add(fp)
	}
	for s := range shards {
		c.SetBit(ctx, fmt.Sprintf("ri:{%d}", s), m-1, 0)
	}
	url := reconciletest.RedisURL(t, 7, fmt.Sprintf("bloom=ri:{*}&shards=%d&bits=%d&k=%d", shards, m, k))
	// --mem 68MiB holds one shard of 4 MB beside its 64 MiB: one group a shard.
	cmd := exec.Command(reconciletest.CLIBinary(t), "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "all", "--mem", "68MiB")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !reconciletest.WaitFor(60*time.Second, func() bool { return c.BitCount(ctx, "ri:{0}", nil).Val() > 0 }) {
		t.Fatal("shard 0 was never swapped in")
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v after SIGINT, want 130: %s", err, stderr.String())
	}
	var n, of int
	said, _ := strings.CutPrefix(stderr.String()[max(strings.Index(stderr.String(), "swapped in "), 0):], "swapped in ")
	if _, err := fmt.Sscanf(said, "%d of %d shards", &n, &of); err != nil || n < 1 || n >= shards || of != shards {
		t.Fatalf("the message does not say how many shards were swapped in (%d of %d, %v): %s", n, of, err, stderr.String())
	}
	t.Logf("stderr: %s", stderr.String())
	if !strings.Contains(stderr.String(), "SIGINT") || !strings.Contains(stderr.String(), "the others are as they were") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	for s := range shards {
		got, _ := c.Get(ctx, fmt.Sprintf("ri:{%d}", s)).Bytes()
		if s < n && !slices.Equal(got, want.Bytes[s]) {
			t.Fatalf("shard %d, swapped in, is not the truth's bitmap", s)
		}
		if s >= n && c.BitCount(ctx, fmt.Sprintf("ri:{%d}", s), nil).Val() != 0 {
			t.Fatalf("shard %d, not swapped in by the message, has bits set", s)
		}
		if c.Exists(ctx, fmt.Sprintf("ri:{%d}:rebuild", s)).Val() != 0 {
			t.Fatalf("ri:{%d}:rebuild is left behind", s)
		}
	}
}

// TestBloomRebuildSignalAfterSwap: a signal while the swap's reply is on
// its way, the swap done on the server. The run must say the shard was
// swapped in (the server's mark of the run, read on a connection of its
// own), never that the shards "are as they were": it said so when the
// reply was lost (a flaky TestBloomRebuildInterrupted).
func TestBloomRebuildSignalAfterSwap(t *testing.T) {
	c := reconciletest.RedisDB(t, 7)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 20_000)
	const shards, m, k = 1, 1 << 20, 2
	want := reconciletest.NewRefBloom(shards, m, k)
	for _, fp := range fps {
		want.Add(fp)
	}
	layout := fmt.Sprintf("bloom=rs:{*}&shards=%d&bits=%d&k=%d", shards, m, k)
	// A first rebuild loads the swap script into the server, so that the
	// proxied run's EVALSHA runs it (a NOSCRIPT answer swallowed would be
	// a swap never run).
	reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", reconciletest.RedisURL(t, 7, layout), "--rebuild-shard", "all").Want(t, 0)
	c.FlushDB(ctx)

	p := reconciletest.NewSwallowProxy(t, reconciletest.RedisAddr(t), "evalsha")
	cmd := exec.Command(reconciletest.CLIBinary(t), "reconcile", "--index", "truth.fpx", "--online", "redis://"+p.Addr+"/7?"+layout, "--rebuild-shard", "all", "--timeout", "1m")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-p.Held:
	case err := <-done:
		t.Fatalf("the run ended (%v) and no swap's answer was swallowed: %s", err, stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := <-done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit %v after SIGINT, want 130: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "swapped in 1 of 1 shards") {
		t.Fatalf("the shard swapped in on the server is not said to be: %s", stderr.String())
	}
	if got, _ := c.Get(ctx, "rs:{0}").Bytes(); !slices.Equal(got, want.Bytes[0]) {
		t.Fatal("rs:{0} is not the truth's bitmap")
	}
	if n := c.Exists(ctx, "rs:{0}:rebuild", "rs:{0}:rebuild:swapped").Val(); n != 0 {
		t.Fatalf("%d of the rebuild's keys left behind", n)
	}
}

// TestBloomClusterFailover: a replica takes over its master's slots in
// the middle of a cluster audit read in passes (CLUSTER FAILOVER
// TAKEOVER: what a failover looks like to a client, the slots answered by
// another node from then on). The audit follows the cluster to the new
// master and finds exactly the keys the reference left out, every shard
// read whole. The replica is a node of the test's own, made and removed
// by it; the shared cluster is put back as it was (its masters, and no
// fourth node).
func TestBloomClusterFailover(t *testing.T) {
	reconciletest.NeedKill(t)
	reconciletest.PlainOnly(t, "20 s of a replica syncing and taking over; the audit's reads are raced by TestBloomAuditCluster")
	c := reconciletest.ClusterClient(t)
	ctx := context.Background()
	dir := t.TempDir()
	hexes, fps := reconciletest.BloomTruth(t, dir, 60_000)
	const shards, m, k = 16, 1 << 26, 3 // 8 MiB a shard: four passes under --mem 64MiB
	online := reconciletest.NewRefBloom(shards, m, k)
	r := rand.New(rand.NewPCG(13, 14))
	for _, fp := range fps {
		if r.IntN(10) != 0 {
			online.Add(fp)
		}
	}
	var missing []string
	for i, fp := range fps {
		if !online.Has(fp) {
			missing = append(missing, hexes[i])
		}
	}
	master := reconciletest.ClusterSeeds(t)[2]
	replica := reconciletest.StartReplica(t, master)
	for s := range shards {
		if err := c.Set(ctx, fmt.Sprintf("fo:{%d}", s), online.Bytes[s], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	replica.CaughtUp(t)

	url := reconciletest.ClusterURL(t, fmt.Sprintf("bloom=fo:{*}&shards=%d&bits=%d&k=%d", shards, m, k))
	done := make(chan reconciletest.Result, 1)
	go func() {
		// Each pass tests the 60k keys at 20k/s: 3 s a pass.
		done <- reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--mem", "64MiB",
			"--read-rate", "20k", "--report", "f.json", "--missing", "missing.fpx")
	}()
	time.Sleep(1500 * time.Millisecond)
	replica.TakeOver(t)
	res := <-done
	res.Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(dir, "f.json"))
	if b := rep.Bloom; b == nil || b.Missing != int64(len(missing)) || b.Passes < 3 || b.BytesRead != shards*m/8 {
		t.Fatalf("the audit across the failover: %+v, want %d missing", rep.Bloom, len(missing))
	}
	if got := reconciletest.Dump(t, dir, "missing.fpx"); !slices.Equal(got, missing) {
		t.Fatalf("missing.fpx: %d fingerprints, want the reference's %d", len(got), len(missing))
	}
	if replica.Role(t) != "master" {
		t.Fatal("the replica did not take over during the audit: a test that cannot tell")
	}
}
