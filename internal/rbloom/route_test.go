package rbloom_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// TestRouters: shards of fixed keys, computed independently with Python's
// hashlib:
//
//	p4 = lambda s: int.from_bytes(hashlib.md5(s).digest()[:4], 'big')
//	mod16, mod3 = p4(key) % 16, p4(key) % 3
//	pts = sorted((p4(f"{n}#{i}".encode()), k, i) for k, n in enumerate(nodes) for i in range(v))
//	j = bisect.bisect_left([p[0] for p in pts], p4(key))   # the first point >= the key's
//	node = nodes[pts[j % len(pts)][1]]
//
// with nodes A,B,C and 100 vnodes (ring1), and redis-1 … redis-4 and 3
// (ring2). "B#7" and "C#5" are points of ring1 themselves (a key at a
// point goes to it); "wrap449" hashes past ring1's largest point
// (4268858797 < 4284327041) and wraps to its smallest, C's.
func TestRouters(t *testing.T) {
	mod16 := mustRouter(t, rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 16})
	mod3 := mustRouter(t, rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 3})
	ring1 := mustRouter(t, rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: []string{"A", "B", "C"}, VNodes: 100})
	ring2 := mustRouter(t, rbloom.RouterSpec{Route: rbloom.RouteRing, Shards: 4,
		Nodes: []string{"redis-1", "redis-2", "redis-3", "redis-4"}, VNodes: 3})
	for _, c := range []struct {
		key          string
		m16, m3      int
		node1, node2 string
	}{
		{"", 9, 1, "A", "redis-2"},
		{"a", 9, 0, "B", "redis-1"},
		{"user:42", 8, 2, "B", "redis-2"},
		{"l2:evt:9f3a", 2, 1, "A", "redis-2"},
		{"hello world", 11, 0, "C", "redis-2"},
		{"café", 4, 1, "B", "redis-1"},
		{strings.Repeat("k", 100), 13, 1, "C", "redis-1"},
		{"B#7", -1, -1, "B", ""},
		{"C#5", -1, -1, "C", ""},
		{"wrap449", -1, -1, "C", ""},
	} {
		k := []byte(c.key)
		if c.m16 >= 0 {
			if s := mod16.Shard(k); s != c.m16 || mod16.Name(s) != strconv.Itoa(c.m16) {
				t.Errorf("mod-md5/16 %q: shard %d (%s), want %d", c.key, s, mod16.Name(s), c.m16)
			}
			if s := mod3.Shard(k); s != c.m3 {
				t.Errorf("mod-md5/3 %q: shard %d, want %d", c.key, s, c.m3)
			}
		}
		if n := ring1.Name(ring1.Shard(k)); n != c.node1 {
			t.Errorf("ring A,B,C×100 %q: %s, want %s", c.key, n, c.node1)
		}
		if c.node2 != "" {
			if n := ring2.Name(ring2.Shard(k)); n != c.node2 {
				t.Errorf("ring redis-1..4×3 %q: %s, want %s", c.key, n, c.node2)
			}
		}
	}
	all := mustRouter(t, rbloom.RouterSpec{Route: rbloom.RouteAll, Shards: 5})
	if !all.All() || all.Shard([]byte("x")) != -1 || all.Shards() != 5 || all.Name(4) != "4" {
		t.Error("route=all does not send a key to every shard")
	}
	// A ring spreads keys over its nodes about evenly at 100 vnodes.
	count := map[string]int{}
	r := rand.New(rand.NewPCG(1, 2))
	for range 30000 {
		count[ring1.Name(ring1.Shard([]byte(strconv.Itoa(int(r.Uint32())))))]++
	}
	for _, n := range []string{"A", "B", "C"} {
		if count[n] < 7000 {
			t.Errorf("ring: node %s has %d keys of 30000", n, count[n])
		}
	}
}

func mustRouter(t *testing.T, s rbloom.RouterSpec) *rbloom.Router {
	t.Helper()
	r, err := rbloom.NewRouter(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRouterSpecErrors(t *testing.T) {
	for _, c := range []struct {
		s    rbloom.RouterSpec
		want string
	}{
		{rbloom.RouterSpec{Route: "crc16", Shards: 4}, "route="},
		{rbloom.RouterSpec{Route: "", Shards: 4}, "route="},
		{rbloom.RouterSpec{Route: rbloom.RouteModMD5}, "shards=0"},
		{rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 1<<20 + 1}, "shards="},
		{rbloom.RouterSpec{Route: rbloom.RouteAll, Shards: -1}, "shards="},
		{rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 4, Nodes: []string{"a"}}, "nodes="},
		{rbloom.RouterSpec{Route: rbloom.RouteRing, VNodes: 10}, "nodes="},
		{rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: []string{"a", "b"}}, "vnodes=0"},
		{rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: []string{"a", "b"}, VNodes: 1<<16 + 1}, "vnodes="},
		{rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: []string{"a", "a"}, VNodes: 3}, "repeated"},
		{rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: []string{"a", ""}, VNodes: 3}, "empty"},
		{rbloom.RouterSpec{Route: rbloom.RouteRing, Shards: 3, Nodes: []string{"a", "b"}, VNodes: 3}, "shards=3"},
	} {
		_, err := rbloom.NewRouter(c.s)
		if !errors.Is(err, rbloom.ErrRouter) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an ErrRouter naming %q", c.s, err, c.want)
		}
	}
}

// TestItems: sha256 as `printf %s KEY | sha256sum` prints it; fp as
// fpstore.Fingerprint's String (the index's own hex form).
func TestItems(t *testing.T) {
	for _, c := range []struct{ key, sha string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"user:42", "ea3fd43be1e57d62e163dae19fc740bd6d660eec497235fd0ef859e2bd9fa328"},
	} {
		if got := rbloom.ItemSHA256.AppendKeyItem(nil, []byte(c.key)); string(got) != c.sha {
			t.Errorf("sha256 of %q: %s, want %s", c.key, got, c.sha)
		}
		if got := rbloom.ItemKey.AppendKeyItem([]byte("x"), []byte(c.key)); string(got) != "x"+c.key {
			t.Errorf("key item of %q: %q", c.key, got)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		fp := fpstore.Fingerprint{Hi: r.Uint64() >> uint(r.IntN(64)), Lo: r.Uint64() >> uint(r.IntN(64))}
		if got := rbloom.AppendFP(nil, fp.Hi, fp.Lo); string(got) != fp.String() {
			t.Fatalf("fp item %s, fpstore says %s", got, fp)
		}
	}
	for _, s := range []string{"key", "sha256", "fp"} {
		it, err := rbloom.ParseItem(s)
		if err != nil || it.String() != s || it.NeedsKey() != (s != "fp") {
			t.Errorf("ParseItem(%q) = %v, %v", s, it, err)
		}
	}
	if _, err := rbloom.ParseItem("md5"); !errors.Is(err, rbloom.ErrItem) {
		t.Errorf("item=md5: %v", err)
	}
}
