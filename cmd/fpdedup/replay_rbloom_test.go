package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// TestReplayRedisBloomCLI is the acceptance test through the command: the
// day's events of fpdedup gen, in arrival order, replayed by `fpdedup
// replay --order arrival --l1 … --l2 redisbloom,…` (--hash sha256,
// item=fp, a ring whose node names hold ':'), and the same events sent to
// the real module: each one L1 lets through (L1 written out from its
// definition) added with BF.ADD to the filter its node names, made by
// BF.RESERVE with the same capacity, error and expansion. --lost is, byte
// for byte, the events L1 dropped or whose add answered 0 though no earlier
// event had the key; each shard's items and sub-filters in the report are
// BF.INFO's.
func TestReplayRedisBloomCLI(t *testing.T) {
	srv := rbloomtest.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	var day bytes.Buffer
	if _, err := gen.Generate(&day, gen.Options{Records: 8000, Seed: 3, Format: "csv"}); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dir, "day.csv")
	if err := os.WriteFile(events, day.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"redis-1:6379", "redis-2:6379", "redis-3:6379", "redis-4:6379"}
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: nodes, VNodes: 50})
	if err != nil {
		t.Fatal(err)
	}
	const capacity, errRate, expansion, l1Bits = 60, 0.05, 2, 1 << 10
	filter := func(s int) string { return "l2:rb:{" + router.Name(s) + "}" }
	for s := range router.Shards() {
		if err := srv.Client.Do(ctx, "BF.RESERVE", filter(s), errRate, capacity, "EXPANSION", expansion).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.SplitAfter(day.String(), "\n")
	header, lines := lines[0], lines[1:len(lines)-1]
	var want strings.Builder
	want.WriteString(header)
	seen := map[string]bool{}
	var l1 []bool
	window, clock := int64(-1), int64(0)
	for i, l := range lines {
		f := strings.Split(l, ",")
		key := f[0] + ":" + f[1] + ":" + f[2]
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		first := !seen[key]
		seen[key] = true
		if clock = max(clock, ms); clock/1000 != window {
			window, l1 = clock/1000, make([]bool, l1Bits)
		}
		// --hash sha256: the fingerprint is SHA-256's first 128 bits; the
		// L1 bit is its low half mod SIZE, the item its 32 hex digits.
		d := sha256.Sum256([]byte(key))
		bit := binary.BigEndian.Uint64(d[8:16]) % l1Bits
		if l1[bit] {
			if first {
				want.WriteString(l)
			}
			continue
		}
		n, err := srv.Client.Do(ctx, "BF.ADD", filter(router.Shard([]byte(key))), hex.EncodeToString(d[:16])).Int()
		if err != nil {
			t.Fatalf("event %d: BF.ADD: %v", i, err)
		}
		if n == 0 {
			if first {
				want.WriteString(l)
			}
			continue
		}
		l1[bit] = true
	}

	link := fpdedupLink(t)
	lost := filepath.Join(dir, "lost.csv")
	stdout, _ := runFpdedup(t, link, "replay", "-q", "--json", "--hash", "sha256", "--format", "csv", "--header", "--key", "user_id,device_id,timestamp_ms",
		"--order", "arrival", "--l1", fmt.Sprintf("%d,ttl=1s", l1Bits),
		"--l2", fmt.Sprintf("redisbloom,capacity=%d,error=%g,expansion=%d,route=ring,item=fp,vnodes=50,nodes=%s", capacity, errRate, expansion, strings.Join(nodes, ",")),
		"--lost", lost, events)
	got, err := os.ReadFile(lost)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Errorf("--lost: %d lines, the module's answers say %d", strings.Count(string(got), "\n")-1, strings.Count(want.String(), "\n")-1)
	}
	var report struct {
		Replay struct {
			Systems []struct {
				L2 struct {
					FalseDrops int64 `json:"false_drops"`
					Shards     []struct {
						Name       string
						Items      int64
						SubFilters int64 `json:"sub_filters"`
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatal(err)
	}
	l2 := report.Replay.Systems[0].L2
	most := int64(0)
	for s, sh := range l2.Shards {
		info, err := srv.Client.Do(ctx, "BF.INFO", filter(s)).Slice()
		if err != nil {
			t.Fatal(err)
		}
		if sh.Name != nodes[s] || sh.SubFilters != info[5].(int64) || sh.Items != info[7].(int64) {
			t.Errorf("shard %d: %+v; BF.INFO %v", s, sh, info)
		}
		most = max(most, sh.SubFilters)
	}
	if l2.FalseDrops == 0 || most < 3 {
		t.Errorf("L2 false drops %d, sub-filters %d at most: the data cannot tell a wrong answer", l2.FalseDrops, most)
	}
}

// FuzzParseRedisBloom: any --l2 redisbloom,… and --sweep text is either a
// usage error naming the flag, or filters BF.RESERVE would make, routed by
// a router replay can follow.
func FuzzParseRedisBloom(f *testing.F) {
	for _, s := range [][2]string{
		{"redisbloom,capacity=1k,error=0.01,shards=16,route=mod-md5,item=key", ""},
		{"redisbloom,capacity=10,error=0.5,nonscaling,shards=2,route=mod-md5,item=sha256", "capacity=1,2,3"},
		{"redisbloom,error=0.01,expansion=4,route=ring,item=fp,vnodes=100,nodes=a:1,b:2,c:3", "capacity=10M,1k"},
		{"redisbloom,capacity=1,error=0.1,shards=3,route=all,item=key", ""},
		{"redisbloom,capacity=1,error=0.1,route=ring,vnodes=2,nodes=a,,a", ""},
		{"redisbloom,nodes=", "capacity="},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, l2, sweep string) {
		rb, err := parseRedisBloom(l2, sweep)
		if err != nil {
			var ue usageError
			if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "--") {
				t.Fatalf("%q %q: %v: not a usage error naming the flag", l2, sweep, err)
			}
			return
		}
		if err := rb.Check(); err != nil {
			t.Fatalf("%q %q: parsed, but %v", l2, sweep, err)
		}
		if rb.Router.All() || len(rb.Capacity) == 0 || !(rb.Error > 0 && rb.Error < 1) || (rb.NonScaling && rb.Expansion != 0) {
			t.Fatalf("%q %q: parsed to %+v", l2, sweep, rb)
		}
		for i, c := range rb.Capacity {
			if c == 0 || slices.Contains(rb.Capacity[:i], c) {
				t.Fatalf("%q %q: capacities %v", l2, sweep, rb.Capacity)
			}
		}
	})
}
