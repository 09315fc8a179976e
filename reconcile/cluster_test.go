package reconcile_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fpdedup/fpdedup/reconcile"
)

// clusterSeeds are the seed addresses of the test's Redis Cluster
// (FPDEDUP_REDIS_CLUSTER, set by scripts/services/with-services.sh).
func clusterSeeds(t *testing.T) []string {
	t.Helper()
	s := os.Getenv("FPDEDUP_REDIS_CLUSTER")
	if s == "" {
		t.Skip("FPDEDUP_REDIS_CLUSTER is not set: no Redis Cluster to test against (run under scripts/services/with-services.sh)")
	}
	return strings.Split(s, ",")
}

// clusterClient returns a client of the cluster, every master flushed
// (now and at the end of the test).
func clusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterSeeds(t), Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	ctx := context.Background()
	if !waitFor(30*time.Second, func() bool {
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}) {
		t.Fatalf("the cluster at %v is not ok", clusterSeeds(t))
	}
	flush := func() error {
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushDB(ctx).Err() })
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flush(); c.Close() })
	return c
}

func clusterURL(t *testing.T, query string) string {
	return "redis://" + strings.Join(clusterSeeds(t), ",") + "/?" + query
}

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
	c := clusterClient(t)
	d := newDataset(t, 100_000)
	ctx := context.Background()
	for names := hexes(d.onlineKeys(), fpHex); len(names) > 0; {
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
	c.Set(ctx, "other:"+fpHex(d.keys[3]), 1, 0)
	per := perMaster(t, c)
	if len(per) != 3 {
		t.Fatalf("masters: %v", per)
	}
	for addr, n := range per {
		if n < 25_000 {
			t.Fatalf("master %s holds %d keys: not spread (%v)", addr, n, per)
		}
	}
	url := clusterURL(t, "match=dd:*")

	r := fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url,
		"--report", "r.json", "--missing", "missing.fpx", "--extra", "extra.fpx",
		"--records", d.records, "--backfill", "backfill.txt").want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "r.json"))
	wantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	if rep.Mode != "sort-merge-join" || rep.Online.Values != 91_001 || rep.Online.Bad != 1 || rep.Online.Repeats != 0 || rep.Online.Source != url ||
		len(rep.Online.Masters) != 3 {
		t.Fatalf("report: %+v", rep.Online)
	}
	if !strings.Contains(r.stderr, "only offline (missing online) 10000") {
		t.Fatalf("summary: %s", r.stderr)
	}
	if got := dump(t, d.dir, "missing.fpx"); !slices.Equal(got, d.missingFPs()) {
		t.Fatalf("missing.fpx: %d fingerprints, want %d", len(got), len(d.missingFPs()))
	}
	if got := dump(t, d.dir, "extra.fpx"); !slices.Equal(got, d.extraFPs()) {
		t.Fatalf("extra.fpx: %d fingerprints, want %d", len(got), len(d.extraFPs()))
	}
	if bf := string(must(os.ReadFile(filepath.Join(d.dir, "backfill.txt")))); bf != d.missingRecords() {
		t.Fatalf("backfill: %d bytes, want %d", len(bf), len(d.missingRecords()))
	}

	// One node's address alone (no cluster=1) is refused, not a third.
	one := "redis://" + clusterSeeds(t)[0] + "/0?match=dd:*"
	r = fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", one).want(t, 2)
	if !strings.Contains(r.stderr, "node of a Redis Cluster") || !strings.Contains(r.stderr, "cluster=1") {
		t.Fatalf("a single node of a cluster: %s", r.stderr)
	}

	// --probe: EXISTS pipelines across slots find the same missing keys.
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--probe", "--report", "p.json", "--missing", "pm.fpx").want(t, 1)
	rep = readReport(t, filepath.Join(d.dir, "p.json"))
	wantCounts(t, rep.Counts, 90_000, 10_000, -1)
	if got := dump(t, d.dir, "pm.fpx"); !slices.Equal(got, d.missingFPs()) {
		t.Fatalf("pm.fpx: %d fingerprints", len(got))
	}

	// --apply through cluster pipelines, with a checkpoint and a TTL.
	sets := clusterCalls(t, c, "set")
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--apply", "--ttl", "1h",
		"--checkpoint", "apply.ckpt", "--conns", "4", "--report", "a.json").want(t, 1)
	rep = readReport(t, filepath.Join(d.dir, "a.json"))
	if rep.Apply == nil || rep.Apply.Written != 10_000 || rep.Missing != 0 || !rep.Apply.CheckpointRemoved {
		t.Fatalf("apply: %+v, missing after %d", rep.Apply, rep.Missing)
	}
	if got := clusterCalls(t, c, "set") - sets; got != 10_000 {
		t.Fatalf("%d SET commands for 10000 missing keys", got)
	}
	if ttl := c.TTL(ctx, "dd:"+d.missingFPs()[0]).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of a written key: %v", ttl)
	}
	// Seeds given as addr= parameters (go-redis's ParseClusterURL style).
	seeds := clusterSeeds(t)
	alt := "redis://" + seeds[0] + "/?match=dd:*&addr=" + strings.Join(seeds[1:], "&addr=")
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", alt, "--report", "after.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "after.json")).Counts, 100_000, 0, 1_000)
	// One seed with cluster=1 finds the others; the probe agrees (exit 0).
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", "redis://"+seeds[1]+"/?match=dd:*&cluster=1", "--probe").want(t, 0)
}

// A set in the cluster lives on the master of its slot: SSCAN, SCARD,
// SMISMEMBER and SADD go there; --apply then a probe finds nothing missing.
// Whole-digest member names are written from --records.
func TestRedisClusterSet(t *testing.T) {
	c := clusterClient(t)
	d := newDataset(t, 20_000)
	ctx := context.Background()
	members := hexes(d.onlineKeys(), fullHex)
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
	url := clusterURL(t, "set={ev}seen")
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--report", "s.json").want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "s.json"))
	wantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if rep.Online.Expected != 18_200 || !rep.Online.Wide {
		t.Fatalf("SCARD %d, wide %v", rep.Online.Expected, rep.Online.Wide)
	}
	r := fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--apply").want(t, 2)
	if !strings.Contains(r.stderr, "--apply needs --records") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--apply", "--records", d.records,
		"--batch", "500", "--report", "a.json").want(t, 1)
	if rep := readReport(t, filepath.Join(d.dir, "a.json")); rep.Apply.Written != 2_000 || rep.Missing != 0 {
		t.Fatalf("apply: %+v", rep.Apply)
	}
	if n := c.SCard(ctx, "{ev}seen").Val(); n != 20_200 {
		t.Fatalf("the set holds %d after --apply, want 20200", n)
	}
	if !c.SIsMember(ctx, "{ev}seen", fullHex(d.keys[d.missing[0]])).Val() {
		t.Fatal("a missing key was not added under its whole digest")
	}
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--report", "b.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "b.json")).Counts, 20_000, 0, 200)
}

// A master killed (SIGKILL) while its keys are being scanned: the run
// stops with a clear error naming it, exit 2, never a short count; the node
// restarted (empty: no persistence), the cluster is whole again.
func TestRedisClusterNodeKilled(t *testing.T) {
	needKill(t)
	c := clusterClient(t)
	d := newDataset(t, 60_000)
	ctx := context.Background()
	for names := hexes(d.onlineKeys(), fpHex); len(names) > 0; {
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
	victim := clusterSeeds(t)[1]
	pid := nodePID(t, victim)
	t.Cleanup(func() { restartCluster(t) })

	url := clusterURL(t, "match=dd:*&count=100")
	done := make(chan result, 1)
	go func() {
		done <- fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--read-rate", "10k",
			"--retries", "1", "--timeout", "2s", "--report", "k.json")
	}()
	time.Sleep(1500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	r := <-done
	r.want(t, 2)
	if !strings.Contains(r.stderr, "master "+victim) || !strings.Contains(r.stderr, "rerun") {
		t.Fatalf("unclear error: %s", r.stderr)
	}
	t.Logf("stderr: %s", r.stderr)
	rep := readReport(t, filepath.Join(d.dir, "k.json"))
	if rep.ExitCode != 2 || rep.Agree || !strings.Contains(rep.Error, victim) {
		t.Fatalf("report after a killed node: exit %d, agree %v, error %q", rep.ExitCode, rep.Agree, rep.Error)
	}
	restartCluster(t)
}

// restartCluster starts the killed nodes again with the project's script
// and waits for the cluster to be whole.
func restartCluster(t *testing.T) {
	t.Helper()
	var ports []string
	for _, s := range clusterSeeds(t) {
		ports = append(ports, s[strings.LastIndex(s, ":")+1:])
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot(t), "scripts", "services", "redis-cluster-up.sh")}, ports...)...)
	if dir := os.Getenv("FPDEDUP_SERVICES_DIR"); dir != "" {
		cmd.Env = append(os.Environ(), "SERVICES_DIR="+dir)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restarting the cluster: %v\n%s", err, out)
	}
}

// A master frozen (SIGSTOP) during --apply through cluster pipelines: the
// run stops with a clear error and a checkpoint whose keys are all online;
// the node thawed and the cluster whole again, the same command resumes and
// writes only what is still missing, each key once.
func TestRedisClusterNodeStoppedDuringApply(t *testing.T) {
	needKill(t)
	c := clusterClient(t)
	d := newDataset(t, 50_000)
	ctx := context.Background()
	for names := hexes(d.onlineKeys(), fpHex); len(names) > 0; {
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
	pid := nodePID(t, clusterSeeds(t)[2])
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	url := clusterURL(t, "match=dd:*")
	ckpt := filepath.Join(d.dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.index, "--online", url, "--apply", "--batch", "100", "--conns", "2",
		"--checkpoint", ckpt, "--timeout", "300ms", "--retries", "2"}
	done := make(chan result, 1)
	go func() { done <- fpdedup(t, d.dir, nil, append(args, "--rate", "2k", "--report", "a.json")...) }()
	if !waitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		t.Fatal("no checkpoint appeared")
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	r := <-done
	syscall.Kill(pid, syscall.SIGCONT)
	r.want(t, 2)
	if !strings.Contains(r.stderr, "writing to "+url+" failed") || !strings.Contains(r.stderr, "rerun the same command to resume") {
		t.Fatalf("unclear error: %s", r.stderr)
	}
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 || len(ck.Last) != 32 {
		t.Fatalf("checkpoint: %+v %v", ck, err)
	}
	if !waitFor(30*time.Second, func() bool {
		ok := true
		for _, s := range clusterSeeds(t) {
			n := nodeClient(s)
			info, err := n.ClusterInfo(ctx).Result()
			n.Close()
			ok = ok && err == nil && strings.Contains(info, "cluster_state:ok")
		}
		return ok
	}) {
		t.Fatal("the cluster did not come back to cluster_state:ok")
	}
	for _, fp := range d.missingFPs() {
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
	fpdedup(t, d.dir, nil, append(args, "--report", "b.json")...).want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "b.json"))
	if rep.Apply.Written != rep.Counts.OnlyOffline || rep.Apply.Written == 0 || ck.Written+rep.Apply.Written > 5_000 || rep.Missing != 0 {
		t.Fatalf("resume wrote %d of %d still missing (%d before)", rep.Apply.Written, rep.Counts.OnlyOffline, ck.Written)
	}
	if got := clusterCalls(t, c, "set") - sets; got != rep.Apply.Written {
		t.Fatalf("resume sent %d SETs for %d keys", got, rep.Apply.Written)
	}
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", url, "--report", "c.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "c.json")).Counts, 50_000, 0, 500)
}

// nodePID is the process id of the Redis server at addr (INFO server).
// nodeClient is a client of one cluster node by itself (no cluster
// routing), for asking it about itself.
func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
}

func nodePID(t *testing.T, addr string) int {
	t.Helper()
	node := nodeClient(addr)
	defer node.Close()
	info, err := node.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil && pid > 1 {
				return pid
			}
		}
	}
	t.Fatalf("no process_id for %s", addr)
	return 0
}
