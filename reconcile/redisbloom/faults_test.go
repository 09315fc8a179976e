package redisbloom_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// scandumpOf is the bytes of BF.SCANDUMP key iter as go-redis sends it: a
// proxy's trigger.
func scandumpOf(key string, iter int) string {
	it := fmt.Sprint(iter)
	return fmt.Sprintf("$11\r\nBF.SCANDUMP\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(it), it)
}

// TestAuditRechecked: keys added while the audit runs, after their
// shard's dump was read (while shard 0's BF.MEXISTS is held back, shard
// 1's dump read ahead already), are found
// when asked again and never reported missing; the filters that grew a
// sub-filter meanwhile are the same filters (their headers extend those
// read).
func TestAuditRechecked(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, template: "rk:{*}", router: newRefRouter("mod-md5", 3, nil, 0), item: "sha256", n: 20_000, capacity: 500, errRate: 0.01}
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "BF.MEXISTS", -1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	if len(rc.missing) == 0 {
		t.Fatal("nothing missing: a test that cannot tell")
	}
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--report", "r.json", "--missing", "missing.fpx")...)
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("the keys not found were never asked again: exit %d\n%s", r.Code, r.Stderr)
	}
	for i, k := range rc.keys {
		if !rc.online[i] {
			db.Do(ctx, "BF.ADD", rc.key(rc.placed[i]), refItem(rc.item, k))
		}
	}
	p.Release()
	r := <-done
	r.Want(t, 0)
	b := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")).RedisBloom
	// Shard 1's dump is read while shard 0's keys are tested (read
	// ahead): before the adds, so its keys added are asked again too.
	if b.Missing != 0 || b.Shards[0].Rechecked != rc.missOf[0] || b.Shards[1].Rechecked != rc.missOf[1] || b.Rechecked != rc.missOf[0]+rc.missOf[1] {
		t.Fatalf("report: %d missing, %d rechecked (shard 0: %d, shard 1: %d); shards 0 and 1 had %d and %d missing when their dumps were read",
			b.Missing, b.Rechecked, b.Shards[0].Rechecked, b.Shards[1].Rechecked, rc.missOf[0], rc.missOf[1])
	}
	if !strings.Contains(r.Stderr, "found when asked again") {
		t.Fatalf("summary: %s", r.Stderr)
	}
}

// TestAuditFilterChanged: a filter flushed, or deleted and made again,
// while the audit reads it (its first chunk held back meanwhile) is an
// error naming the shard and the key (exit 2), never keys missing.
func TestAuditFilterChanged(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(rc *rbCase)
		want   string
	}{
		// Shard 1 is read ahead while shard 0's keys are tested: its
		// header read again after them finds it gone first.
		{"flushed", func(rc *rbCase) { rc.c.FlushDB(context.Background()) }, `RedisBloom shard 0: filter "fc:{0}" was deleted`},
		{"made again", func(rc *rbCase) {
			ctx := context.Background()
			rc.c.Del(ctx, rc.key(1))
			rc.c.Do(ctx, "BF.RESERVE", rc.key(1), 0.001, 2000)
		}, `RedisBloom shard 1: filter "fc:{1}" was replaced`},
		{"made again alike", func(rc *rbCase) {
			ctx := context.Background()
			rc.c.Del(ctx, rc.key(1))
			rc.c.Do(ctx, "BF.RESERVE", rc.key(1), rc.errRate, rc.capacity)
		}, `RedisBloom shard 1: filter "fc:{1}" was replaced`},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := reconciletest.RedisDB(t, 9)
			rc := &rbCase{c: db, template: "fc:{*}", router: newRefRouter("mod-md5", 3, nil, 0), item: "key", n: 5000, capacity: 200, errRate: 0.01}
			p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), scandumpOf("fc:{1}", 1), -1)
			rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
			rc.setup(t)
			done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--missing", "missing.fpx")...)
			select {
			case <-p.Held:
			case r := <-done:
				t.Fatalf("shard 1's first chunk was never asked for: exit %d\n%s", r.Code, r.Stderr)
			}
			c.change(rc)
			p.Release()
			r := <-done
			r.Want(t, 2)
			if !strings.Contains(r.Stderr, c.want) || !strings.Contains(r.Stderr, "rerun the audit") {
				t.Fatalf("stderr %q, want %q in it", r.Stderr, c.want)
			}
		})
	}
}

// TestAuditServerRestarted: the server killed and started again, empty,
// in the middle of reading a filter (the connection cut inside a chunk):
// the audit says the filter is gone (exit 2), never that its keys are
// missing; once the filters are made again, the rerun finds exactly what
// they miss.
func TestAuditServerRestarted(t *testing.T) {
	reconciletest.NeedKill(t)
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, template: "sr:{*}", router: newRefRouter("ring", 0, []string{"n1", "n2"}, 30), item: "sha256", n: 20_000, capacity: 300, errRate: 0.01}
	p := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), scandumpOf("sr:{n2}", 1), 100, 0)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--retries", "8", "--timeout", "20s")...)
	select {
	case <-p.Shut:
	case r := <-done:
		t.Fatalf("the proxy never cut the audit's reads: exit %d\n%s", r.Code, r.Stderr)
	}
	reconciletest.RestartRedis(t)
	p.ListenAgain()
	r := <-done
	r.Want(t, 2)
	// n2 is read ahead while n1's keys are tested: n1's header read again
	// after them finds it gone first.
	if !strings.Contains(r.Stderr, `RedisBloom shard n1: filter "sr:{n1}" was deleted`) {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	db = reconciletest.RedisDB(t, 9) // the restarted server's
	rc.c = db
	rc.setup(t)
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--missing", "missing.fpx")...).Want(t, 1)
	if got := reconciletest.Dump(t, rc.dir, "missing.fpx"); !slices.Equal(got, rc.missing) {
		t.Fatalf("the rerun: %d missing, the reference %d", len(got), len(rc.missing))
	}
}

// TestAuditClusterFailover: a replica takes over its master's slots in
// the middle of a cluster audit (CLUSTER FAILOVER TAKEOVER): the audit
// follows the cluster to the new master and finds exactly what the
// reference finds missing, every filter read whole.
func TestAuditClusterFailover(t *testing.T) {
	reconciletest.NeedKill(t)
	reconciletest.PlainOnly(t, "20 s of a replica syncing and taking over; the audit's reads are raced by TestAuditCluster")
	c := reconciletest.ClusterClient(t)
	rc := &rbCase{c: c, url: func(q string) string { return reconciletest.ClusterURL(t, q) }, template: "fo:{*}",
		router: newRefRouter("mod-md5", 16, nil, 0), item: "sha256", n: 60_000, capacity: 500, errRate: 0.01}
	replica := reconciletest.StartReplica(t, reconciletest.ClusterSeeds(t)[2])
	rc.setup(t)
	replica.CaughtUp(t)
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--read-rate", "20k", "--report", "r.json", "--missing", "missing.fpx")...)
	time.Sleep(1500 * time.Millisecond) // the audit tests 60k keys at 20k/s: 3 s
	replica.TakeOver(t)
	r := <-done
	r.Want(t, 1)
	b := reconciletest.ReadReport(t, filepath.Join(rc.dir, "r.json")).RedisBloom
	if b == nil || b.Missing != int64(len(rc.missing)) {
		t.Fatalf("the audit across the failover: %+v, want %d missing", b, len(rc.missing))
	}
	if got := reconciletest.Dump(t, rc.dir, "missing.fpx"); !slices.Equal(got, rc.missing) {
		t.Fatalf("missing.fpx: %d fingerprints, the reference %d", len(got), len(rc.missing))
	}
	if replica.Role(t) != "master" {
		t.Fatal("the replica did not take over during the audit: a test that cannot tell")
	}
}
