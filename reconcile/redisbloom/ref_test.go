package redisbloom_test

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// The references here are written from the words, not from the
// product's code: a router (mod-md5, ring) as a function of the key text,
// an item (key, sha256, fp), and what the filters hold, asked of the
// module itself (BF.MEXISTS of every key, in its shard).

// refRouter is a router written from its definition.
type refRouter struct {
	route  string
	shards int
	nodes  []string
	points []refPoint // ring, sorted
}

type refPoint struct {
	at   uint32
	node int
}

func md5BE(s string) uint32 {
	d := md5.Sum([]byte(s))
	return binary.BigEndian.Uint32(d[:4])
}

func newRefRouter(route string, shards int, nodes []string, vnodes int) *refRouter {
	r := &refRouter{route: route, shards: shards, nodes: nodes}
	if route == "ring" {
		r.shards = len(nodes)
		for n, name := range nodes {
			for i := range vnodes {
				r.points = append(r.points, refPoint{md5BE(name + "#" + strconv.Itoa(i)), n})
			}
		}
		sort.SliceStable(r.points, func(i, j int) bool { return r.points[i].at < r.points[j].at })
	}
	return r
}

// shard is the key's shard; -1 for route=all.
func (r *refRouter) shard(key string) int {
	switch r.route {
	case "mod-md5":
		return int(md5BE(key) % uint32(r.shards))
	case "ring":
		h := md5BE(key)
		for _, p := range r.points {
			if p.at >= h {
				return p.node
			}
		}
		return r.points[0].node
	}
	return -1
}

func (r *refRouter) name(s int) string {
	if r.route == "ring" {
		return r.nodes[s]
	}
	return strconv.Itoa(s)
}

// query is the URL's router parameters.
func (r *refRouter) query() string {
	if r.route == "ring" {
		return fmt.Sprintf("route=ring&nodes=%s&vnodes=%d", strings.Join(r.nodes, ","), len(r.points)/len(r.nodes))
	}
	return fmt.Sprintf("route=%s&shards=%d", r.route, r.shards)
}

// refItem is what a filter holds of key for item=kind (the index hashed
// with SHA-256, so that fp is the first half of the digest).
func refItem(kind, key string) string {
	switch kind {
	case "sha256":
		return reconciletest.FullHex(key)
	case "fp":
		return reconciletest.FPHex(key)
	}
	return key
}

// rbCase is the L2 of one router and item on one server (a database of
// the test Redis, or the Cluster): filters reserved small so that they
// grow several sub-filters, 90% of the truth's keys added (in their
// shard; route=all: in one picked at random) and extras besides.
type rbCase struct {
	c         redis.UniversalClient
	url       func(query string) string
	template  string
	router    *refRouter
	item      string
	n         int
	capacity  int     // BF.RESERVE's, a shard
	errRate   float64 // BF.RESERVE's
	expansion int     // BF.RESERVE's EXPANSION (0: the module's 2)
	mem       string

	dir      string
	keys     []string
	online   []bool // keys[i] was added
	placed   []int  // the shard keys[i] was added to
	missing  []string
	perShard []int64 // truth keys routed to each shard
	missOf   []int64 // of them, missing
}

func (rc *rbCase) key(s int) string { return strings.Replace(rc.template, "*", rc.router.name(s), 1) }

func (rc *rbCase) query() string {
	return fmt.Sprintf("bf=%s&%s&item=%s", rc.template, rc.router.query(), rc.item)
}

func (rc *rbCase) args(extra ...string) []string {
	a := []string{"reconcile", "--index", "truth.fpx", "--online", rc.url(rc.query())}
	if rc.item != "fp" || rc.router.route != "all" {
		a = append(a, "--records", "records.txt")
	}
	if rc.mem != "" {
		a = append(a, "--mem", rc.mem)
	}
	return append(a, extra...)
}

// setup writes the truth (records, index of SHA-256 fingerprints) and the
// online state, and works out with BF.MEXISTS what the filters hold.
func (rc *rbCase) setup(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	reconciletest.NeedRedisBloom(t, rc.c)
	rc.dir, rc.keys = t.TempDir(), nil
	var recs strings.Builder
	for i := range rc.n {
		k := reconciletest.Key(i)
		rc.keys = append(rc.keys, k)
		recs.WriteString(k + "\n")
	}
	if err := os.WriteFile(filepath.Join(rc.dir, "records.txt"), []byte(recs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	reconciletest.Fpdedup(t, rc.dir, nil, "build", "-q", "--hash", "sha256", "-o", "truth.fpx", "records.txt").Want(t, 0)

	shards := rc.router.shards
	for s := range shards {
		args := []any{"BF.RESERVE", rc.key(s), rc.errRate, rc.capacity}
		if rc.expansion > 0 {
			args = append(args, "EXPANSION", rc.expansion)
		}
		if err := rc.c.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(44, uint64(rc.n)))
	rc.online, rc.placed = make([]bool, rc.n), make([]int, rc.n)
	adds := make([][]any, shards)
	for i, k := range rc.keys {
		s := rc.router.shard(k)
		if s < 0 {
			s = r.IntN(shards)
		}
		rc.placed[i] = s
		if r.IntN(10) != 0 {
			rc.online[i] = true
			adds[s] = append(adds[s], refItem(rc.item, k))
		}
	}
	for i := range rc.n / 20 { // items of keys not in the truth
		s := r.IntN(shards)
		adds[s] = append(adds[s], refItem(rc.item, reconciletest.Key(50_000_000+i)))
	}
	for s, items := range adds {
		for len(items) > 0 {
			m := min(len(items), 1000)
			if err := rc.c.Do(ctx, append([]any{"BF.MADD", rc.key(s)}, items[:m]...)...).Err(); err != nil {
				t.Fatal(err)
			}
			items = items[m:]
		}
	}
	rc.reference(t)
}

// reference asks the module for every truth key (BF.MEXISTS in its shard;
// route=all: in every shard): what the audit must find missing.
func (rc *rbCase) reference(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	shards := rc.router.shards
	held := make([]bool, rc.n)
	for s := range shards {
		var idx []int
		var items []any
		for i, k := range rc.keys {
			if rs := rc.router.shard(k); rs == s || rs < 0 {
				idx = append(idx, i)
				items = append(items, refItem(rc.item, k))
			}
		}
		for len(items) > 0 {
			m := min(len(items), 1000)
			v, err := rc.c.Do(ctx, append([]any{"BF.MEXISTS", rc.key(s)}, items[:m]...)...).Int64Slice()
			if err != nil {
				t.Fatal(err)
			}
			for j, x := range v {
				held[idx[j]] = held[idx[j]] || x == 1
			}
			items, idx = items[m:], idx[m:]
		}
	}
	rc.missing, rc.perShard, rc.missOf = nil, make([]int64, shards), make([]int64, shards)
	for i, k := range rc.keys {
		s := rc.router.shard(k)
		if s >= 0 {
			rc.perShard[s]++
		}
		if !held[i] {
			rc.missing = append(rc.missing, reconciletest.FPHex(k))
			if s >= 0 {
				rc.missOf[s]++
			}
		}
	}
	slices.Sort(rc.missing)
}

// info is BF.INFO of shard s, by field.
func (rc *rbCase) info(t *testing.T, s int) map[string]int64 {
	t.Helper()
	v, err := rc.c.Do(context.Background(), "BF.INFO", rc.key(s)).Slice()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for i := 0; i+1 < len(v); i += 2 {
		m[fmt.Sprint(v[i])], _ = v[i+1].(int64)
	}
	return m
}

// audit runs the audit and checks it against the reference, shard by
// shard against BF.INFO; it returns the report.
func (rc *rbCase) audit(t *testing.T) *reconciletest.CLIReport {
	t.Helper()
	want := 0
	if len(rc.missing) > 0 {
		want = 1
	}
	res := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--report", "r.json", "--missing", "missing.fpx")...).Want(t, want)
	rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json"))
	if got := reconciletest.Dump(t, rc.dir, "missing.fpx"); !slices.Equal(got, rc.missing) {
		t.Fatalf("missing.fpx: %d fingerprints, the reference %d", len(got), len(rc.missing))
	}
	reconciletest.WantCounts(t, rep.Counts, int64(rc.n-len(rc.missing)), int64(len(rc.missing)), -1)
	b := rep.RedisBloom
	if rep.Mode != "redisbloom-audit" || b == nil || len(b.Shards) != rc.router.shards || b.Missing != int64(len(rc.missing)) ||
		b.TruthKeys != int64(rc.n) || b.Unaudited != 0 || b.Held != int64(rc.n-len(rc.missing)) {
		t.Fatalf("report: mode %s, redisbloom %+v", rep.Mode, b)
	}
	grown := false
	for s, sh := range b.Shards {
		in := rc.info(t, s)
		if sh.Key != rc.key(s) || sh.Shard != rc.router.name(s) || int64(sh.Items) != in["Number of items inserted"] ||
			int64(len(sh.SubFilters)) != in["Number of filters"] || int64(sh.Capacity) != in["Capacity"] || int64(sh.Memory) != in["Size"] ||
			int64(sh.Expansion) != in["Expansion rate"] {
			t.Fatalf("shard %d: %+v; BF.INFO %v", s, sh, in)
		}
		if rc.router.route != "all" && (sh.TruthKeys != rc.perShard[s] || sh.Missing != rc.missOf[s] || sh.Held != rc.perShard[s]-rc.missOf[s]) {
			t.Fatalf("shard %d: %d truth keys, %d missing, %d held; the reference %d and %d", s, sh.TruthKeys, sh.Missing, sh.Held, rc.perShard[s], rc.missOf[s])
		}
		if sh.FPRNow <= 0 || sh.FPRNow >= 1 || sh.TargetFPR != rc.errRate {
			t.Fatalf("shard %d: fpr now %g, target %g (BF.RESERVE's %g)", s, sh.FPRNow, sh.TargetFPR, rc.errRate)
		}
		grown = grown || len(sh.SubFilters) >= 3
	}
	if !grown {
		t.Fatal("no filter grew three sub-filters: a test that cannot tell")
	}
	if !strings.Contains(res.Stderr, fmt.Sprintf("%d not", len(rc.missing))) {
		t.Fatalf("summary: %s", res.Stderr)
	}
	return rep
}

// wantAllHeld fails unless the module holds every truth key now (after:
// what ran, for the message).
func (rc *rbCase) wantAllHeld(t *testing.T, after string) {
	t.Helper()
	rc.reference(t)
	if len(rc.missing) != 0 {
		t.Fatalf("after %s the module lacks %d truth keys", after, len(rc.missing))
	}
}
