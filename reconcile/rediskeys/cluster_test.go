package rediskeys_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// perMaster is how many keys each master holds, by address.
func perMaster(t *testing.T, c *redis.ClusterClient) map[string]int64 {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int64{}
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		k, err := node.DBSize(ctx).Result()
		mu.Lock()
		n[node.Options().Addr] = k
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// clusterCalls sums INFO commandstats' calls of cmd over the masters.
func clusterCalls(t *testing.T, c *redis.ClusterClient, cmd string) int64 {
	t.Helper()
	var mu sync.Mutex
	var total int64
	err := c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				k, _ := strconv.ParseInt(strings.Split(rest, ",")[0], 10, 64)
				mu.Lock()
				total += k
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// 100k truth keys, 10% missing online and 1% online only, spread over the
// three masters of a Redis Cluster: SCAN on every master gives the exact
// counts, outputs and backfill; one node's address alone is refused (its
// SCAN would see a third of the keys); --apply writes exactly the missing
// keys through cluster pipelines, after which nothing is missing, by SCAN
// and by EXISTS probes across slots.
func TestRedisClusterKeys(t *testing.T) {
	c := reconciletest.ClusterClient(t)
	d := reconciletest.NewDataset(t, 100_000)
	ctx := context.Background()
	for names := reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex); len(names) > 0; {
		n := min(len(names), 5000)
		pipe := c.Pipeline()
		for _, k := range names[:n] {
			pipe.Set(ctx, "dd:"+k, 1, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		names = names[n:]
	}
	c.Set(ctx, "dd:not-a-fingerprint", 1, 0)
	c.Set(ctx, "other:"+reconciletest.FPHex(d.Keys[3]), 1, 0)
	per := perMaster(t, c)
	if len(per) != 3 {
		t.Fatalf("masters: %v", per)
	}
	for addr, n := range per {
		if n < 25_000 {
			t.Fatalf("master %s holds %d keys: not spread (%v)", addr, n, per)
		}
	}
	url := reconciletest.ClusterURL(t, "match=dd:*")

	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url,
		"--report", "r.json", "--missing", "missing.fpx", "--extra", "extra.fpx",
		"--records", d.Records, "--backfill", "backfill.txt").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	if rep.Mode != "sort-merge-join" || rep.Online.Values != 91_001 || rep.Online.Bad != 1 || rep.Online.Repeats != 0 || rep.Online.Source != url ||
		len(rep.Online.Masters) != 3 {
		t.Fatalf("report: %+v", rep.Online)
	}
	if !strings.Contains(r.Stderr, "only offline (missing online) 10000") {
		t.Fatalf("summary: %s", r.Stderr)
	}
	if got := reconciletest.Dump(t, d.Dir, "missing.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("missing.fpx: %d fingerprints, want %d", len(got), len(d.MissingFPs()))
	}
	if got := reconciletest.Dump(t, d.Dir, "extra.fpx"); !slices.Equal(got, d.ExtraFPs()) {
		t.Fatalf("extra.fpx: %d fingerprints, want %d", len(got), len(d.ExtraFPs()))
	}
	if bf := string(reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "backfill.txt")))); bf != d.MissingRecords() {
		t.Fatalf("backfill: %d bytes, want %d", len(bf), len(d.MissingRecords()))
	}

	// One node's address alone (no cluster=1) is refused, not a third.
	one := "redis://" + reconciletest.ClusterSeeds(t)[0] + "/0?match=dd:*"
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", one).Want(t, 2)
	if !strings.Contains(r.Stderr, "node of a Redis Cluster") || !strings.Contains(r.Stderr, "cluster=1") {
		t.Fatalf("a single node of a cluster: %s", r.Stderr)
	}

	// --probe: EXISTS pipelines across slots find the same missing keys.
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--probe", "--report", "p.json", "--missing", "pm.fpx").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "p.json"))
	reconciletest.WantCounts(t, rep.Counts, 90_000, 10_000, -1)
	if got := reconciletest.Dump(t, d.Dir, "pm.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("pm.fpx: %d fingerprints", len(got))
	}

	// --apply through cluster pipelines, with a checkpoint and a TTL.
	sets := clusterCalls(t, c, "set")
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply", "--ttl", "1h",
		"--checkpoint", "apply.ckpt", "--conns", "4", "--report", "a.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	if rep.Apply == nil || rep.Apply.Written != 10_000 || rep.Missing != 0 || !rep.Apply.CheckpointRemoved {
		t.Fatalf("apply: %+v, missing after %d", rep.Apply, rep.Missing)
	}
	if got := clusterCalls(t, c, "set") - sets; got != 10_000 {
		t.Fatalf("%d SET commands for 10000 missing keys", got)
	}
	if ttl := c.TTL(ctx, "dd:"+d.MissingFPs()[0]).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of a written key: %v", ttl)
	}
	// Seeds given as addr= parameters (go-redis's ParseClusterURL style).
	seeds := reconciletest.ClusterSeeds(t)
	alt := "redis://" + seeds[0] + "/?match=dd:*&addr=" + strings.Join(seeds[1:], "&addr=")
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", alt, "--report", "after.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "after.json")).Counts, 100_000, 0, 1_000)
	// One seed with cluster=1 finds the others; the probe agrees (exit 0).
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", "redis://"+seeds[1]+"/?match=dd:*&cluster=1", "--probe").Want(t, 0)
}

// A set in the cluster lives on the master of its slot: SSCAN, SCARD,
// SMISMEMBER and SADD go there; --apply then a probe finds nothing missing.
// Whole-digest member names are written from --records.
func TestRedisClusterSet(t *testing.T) {
	reconciletest.PlainOnly(t, "a set through the Cluster; the Cluster reads run under -race in TestRedisClusterKeys")
	c := reconciletest.ClusterClient(t)
	d := reconciletest.NewDataset(t, 20_000)
	ctx := context.Background()
	members := reconciletest.Hexes(d.OnlineKeys(), reconciletest.FullHex)
	for len(members) > 0 {
		n := min(len(members), 2000)
		args := make([]any, n)
		for i, m := range members[:n] {
			args[i] = m
		}
		if err := c.SAdd(ctx, "{ev}seen", args...).Err(); err != nil {
			t.Fatal(err)
		}
		members = members[n:]
	}
	url := reconciletest.ClusterURL(t, "set={ev}seen")
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "s.json").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "s.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if rep.Online.Expected != 18_200 || !rep.Online.Wide {
		t.Fatalf("SCARD %d, wide %v", rep.Online.Expected, rep.Online.Wide)
	}
	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 2)
	if !strings.Contains(r.Stderr, "--apply needs --records") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply", "--records", d.Records,
		"--batch", "500", "--report", "a.json").Want(t, 1)
	if rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json")); rep.Apply.Written != 2_000 || rep.Missing != 0 {
		t.Fatalf("apply: %+v", rep.Apply)
	}
	if n := c.SCard(ctx, "{ev}seen").Val(); n != 20_200 {
		t.Fatalf("the set holds %d after --apply, want 20200", n)
	}
	if !c.SIsMember(ctx, "{ev}seen", reconciletest.FullHex(d.Keys[d.Missing[0]])).Val() {
		t.Fatal("a missing key was not added under its whole digest")
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "b.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json")).Counts, 20_000, 0, 200)
}

// A master killed (SIGKILL) while its keys are being scanned: the run
// stops with a clear error naming it, exit 2, never a short count; the node
// restarted (empty: no persistence), the cluster is whole again.
func TestRedisClusterNodeKilled(t *testing.T) {
	reconciletest.NeedKill(t)
	c := reconciletest.ClusterClient(t)
	d := reconciletest.NewDataset(t, 60_000)
	ctx := context.Background()
	for names := reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex); len(names) > 0; {
		n := min(len(names), 5000)
		pipe := c.Pipeline()
		for _, k := range names[:n] {
			pipe.Set(ctx, "dd:"+k, 1, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		names = names[n:]
	}
	victim := reconciletest.ClusterSeeds(t)[1]
	pid := reconciletest.NodePID(t, victim)
	t.Cleanup(func() { reconciletest.RestartCluster(t) })

	url := reconciletest.ClusterURL(t, "match=dd:*&count=100")
	done := make(chan reconciletest.Result, 1)
	go func() {
		done <- reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--read-rate", "10k",
			"--retries", "1", "--timeout", "2s", "--report", "k.json")
	}()
	time.Sleep(1500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	r := <-done
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "master "+victim) || !strings.Contains(r.Stderr, "rerun") {
		t.Fatalf("unclear error: %s", r.Stderr)
	}
	t.Logf("stderr: %s", r.Stderr)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "k.json"))
	if rep.ExitCode != 2 || rep.Agree || !strings.Contains(rep.Error, victim) {
		t.Fatalf("report after a killed node: exit %d, agree %v, error %q", rep.ExitCode, rep.Agree, rep.Error)
	}
	reconciletest.RestartCluster(t)
}

// A master frozen (SIGSTOP) during --apply through cluster pipelines: the
// run stops with a clear error and a checkpoint whose keys are all online;
// the node thawed and the cluster whole again, the same command resumes and
// writes only what is still missing, each key once.
func TestRedisClusterNodeStoppedDuringApply(t *testing.T) {
	reconciletest.PlainOnly(t, "a master stopped and waited for; apply's retries run under -race in TestRedisServerStoppedDuringApply")
	reconciletest.NeedKill(t)
	c := reconciletest.ClusterClient(t)
	d := reconciletest.NewDataset(t, 50_000)
	ctx := context.Background()
	for names := reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex); len(names) > 0; {
		n := min(len(names), 5000)
		pipe := c.Pipeline()
		for _, k := range names[:n] {
			pipe.Set(ctx, "dd:"+k, 1, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		names = names[n:]
	}
	pid := reconciletest.NodePID(t, reconciletest.ClusterSeeds(t)[2])
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	url := reconciletest.ClusterURL(t, "match=dd:*")
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--apply", "--batch", "100", "--conns", "2",
		"--checkpoint", ckpt, "--timeout", "300ms", "--retries", "2"}
	done := make(chan reconciletest.Result, 1)
	go func() {
		done <- reconciletest.Fpdedup(t, d.Dir, nil, append(args, "--rate", "2k", "--report", "a.json")...)
	}()
	if !reconciletest.WaitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		t.Fatal("no checkpoint appeared")
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	r := <-done
	syscall.Kill(pid, syscall.SIGCONT)
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "writing to "+url+" failed") || !strings.Contains(r.Stderr, "rerun the same command to resume") {
		t.Fatalf("unclear error: %s", r.Stderr)
	}
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 || len(ck.Last) != 32 {
		t.Fatalf("checkpoint: %+v %v", ck, err)
	}
	if !reconciletest.WaitFor(30*time.Second, func() bool {
		ok := true
		for _, s := range reconciletest.ClusterSeeds(t) {
			n := reconciletest.NodeClient(s)
			info, err := n.ClusterInfo(ctx).Result()
			n.Close()
			ok = ok && err == nil && strings.Contains(info, "cluster_state:ok")
		}
		return ok
	}) {
		t.Fatal("the cluster did not come back to cluster_state:ok")
	}
	for _, fp := range d.MissingFPs() {
		if fp > ck.Last {
			break
		}
		if c.Exists(ctx, "dd:"+fp).Val() != 1 {
			t.Fatalf("checkpoint at %s but %s is not online", ck.Last, fp)
		}
	}
	// Pipelines the frozen node had in its sockets run when it thaws
	// (harmless: SET NX); let them land before counting.
	sets := clusterCalls(t, c, "set")
	for {
		time.Sleep(300 * time.Millisecond)
		n := clusterCalls(t, c, "set")
		if n == sets {
			break
		}
		sets = n
	}
	reconciletest.Fpdedup(t, d.Dir, nil, append(args, "--report", "b.json")...).Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json"))
	if rep.Apply.Written != rep.Counts.OnlyOffline || rep.Apply.Written == 0 || ck.Written+rep.Apply.Written > 5_000 || rep.Missing != 0 {
		t.Fatalf("resume wrote %d of %d still missing (%d before)", rep.Apply.Written, rep.Counts.OnlyOffline, ck.Written)
	}
	if got := clusterCalls(t, c, "set") - sets; got != rep.Apply.Written {
		t.Fatalf("resume sent %d SETs for %d keys", got, rep.Apply.Written)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "c.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "c.json")).Counts, 50_000, 0, 500)
}
