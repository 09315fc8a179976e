package redisbloom_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// emptyShard deletes shard s's filter and reserves it again as it was
// made, empty: a flushed shard's filter made again by the online system.
func (rc *rbCase) emptyShard(t *testing.T, s int) {
	t.Helper()
	ctx := context.Background()
	if err := rc.c.Del(ctx, rc.key(s)).Err(); err != nil {
		t.Fatal(err)
	}
	args := []any{"BF.RESERVE", rc.key(s), rc.errRate, rc.capacity}
	if rc.expansion > 0 {
		args = append(args, "EXPANSION", rc.expansion)
	}
	if err := rc.c.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditAskedAgainByDump: a shard whose keys are all missing (its
// filter emptied) is asked again by reading its dump a second time, not
// with a BF.MEXISTS a key; keys added after its first read are found then
// (rechecked), never reported missing. The other shard, a few keys
// missing in it, is asked with BF.MEXISTS.
func TestAuditAskedAgainByDump(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, template: "ad:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "key", n: 4000, capacity: 200, errRate: 0.01}
	// Held once the first chunk of shard 0's first read is answered.
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), scandumpOf(rc.key(0), 1), 1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	rc.emptyShard(t, 0)
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--report", "r.json", "--missing", "missing.fpx")...)
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("shard 0's dump was never read: exit %d\n%s", r.Code, r.Stderr)
	}
	added := 0
	for i, k := range rc.keys {
		if rc.placed[i] == 0 && added < 100 {
			if err := db.Do(ctx, "BF.ADD", rc.key(0), refItem(rc.item, k)).Err(); err != nil {
				t.Fatal(err)
			}
			added++
		}
	}
	p.Release()
	r := <-done
	r.Want(t, 1)
	rc.reference(t) // the keys added, and any they make look present, held now
	b := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")).RedisBloom
	s0, s1 := b.Shards[0], b.Shards[1]
	if held := rc.perShard[0] - rc.missOf[0]; held < int64(added) || s0.AskedAgain != report.AskedAgainDump || s0.Rechecked != held || s0.Missing != rc.missOf[0] {
		t.Fatalf("shard 0: asked again by %q, %d rechecked, %d missing; want by dump, %d rechecked (%d added), %d missing", s0.AskedAgain, s0.Rechecked, s0.Missing, held, added, rc.missOf[0])
	}
	if s1.AskedAgain != report.AskedAgainMEXISTS || s1.Missing != rc.missOf[1] || s1.Rechecked != 0 {
		t.Fatalf("shard 1: asked again by %q, %d missing (want %d), %d rechecked", s1.AskedAgain, s1.Missing, rc.missOf[1], s1.Rechecked)
	}
	if got := reconciletest.Dump(t, rc.dir, "missing.fpx"); !slices.Equal(got, rc.missing) {
		t.Fatalf("missing.fpx: %d fingerprints, the reference %d", len(got), len(rc.missing))
	}
	if !strings.Contains(r.Stderr, "found when asked again (BF.MEXISTS; dump read again)") {
		t.Fatalf("summary: %s", r.Stderr)
	}
}

// TestApplyReadBackWhole: after --apply, a filter that got many of the
// items written beside its size (a shard emptied) is read back whole and
// its items tested in its dump; the run agrees only when they are all
// there. Emptied again between the writes and the read-back (made again
// alike: its header no shorter than the audit's), its items are found not
// held: exit 1, never "agree".
func TestApplyReadBackWhole(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost=%v", lost), func(t *testing.T) {
			db := reconciletest.RedisDB(t, 9)
			rc := &rbCase{c: db, template: "aw:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 4000, capacity: 200, errRate: 0.01}
			// Held once the writes (one batch) are answered.
			p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "BF.INSERT", 1)
			rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
			rc.setup(t)
			rc.emptyShard(t, 0)
			rc.reference(t)
			written := rc.missOf
			done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--apply", "--batch", "100000", "--report", "ap.json")...)
			select {
			case <-p.Held:
			case r := <-done:
				t.Fatalf("nothing written: exit %d\n%s", r.Code, r.Stderr)
			}
			if lost {
				rc.emptyShard(t, 0)
			}
			p.Release()
			r := <-done
			rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "ap.json"))
			rb := rep.ReadBack
			if rb == nil || len(rb.Shards) != 2 || rb.Keys != written[0]+written[1] || rb.BytesRead <= 0 {
				t.Fatalf("read back %+v", rb)
			}
			sh := rb.Shards[0]
			if sh.Shard != 0 {
				sh = rb.Shards[1]
			}
			if !sh.DumpRead {
				t.Fatalf("shard 0, %d items written, was not read back whole: %+v", written[0], sh)
			}
			if !lost {
				r.Want(t, 0)
				if rb.NotHeld != 0 || sh.Short || !rep.Agree || !strings.Contains(r.Stderr, "read back after the writes (tested in the dumps of the filters written to, read whole: ") {
					t.Fatalf("read back %+v, agree %v\n%s", rb, rep.Agree, r.Stderr)
				}
				rc.wantAllHeld(t, "--apply")
				return
			}
			r.Want(t, 1)
			if rb.NotHeld < written[0] || rep.Agree || !strings.Contains(r.Stderr, "are not held") {
				t.Fatalf("shard 0 emptied after %d items written to it: read back %+v, agree %v\n%s", written[0], rb, rep.Agree, r.Stderr)
			}
		})
	}
}

// TestAuditAskedAgainGrew: an emptied filter refilled while the audit
// reads it grows one sub-filter between its two looks, and another while
// the second look reads (after the header that look tested by): the keys
// in that last one, which the second look could not test, are asked with
// BF.MEXISTS, never reported missing.
func TestAuditAskedAgainGrew(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "ag:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "key", n: 4000, capacity: 200, errRate: 0.01}
	rc.setup(t)
	rc.emptyShard(t, 0)
	v, err := db.Do(ctx, "BF.SCANDUMP", rc.key(0), 0).Slice()
	if err != nil || len(v) != 2 {
		t.Fatalf("BF.SCANDUMP: %v %v", v, err)
	}
	data, _ := v[1].(string)
	h, err := rbloom.ParseHeader([]byte(data), 1<<20)
	if err != nil || len(h.Links) != 1 {
		t.Fatalf("header: %v, %v", h, err)
	}
	// The client -> a (held once the first look's chunk is answered) ->
	// b (held before the second sub-filter's chunk, which only the second
	// look reads) -> the server.
	b := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), scandumpOf(rc.key(0), int(h.Links[0].Bytes)+1), -1)
	a := reconciletest.NewHoldProxy(t, b.Addr, scandumpOf(rc.key(0), 1), 1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", a.Addr, q) }
	var keys0 []string
	for i, k := range rc.keys {
		if rc.placed[i] == 0 {
			keys0 = append(keys0, k)
		}
	}
	add := func(keys []string) {
		for _, k := range keys {
			if err := db.Do(ctx, "BF.ADD", rc.key(0), refItem(rc.item, k)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	subFilters := func() int64 { return rc.info(t, 0)["Number of filters"] }
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--report", "r.json", "--missing", "missing.fpx")...)
	wait := func(p *reconciletest.TCPProxy, what string) {
		select {
		case <-p.Held:
		case r := <-done:
			t.Fatalf("%s never came: exit %d\n%s", what, r.Code, r.Stderr)
		}
	}
	wait(a, "shard 0's first look")
	add(keys0[:300])
	if n := subFilters(); n != 2 {
		t.Fatalf("%d sub-filters after 300 adds, want 2", n)
	}
	a.Release()
	wait(b, "the second look's read of the second sub-filter")
	add(keys0[300:800])
	if n := subFilters(); n != 3 {
		t.Fatalf("%d sub-filters after 800 adds, want 3", n)
	}
	b.Release()
	r := <-done
	r.Want(t, 1)
	rc.reference(t)
	s0 := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")).RedisBloom.Shards[0]
	if held := rc.perShard[0] - rc.missOf[0]; held < 800 || s0.AskedAgain != report.AskedAgainDumpMEXISTS || s0.Rechecked != held || s0.Missing != rc.missOf[0] {
		t.Fatalf("shard 0: asked again by %q, %d rechecked, %d missing; want %q, %d rechecked, %d missing", s0.AskedAgain, s0.Rechecked, s0.Missing, report.AskedAgainDumpMEXISTS, held, rc.missOf[0])
	}
	if got := reconciletest.Dump(t, rc.dir, "missing.fpx"); !slices.Equal(got, rc.missing) {
		t.Fatalf("missing.fpx: %d fingerprints, the reference %d", len(got), len(rc.missing))
	}
}

// TestApplyReadBackInPasses: the filters read back whole are larger than
// a pass (--mem 112MiB leaves a pass 17 MiB beside the items held, and
// shard 0 grows a sub-filter of 16M items, 19 MB): each item is tested
// across the passes under the same number, a sub-filter split between
// them, and every item written is found held.
func TestApplyReadBackInPasses(t *testing.T) {
	reconciletest.PlainOnly(t, "40 MB of filters read back; the passes' logic is rbloom's, raced there")
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "ap2:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 100_000, capacity: 100, errRate: 0.01, expansion: 400, mem: "112MiB"}
	rc.setup(t)
	rc.emptyShard(t, 0)
	rc.reference(t)
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--apply", "--report", "ap.json")...).Want(t, 0)
	rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "ap.json"))
	rb := rep.ReadBack
	whole := 0
	for _, sh := range rb.Shards {
		if sh.DumpRead {
			whole++
		}
	}
	if rb.Keys != int64(len(rc.missing)) || rb.NotHeld != 0 || whole == 0 || rb.Passes <= whole {
		t.Fatalf("read back %d keys, %d not held, %d filters whole in %d passes; want %d keys held, a filter in several passes", rb.Keys, rb.NotHeld, whole, rb.Passes, len(rc.missing))
	}
	rc.wantAllHeld(t, "--apply")
}

// TestApplyReadBackServerRestarted: the server killed while a filter is
// read back whole after --apply (the connection cut inside a chunk of a
// sub-filter the writes grew, which the audit never read) and started
// again, empty: the writes it answered are lost with it. The run says the
// filter is gone (exit 2), never that the keys are held or that the sides
// agree.
func TestApplyReadBackServerRestarted(t *testing.T) {
	reconciletest.PlainOnly(t, "a server restarted and waited for; the read-back runs under -race in TestApplyReadBackWhole")
	reconciletest.NeedKill(t)
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, template: "arr:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 4000, capacity: 200, errRate: 0.01}
	rc.url = func(q string) string { return reconciletest.RedisURL(t, 9, q) }
	rc.setup(t)
	rc.emptyShard(t, 0)
	rc.reference(t)
	if rc.missOf[0] < 4*int64(rc.capacity) {
		t.Fatalf("%d items to write to shard 0: too few to grow its filter of capacity %d", rc.missOf[0], rc.capacity)
	}
	// The first byte past the emptied filter's first sub-filter: read by
	// the read-back of the filter grown by the writes, never by the audit.
	hdr, err := db.Do(context.Background(), "BF.SCANDUMP", rc.key(0), 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := hdr[1].(string)
	h, err := rbloom.ParseHeader([]byte(data), 1<<20)
	if err != nil || len(h.Links) != 1 {
		t.Fatalf("the emptied filter's header: %v, %d sub-filters", err, len(h.Links))
	}
	p := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), scandumpOf(rc.key(0), int(h.Links[0].Bytes)+1), 100, 0)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--apply", "--batch", "100000", "--retries", "8", "--timeout", "20s", "--report", "ap.json")...)
	select {
	case <-p.Shut:
	case r := <-done:
		t.Fatalf("the proxy never cut the read-back: exit %d\n%s", r.Code, r.Stderr)
	}
	reconciletest.RestartRedis(t)
	p.ListenAgain()
	r := <-done
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, `RedisBloom shard 0: filter "arr:{0}" was deleted`) || strings.Contains(r.Stderr, "agree") || strings.Contains(r.Stderr, "all held") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "ap.json")); rep.Agree || rep.Apply == nil || rep.Apply.Written == 0 {
		t.Fatalf("report: agree %v, apply %+v", rep.Agree, rep.Apply)
	}
}
