package redisbloom_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// TestApply: --dry-run prints, shard by shard, the BF.INSERT … NOCREATE
// ITEMS of exactly the items the module does not hold and writes nothing;
// --apply adds them through the apply machinery (batches, connections,
// checkpoint), says "agree" from what BF.MEXISTS reads back, and the
// module then holds every truth key: a re-audit exits 0. Standalone and
// in the Cluster, each router that names a shard.
func TestApply(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster bool
		router  *refRouter
		item    string
	}{
		{"sha256, mod-md5", false, newRefRouter("mod-md5", 4, nil, 0), "sha256"},
		{"key, ring, cluster", true, newRefRouter("ring", 0, []string{"redis-a:6379", "redis-b:6379", "redis-c:6379"}, 40), "key"},
		{"fp, mod-md5, cluster", true, newRefRouter("mod-md5", 8, nil, 0), "fp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := &rbCase{template: "ap:{*}", router: c.router, item: c.item, n: 6000, capacity: 200, errRate: 0.01}
			if c.cluster {
				rc.c, rc.url = reconciletest.ClusterClient(t), func(q string) string { return reconciletest.ClusterURL(t, q) }
			} else {
				rc.c, rc.url = reconciletest.RedisDB(t, 9), func(q string) string { return reconciletest.RedisURL(t, 9, q) }
			}
			rc.setup(t)
			if len(rc.missing) == 0 {
				t.Fatal("nothing missing: a test that cannot tell")
			}
			before := rc.items(t)

			// The dry run: the commands, and nothing written.
			r := reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--dry-run")...).Want(t, 1)
			want := rc.missingItems()
			got := map[string][]string{}
			for _, line := range strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n") {
				f := strings.Fields(line)
				if len(f) < 5 || f[0] != "BF.INSERT" || f[2] != "NOCREATE" || f[3] != "ITEMS" {
					t.Fatalf("dry run line %q", line)
				}
				got[f[1]] = append(got[f[1]], f[4:]...)
			}
			for k := range got {
				slices.Sort(got[k])
			}
			if len(got) != len(want) {
				t.Fatalf("dry run: %d filters written, want %d", len(got), len(want))
			}
			for k, items := range want {
				if !slices.Equal(got[k], items) {
					t.Fatalf("dry run: %s gets %d items, want %d", k, len(got[k]), len(items))
				}
			}
			if after := rc.items(t); !slices.Equal(after, before) {
				t.Fatalf("the dry run wrote: items %v, before %v", after, before)
			}

			// The apply, in several batches on two connections, with a
			// checkpoint; read back.
			reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--apply", "--batch", "50", "--conns", "2", "--checkpoint", "ck.json", "--report", "ap.json")...).Want(t, 0)
			rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "ap.json"))
			if a := rep.Apply; a == nil || a.Written != int64(len(rc.missing)) || a.Batches < 2 || !a.CheckpointRemoved {
				t.Fatalf("apply %+v, want %d written in batches, the checkpoint removed", a, len(rc.missing))
			}
			if !rep.RedisBloom.ItemsFromAudit || rep.Records != nil {
				t.Fatalf("the items written were not the audit's: records read again %+v", rep.Records)
			}
			if rb := rep.ReadBack; rb == nil || rb.Keys != int64(len(rc.missing)) || rb.NotHeld != 0 || rb.Short != 0 || len(rb.Shards) != len(want) {
				t.Fatalf("read back %+v, want %d keys held in %d filters", rep.ReadBack, len(rc.missing), len(want))
			}
			rc.wantAllHeld(t, "--apply")
			rc.audit(t)
		})
	}
}

// TestApplyFilterGone: a filter deleted between the audit and the writes
// is not made again with the module's defaults by the adds (NOCREATE):
// the run fails naming the shard, exit 2, and nothing is created.
func TestApplyFilterGone(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	ctx := context.Background()
	rc := &rbCase{c: db, url: func(q string) string { return reconciletest.RedisURL(t, 9, q) }, template: "gone:{*}",
		router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 3000, capacity: 200, errRate: 0.01}
	rc.setup(t)
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "BF.INSERT", -1)
	rc.url = func(q string) string { return "redis://" + p.Addr + "/9?" + q }
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--apply", "--retries", "0")...)
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("nothing written: exit %d\n%s", r.Code, r.Stderr)
	}
	db.Del(ctx, rc.key(0), rc.key(1))
	p.Release()
	r := <-done
	if r.Code != 2 || !strings.Contains(r.Stderr, "does not exist") || !strings.Contains(r.Stderr, "gone:{") {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	if n := db.Exists(ctx, rc.key(0), rc.key(1)).Val(); n != 0 {
		t.Fatalf("%d filters made again by the writes", n)
	}
}

// items is BF.INFO's items of every shard.
func (rc *rbCase) items(t *testing.T) []int64 {
	var v []int64
	for s := range rc.router.shards {
		v = append(v, rc.info(t, s)["Number of items inserted"])
	}
	return v
}

// missingItems are the items of the keys missing, by filter, sorted.
func (rc *rbCase) missingItems() map[string][]string {
	miss := map[string]bool{}
	for _, fp := range rc.missing {
		miss[fp] = true
	}
	m := map[string][]string{}
	for _, k := range rc.keys {
		if miss[reconciletest.FPHex(k)] {
			key := rc.key(rc.router.shard(k))
			m[key] = append(m[key], refItem(rc.item, k))
		}
	}
	for k := range m {
		slices.Sort(m[k])
	}
	return m
}

// TestApplyInterrupted: SIGINT while --apply waits on the server (its
// batches after the first held back) ends the run with 130 and the
// checkpoint saved; the rerun with the checkpoint skips no more than the
// first run wrote, writes the rest, reads every item back and exits 0.
func TestApplyInterrupted(t *testing.T) {
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, template: "ai:{*}", router: newRefRouter("mod-md5", 3, nil, 0), item: "sha256", n: 6000, capacity: 200, errRate: 0.01}
	rc.url = func(q string) string { return reconciletest.RedisURL(t, 9, q) }
	rc.setup(t)
	// Held once the first batch's answer begins: the next batch waits.
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "BF.INSERT", 1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	cmd := exec.Command(reconciletest.CLIBinary(t), rc.args("--apply", "--batch", "100", "--conns", "1", "--checkpoint", "ck.json", "--report", "a.json")...)
	cmd.Dir = rc.dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-p.Held:
	case err := <-exited:
		t.Fatalf("the run ended (%v) before its writes were held:\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130:\n%s", err, stderr.String())
	}
	p.Release()
	first := reconciletest.ReadReport(t, filepath.Join(rc.dir, "a.json")).Apply
	if first == nil || first.Written >= int64(len(rc.missing)) {
		t.Fatalf("the interrupted run: %+v of %d", first, len(rc.missing))
	}
	// The same URL (the proxy, now passing all): a checkpoint is a run's.
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--apply", "--batch", "100", "--checkpoint", "ck.json", "--report", "b.json")...).Want(t, 0)
	rep := reconciletest.ReadReport(t, filepath.Join(rc.dir, "b.json"))
	// The rerun audits again: what the first run wrote (its batches
	// acknowledged, and perhaps the one held when it was stopped) is no
	// longer missing; what is, is written (none of it at or before the
	// checkpoint: nothing was deleted) and all of it read back.
	if a := rep.Apply; a.MissingAgain != 0 || rep.Counts.OnlyOffline > int64(len(rc.missing))-first.Written ||
		a.Written != rep.Counts.OnlyOffline || rep.ReadBack.Keys != rep.Counts.OnlyOffline || rep.ReadBack.NotHeld != 0 {
		t.Fatalf("the rerun: apply %+v, read back %+v; the first run wrote %d of %d", a, rep.ReadBack, first.Written, len(rc.missing))
	}
	t.Logf("the first run wrote %d, the rerun %d", first.Written, rep.Apply.Written)
	rc.wantAllHeld(t, "the rerun")
}

// TestApplyServerRestarted: the server killed and started again, empty,
// while --apply writes (its later batches held back meanwhile): the
// writes find the filters gone and stop, naming them (exit 2), making no
// filter of the module's defaults; the filters rebuilt from the truth
// (--rebuild-shard all with their parameters), a rerun agrees.
func TestApplyServerRestarted(t *testing.T) {
	reconciletest.PlainOnly(t, "a server restarted and waited for; apply's retries run under -race in TestApply")
	reconciletest.NeedKill(t)
	db := reconciletest.RedisDB(t, 9)
	rc := &rbCase{c: db, template: "ar2:{*}", router: newRefRouter("mod-md5", 2, nil, 0), item: "sha256", n: 4000, capacity: 300, errRate: 0.01}
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "BF.INSERT", 1)
	rc.url = func(q string) string { return fmt.Sprintf("redis://%s/9?%s", p.Addr, q) }
	rc.setup(t)
	done := reconciletest.RunAsync(t, rc.dir, nil, rc.args("--apply", "--batch", "50", "--conns", "1", "--retries", "8", "--timeout", "20s")...)
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("the writes were never held: exit %d\n%s", r.Code, r.Stderr)
	}
	reconciletest.RestartRedis(t)
	p.Release()
	r := <-done
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "a filter written to does not exist") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if n := keysOnRestarted(t); n != 0 {
		t.Fatalf("%d keys on the restarted server: made by the run", n)
	}
	db = reconciletest.RedisDB(t, 9) // the restarted server's
	rc.c = db
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args("--rebuild-shard", "all", "--capacity", "300", "--error", "0.01")...).Want(t, 0)
	reconciletest.Fpdedup(t, rc.dir, nil, rc.args()...).Want(t, 0)
}

// keysOnRestarted counts the keys of database 9 on the test Redis,
// without flushing it (as RedisDB does).
func keysOnRestarted(t *testing.T) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: reconciletest.RedisAddr(t), DB: 9, Protocol: 2})
	defer c.Close()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
