package redisbloom_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// clearError is a run that failed as the README says a run may: exit 2,
// a message of fpdedup's own naming what failed, no panic.
func clearError(t *testing.T, r reconciletest.Result) {
	t.Helper()
	if r.Code != 2 || !strings.HasPrefix(r.Stderr, "fpdedup: ") || strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine ") {
		t.Fatalf("exit %d, want 0 or a clear error (exit 2):\n%s", r.Code, r.Stderr)
	}
}

// TestApplyClusterFailover: a replica takes over its master's slots
// (CLUSTER FAILOVER TAKEOVER) once --apply's first items are in: the run
// either follows the cluster and agrees (exit 0), every item it claims
// read back and the module holding every truth key when asked apart, or
// it stops with a clear error (exit 2) claiming no more read back than
// the module holds; a rerun then agrees.
func TestApplyClusterFailover(t *testing.T) {
	reconciletest.NeedKill(t)
	reconciletest.PlainOnly(t, "20 s of a replica syncing and taking over")
	c := reconciletest.ClusterClient(t)
	rc := &rbCase{c: c, url: func(q string) string { return reconciletest.ClusterURL(t, q) }, template: "fa:{*}",
		router: newRefRouter("mod-md5", 16, nil, 0), item: "sha256", n: 60_000, capacity: 500, errRate: 0.01}
	replica := reconciletest.StartReplica(t, reconciletest.ClusterSeeds(t)[2])
	rc.setup(t)
	replica.CaughtUp(t)
	missing := len(rc.missing)
	if missing < 2000 {
		t.Fatalf("%d missing: too few to fail over among", missing)
	}
	before := sum(rc.items(t))
	// About 6000 items at 1000/s: seconds of writes to fail over in.
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--apply", "--batch", "100", "--conns", "2", "--rate", "1000", "--report", "a.json")...)
	reconciletest.MustWait(t, "--apply writes its first items", func() bool { return sum(rc.items(t)) > before })
	replica.TakeOver(t)
	during(t, done, "--apply")
	r := <-done
	rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "a.json"))
	rc.reference(t)
	switch r.Code {
	case 0:
		if rb := rep.ReadBack; rb == nil || rb.Keys != int64(missing) || rb.NotHeld != 0 || rb.Short != 0 {
			t.Fatalf("agreed, read back %+v; %d were missing", rep.ReadBack, missing)
		}
		if len(rc.missing) != 0 {
			t.Fatalf("agreed, and the module lacks %d truth keys", len(rc.missing))
		}
	default:
		clearError(t, r)
		if rb := rep.ReadBack; rb != nil && rb.Keys-rb.NotHeld > int64(missing-len(rc.missing)) {
			t.Fatalf("read back %+v held, but the module holds %d of the %d written", rb, missing-len(rc.missing), missing)
		}
		t.Logf("the run stopped: %s", r.Stderr)
		replica.Settled(t)
		reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--apply")...).Want(t, 0)
		rc.wantAllHeld(t, "the rerun")
	}
	rc.audit(t)
}

// TestRebuildClusterFailover: a replica takes over its master's slots
// once the first rebuilt filter is being written (--rebuild-shard all,
// 16 filters of 6 MB): the run either follows the cluster and swaps every
// filter in (exit 0), each live filter then the module's own for its
// truth keys, no :rebuild key left; or it stops with a clear error (exit
// 2; after every swap too, when it finds the slots changed hands before
// its end), or its read-back finds a swap the failover undid (exit 1), every
// shard it counts rebuilt holding the filter built. A rerun
// then rebuilds every shard, and the audit agrees.
func TestRebuildClusterFailover(t *testing.T) {
	reconciletest.NeedKill(t)
	reconciletest.PlainOnly(t, "20 s of a replica syncing and taking over")
	ctx := context.Background()
	c := reconciletest.ClusterClient(t)
	rc := &rbCase{c: c, url: func(q string) string { return reconciletest.ClusterURL(t, q) }, template: "fr:{*}",
		router: newRefRouter("mod-md5", 16, nil, 0), item: "key", n: 20_000, capacity: 300, errRate: 0.01}
	replica := reconciletest.StartReplica(t, reconciletest.ClusterSeeds(t)[2])
	rc.setup(t)
	replica.CaughtUp(t)
	const capacity, errRate = 5_000_000, 0.01
	rebuild := []string{"--rebuild-shard", "all", "--capacity", "5000000", "--error", "0.01", "--report", "r.json"}
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args(rebuild...)...)
	writing := func() bool {
		p := c.Pipeline()
		for s := range rc.router.shards {
			p.Exists(ctx, rc.key(s)+":rebuild")
		}
		cmds, _ := p.Exec(ctx)
		for _, c := range cmds {
			if c.(interface{ Val() int64 }).Val() > 0 {
				return true
			}
		}
		return false
	}
	reconciletest.MustWait(t, "the first rebuilt filter is written", writing)
	replica.TakeOver(t)
	during(t, done, "the rebuild")
	r := <-done
	rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json"))
	// Every shard counted rebuilt and yet a failure: only the slots found
	// to have changed hands after the swaps (a failover after the last
	// shard's checks), which makes the run say nothing of them.
	moved := strings.Contains(r.Stderr, "the Cluster's slots changed hands during --rebuild-shard")
	if rep.Rebuild == nil || rep.Rebuild.Rebuilt == int64(rc.router.shards) && r.Code != 0 && !(r.Code == 2 && moved) {
		t.Fatalf("rebuild %+v, exit %d: %s", rep.Rebuild, r.Code, r.Stderr)
	}
	switch {
	case r.Code == 1 && strings.Contains(r.Stderr, "short when read back"):
		// The read-back found a swap the failover undid after every
		// check before it passed: said, and not counted (below).
		t.Logf("a swap undone, found by the read-back (%d of %d rebuilt): %s", rep.Rebuild.Rebuilt, rc.router.shards, r.Stderr)
	case r.Code != 0:
		clearError(t, r)
		t.Logf("the run stopped (%d of %d rebuilt): %s", rep.Rebuild.Rebuilt, rc.router.shards, r.Stderr)
	}
	// What it counts rebuilt is the module's filter for the truth.
	var rebuilt int64
	for s, sh := range rep.RedisBloom.Shards {
		if !sh.Rebuilt {
			continue
		}
		rebuilt++
		if got, want := dumpOf(t, c, rc.key(s)), rc.refFilter(t, s, errRate, capacity, "EXPANSION", 2); !bytes.Equal(got, want) {
			t.Fatalf("shard %d counted rebuilt: the live filter (%d bytes) is not the module's for its truth keys (%d bytes)", s, len(got), len(want))
		}
	}
	if rebuilt != rep.Rebuild.Rebuilt {
		t.Fatalf("%d shards marked rebuilt, the report counts %d", rebuilt, rep.Rebuild.Rebuilt)
	}
	if r.Code != 0 {
		replica.Settled(t)
		reconciletest.Fpdedup(t, rc.dir, nil, rc.args(rebuild...)...).Want(t, 0)
	}
	for s := range rc.router.shards {
		if got, want := dumpOf(t, c, rc.key(s)), rc.refFilter(t, s, errRate, capacity, "EXPANSION", 2); !bytes.Equal(got, want) {
			t.Fatalf("shard %d: the live filter (%d bytes) is not the module's for its truth keys (%d bytes)", s, len(got), len(want))
		}
		if c.Exists(ctx, rc.key(s)+":rebuild").Val() != 0 {
			t.Fatalf("%s:rebuild left behind", rc.key(s))
		}
	}
	rc.wantAllHeld(t, "the rebuild")
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args()...).Want(t, 0)
}

// during fails a test whose run ended before the failover it was to
// meet: one that cannot tell.
func during(t *testing.T, done <-chan reconciletest.Result, what string) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("%s ended (exit %d) before the replica took over: a test that cannot tell\n%s", what, r.Code, r.Stderr)
	default:
	}
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}
