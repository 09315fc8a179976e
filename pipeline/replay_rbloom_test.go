package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// genDay is the day's events of the project's generator (the reference
// mix: 38% repeats, half of them far back), csv with its header, as
// records of key (user:device:timestamp_ms), time and line; in time order
// (a stable sort by timestamp_ms) unless arrival.
func genDay(t *testing.T, n int64, seed uint64, arrival bool) (evs []refEvent, path string) {
	t.Helper()
	var b bytes.Buffer
	if _, err := gen.Generate(&b, gen.Options{Records: n, Seed: seed, Format: "csv"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(b.String(), "\n")
	header, lines := lines[0], lines[1:len(lines)-1]
	for _, l := range lines {
		f := strings.Split(l, ",")
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, refEvent{key: f[0] + ":" + f[1] + ":" + f[2], t: ms, line: l})
	}
	if !arrival {
		slices.SortStableFunc(evs, func(a, b refEvent) int { return int(a.t - b.t) })
	}
	return evs, writeEvents(t, evs, header)
}

// rbCase is a replay of L2 as RedisBloom filters, and the same filters in
// the real module.
type rbCase struct {
	name       string
	router     rbloom.RouterSpec
	item       rbloom.Item
	capacity   uint64
	error      float64
	expansion  uint32
	nonscaling bool
	l1Bits     uint64 // an L1 in front, 1 s windows
	arrival    bool
}

// TestReplayRedisBloomModule is the acceptance test of the RedisBloom
// model: the day's events added in the order replay takes them with BF.ADD
// to the real module (rbloomtest), one filter a shard named by the router
// and made by BF.RESERVE with the same capacity, error and expansion. Each
// add's answer (1 new, 0 already present, or the module's refusal of a
// full NONSCALING filter) is replay's decision for that event; the lost
// events (--lost) are exactly those whose add answered 0 though no earlier
// event had the key, in input order; and each filter at the end, read back
// with BF.INFO and BF.SCANDUMP, has the items, sub-filters, capacity, size,
// fill and rate replay reports. Capacities are small so that every filter
// grows to 3 sub-filters or more and false positives occur.
//
// With an L1 in front, only the events L1 lets through are added (an L1
// drop sends nothing to L2), and an event is added to L1 when L2 did not
// drop it, as the online system does (Replay's doc).
func TestReplayRedisBloomModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	ctx := context.Background()
	ring := rbloom.RouterSpec{Route: rbloom.RouteRing, Nodes: []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"}, VNodes: 100}
	mod4 := rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 4}
	cases := []rbCase{
		{name: "mod-md5/key", router: mod4, item: rbloom.ItemKey, capacity: 40, error: 0.05},
		{name: "ring/sha256", router: ring, item: rbloom.ItemSHA256, capacity: 25, error: 0.1, expansion: 3},
		{name: "mod-md5/fp/expansion 1", router: rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 3}, item: rbloom.ItemFP, capacity: 200, error: 0.02, expansion: 1},
		{name: "nonscaling", router: mod4, item: rbloom.ItemKey, capacity: 600, error: 0.1, nonscaling: true},
		{name: "L1 in front, arrival order", router: ring, item: rbloom.ItemKey, capacity: 30, error: 0.05, l1Bits: 1 << 9, arrival: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, path := genDay(t, 6000, 7, c.arrival)
			router, err := rbloom.NewRouter(c.router)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Client.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			filter := func(s int) string { return "l2:rb:{" + router.Name(s) + "}" }
			for s := range router.Shards() {
				args := []any{"BF.RESERVE", filter(s), c.error, c.capacity}
				if c.expansion != 0 {
					args = append(args, "EXPANSION", c.expansion)
				}
				if c.nonscaling {
					args = append(args, "NONSCALING")
				}
				if err := srv.Client.Do(ctx, args...).Err(); err != nil {
					t.Fatal(err)
				}
			}

			// The module's answers, event by event, with the L1 and the
			// truth written out from their definitions.
			want := make([]replayDecision, len(evs))
			var wantLost strings.Builder
			seen := map[string]bool{}
			var l1 []bool
			window, clock := int64(0), int64(0)
			var lostSeen, refused int
			for i, e := range evs {
				first := !seen[e.key]
				seen[e.key] = true
				clock = max(clock, e.t)
				u := xxh3.Hash128([]byte(e.key))
				if c.l1Bits > 0 {
					if w := clock / 1000; i == 0 || w != window {
						window, l1 = w, make([]bool, c.l1Bits)
					}
					if l1[u.Lo%c.l1Bits] {
						want[i] = decidedL1
						if first {
							wantLost.WriteString(e.line)
						}
						continue
					}
				}
				var item []byte
				if c.item == rbloom.ItemFP {
					item = rbloom.AppendFP(nil, u.Hi, u.Lo)
				} else {
					item = c.item.AppendKeyItem(nil, []byte(e.key))
				}
				n, err := srv.Client.Do(ctx, "BF.ADD", filter(router.Shard([]byte(e.key))), item).Int()
				switch {
				case err != nil && err.Error() == "ERR non scaling filter is full":
					want[i] = decidedRefused
					refused++
				case err != nil:
					t.Fatalf("event %d: BF.ADD: %v", i, err)
				case n == 0:
					want[i] = decidedSeen
					if first {
						wantLost.WriteString(e.line)
						lostSeen++
					}
					continue
				}
				if c.l1Bits > 0 {
					l1[u.Lo%c.l1Bits] = true
				}
			}

			got := make([]replayDecision, len(evs))
			var lost bytes.Buffer
			opts := ReplayOptions{
				Inputs: []string{path}, Records: csvRecords(t, true, "1", "2", "3"), TimeField: "3", Arrival: c.arrival,
				RedisBloom: &ReplayRedisBloom{Capacity: []uint64{c.capacity}, Error: c.error, Expansion: c.expansion, NonScaling: c.nonscaling, Router: router, Item: c.item},
				Lost:       &lost, Threads: 2, Mem: 256 << 20, TmpDir: t.TempDir(),
				decided: func(i int64, d replayDecision) { got[i] = d },
			}
			if c.l1Bits > 0 {
				opts.L1 = &ReplayL1{Bits: c.l1Bits, TTL: time.Second}
			}
			st, err := Replay(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if st.Events != int64(len(evs)) {
				t.Fatalf("%d events, want %d", st.Events, len(evs))
			}
			bad := 0
			for i := range evs {
				if got[i] != want[i] {
					if bad++; bad <= 5 {
						t.Errorf("event %d (%s): replay decided %d, the module %d", i, strings.TrimSpace(evs[i].line), got[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d decisions differ from the module's answers", bad, len(evs))
			}
			header := "user_id,device_id,timestamp_ms,event_type,amount\n"
			if lost.String() != header+wantLost.String() {
				t.Errorf("--lost: %d bytes, want the %d of the events whose add answered 0 (or L1 dropped) though new", lost.Len(), len(header)+wantLost.Len())
			}
			l2 := st.Systems[0].L2
			if l2.FalseDrops != int64(lostSeen) || l2.Refused != int64(refused) {
				t.Errorf("L2 false drops %d, refused %d; the module: %d, %d", l2.FalseDrops, l2.Refused, lostSeen, refused)
			}

			// Each filter at the end, read back from the module.
			links := 0
			for s, sh := range l2.Shards {
				info := bfInfo(t, srv, filter(s))
				if sh.Name != router.Name(s) || sh.Items != uint64(info["Number of items inserted"]) || sh.SubFilters != int(info["Number of filters"]) ||
					sh.Capacity != uint64(info["Capacity"]) || sh.Bytes != info["Size"] {
					t.Errorf("shard %s: %+v; BF.INFO %v", router.Name(s), sh, info)
				}
				f := scanDump(t, srv, filter(s))
				fill := f.Fill()
				var set, bits uint64
				for i := range f.Header().Links {
					set, bits = set+fill[i], bits+f.Header().Links[i].Modulus()
				}
				if sh.Fill != float64(set)/float64(bits) || sh.FPRNow != f.Header().FPR(fill) {
					t.Errorf("shard %s: fill %g, fp now %g; the module's bits: %g, %g", sh.Name, sh.Fill, sh.FPRNow, float64(set)/float64(bits), f.Header().FPR(fill))
				}
				links = max(links, sh.SubFilters)
			}
			// The data must be able to fail the test.
			switch {
			case lostSeen == 0:
				t.Error("no false positive: the test cannot tell a wrong answer")
			case c.nonscaling && refused == 0:
				t.Error("no add refused by a full NONSCALING filter")
			case !c.nonscaling && links < 3:
				t.Errorf("the filters grew to %d sub-filters at most, want 3 or more", links)
			}
			t.Logf("%d events: %d first occurrences, lost in L2 %d, refused %d, up to %d sub-filters", len(evs), st.FirstOccurrences, lostSeen, refused, links)
		})
	}
}

// bfInfo is BF.INFO key, by field.
func bfInfo(t *testing.T, srv *rbloomtest.Server, key string) map[string]int64 {
	t.Helper()
	v, err := srv.Client.Do(context.Background(), "BF.INFO", key).Slice()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for i := 0; i+1 < len(v); i += 2 {
		n, _ := v[i+1].(int64)
		m[fmt.Sprint(v[i])] = n
	}
	return m
}

// scanDump reads key's filter whole with BF.SCANDUMP.
func scanDump(t *testing.T, srv *rbloomtest.Server, key string) *rbloom.Filter {
	t.Helper()
	next := func(it int64) (int64, []byte) {
		v, err := srv.Client.Do(context.Background(), "BF.SCANDUMP", key, it).Slice()
		if err != nil || len(v) != 2 {
			t.Fatalf("BF.SCANDUMP %s %d: %v %v", key, it, v, err)
		}
		s, _ := v[1].(string)
		return v[0].(int64), []byte(s)
	}
	_, hb := next(0)
	h, err := rbloom.ParseHeader(hb, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l, err := rbloom.NewLoader(h, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	for !l.Done() {
		it, data := next(l.Iter())
		if err := l.Load(it, data); err != nil {
			t.Fatal(err)
		}
	}
	return l.Filter()
}

// TestReplayRBPrefetch: the prefetch addresses are those of the bits BF.ADD
// tests, in the large sub-filters only, wherever a sub-filter's chunks are
// cut (a second sub-filter of 27 MiB is two chunks of BF.SCANDUMP).
func TestReplayRBPrefetch(t *testing.T) {
	f, err := rbloom.NewFilter(rbloom.Params{Capacity: 1, Error: 0.01, Expansion: 20_000_000}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range []string{"a", "b"} {
		if _, err := f.Add([]byte(item)); err != nil {
			t.Fatal(err)
		}
	}
	hd := f.Header()
	if len(hd.Links) != 2 || hd.Links[1].Bytes <= rbloom.MaxChunk {
		t.Fatalf("sub-filters %+v: want a second one of more than a chunk", hd.Links)
	}
	var sh rbShard
	sh.locate(f)
	var off, link1 uint64 // bytes read, and those of the second sub-filter

	for it, b := range f.Chunks() {
		if it > 1 {
			if off >= hd.Links[0].Bytes {
				link1 += uint64(len(b))
				if off == hd.Links[0].Bytes && sh.links[0].base != uintptr(unsafe.Pointer(&b[0])) {
					t.Error("the second sub-filter's base is not its first chunk's")
				}
			}
			off += uint64(len(b))
		}
	}
	if len(sh.links) != 1 || sh.links[0].probes != hd.Links[1].Hashes || link1 != hd.Links[1].Bytes {
		t.Fatalf("prefetch links %+v, want the second sub-filter's %d hashes", sh.links, hd.Links[1].Hashes)
	}
	h := hd.Hash([]byte("c"))
	a := sh.prefetchLines(nil, h)
	for j, p := range a {
		if want := sh.links[0].base + uintptr(h.Bit(uint32(j), hd.Links[1].Modulus())/8); p != want {
			t.Errorf("bit %d: address %#x, want %#x", j, p, want)
		}
	}
}

// TestReplayRedisBloomSweep: each system of a sweep of capacities (all fed
// in one pass, sharing the filters' share of memory) is what a replay of
// its capacity alone reports, figure for figure, and --lost is the
// primary's.
func TestReplayRedisBloomSweep(t *testing.T) {
	_, path := genDay(t, 5000, 11, true)
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	run := func(capacities ...uint64) (ReplayStats, string) {
		var lost bytes.Buffer
		st, err := Replay(context.Background(), ReplayOptions{
			Inputs: []string{path}, Records: csvRecords(t, true, "1", "2", "3"), TimeField: "3", Arrival: true,
			L1:         &ReplayL1{Bits: 1 << 9, TTL: time.Second},
			RedisBloom: &ReplayRedisBloom{Capacity: capacities, Error: 0.05, Expansion: 3, Router: router, Item: rbloom.ItemSHA256},
			Lost:       &lost, Threads: 2, Mem: 256 << 20, TmpDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return st, lost.String()
	}
	sweep := []uint64{40, 10, 300}
	all, lost := run(sweep...)
	if len(all.Systems) != len(sweep) {
		t.Fatalf("%d systems, want %d", len(all.Systems), len(sweep))
	}
	for i, c := range sweep {
		one, oneLost := run(c)
		got, want := all.Systems[i], one.Systems[0]
		if !reflect.DeepEqual(*got.L1, *want.L1) || !reflect.DeepEqual(*got.L2, *want.L2) {
			t.Errorf("capacity %d: in the sweep %+v %+v, alone %+v %+v", c, *got.L1, *got.L2, *want.L1, *want.L2)
		}
		got.L1, got.L2, want.L1, want.L2 = nil, nil, nil, nil
		if got != want {
			t.Errorf("capacity %d: in the sweep %+v, alone %+v", c, got, want)
		}
		if i == 0 && lost != oneLost {
			t.Error("--lost of the sweep is not its primary's")
		}
	}
	if all.Systems[0].Lost == all.Systems[1].Lost {
		t.Error("capacities 40 and 10 lost as many: the sweep cannot tell its systems apart")
	}
}
