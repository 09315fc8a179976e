package rediskeys_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func TestMain(m *testing.M) { reconciletest.Main(m, reconcile.QuietRedisLogs) }

// 100k truth keys, 10% missing online, 1% online only, as string keys
// PREFIX<32 hex>: exact counts, the report, the missing and extra indexes,
// the backfill records; then --apply, after which a second reconcile finds
// nothing missing (the extras remain: exit 1 still).
func TestRedisKeys(t *testing.T) {
	c := reconciletest.RedisDB(t, 1)
	d := reconciletest.NewDataset(t, 100_000)
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	// A key under the prefix that is no fingerprint, and one outside it.
	c.Set(context.Background(), "dd:not-a-fingerprint", 1, 0)
	c.Set(context.Background(), "other:"+reconciletest.FPHex(d.Keys[3]), 1, 0)
	url := reconciletest.RedisURL(t, 1, "match=dd:*")

	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url,
		"--report", "r.json", "--missing", "missing.fpx", "--extra", "extra.fpx",
		"--records", d.Records, "--backfill", "backfill.txt").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	if rep.Mode != "sort-merge-join" || rep.Online.Values != 91_001 || rep.Online.Bad != 1 || rep.Agree || rep.ExitCode != 1 {
		t.Fatalf("report: mode %s, values %d, bad %d, agree %v, exit %d", rep.Mode, rep.Online.Values, rep.Online.Bad, rep.Agree, rep.ExitCode)
	}
	if rep.Index.Hash != "sha256" || rep.Index.Fingerprints != 100_000 || rep.Online.Source != url {
		t.Fatalf("report index/online: %+v %+v", rep.Index, rep.Online)
	}
	if want := d.MissingFPs()[:20]; !slices.Equal(rep.Samples.OnlyOffline, want) {
		t.Fatalf("only-offline samples %v, want %v", rep.Samples.OnlyOffline, want)
	}
	if want := d.ExtraFPs()[:20]; !slices.Equal(rep.Samples.OnlyOnline, want) {
		t.Fatalf("only-online samples %v, want %v", rep.Samples.OnlyOnline, want)
	}
	if !strings.Contains(r.Stderr, "only offline (missing online) 10000") || !strings.Contains(r.Stderr, "1 online values are not fingerprints") {
		t.Fatalf("summary: %s", r.Stderr)
	}
	if got := reconciletest.Dump(t, d.Dir, "missing.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("missing.fpx: %d fingerprints, want %d", len(got), len(d.MissingFPs()))
	}
	if got := reconciletest.Dump(t, d.Dir, "extra.fpx"); !slices.Equal(got, d.ExtraFPs()) {
		t.Fatalf("extra.fpx: %d fingerprints, want %d", len(got), len(d.ExtraFPs()))
	}
	bf, err := os.ReadFile(filepath.Join(d.Dir, "backfill.txt"))
	if err != nil || string(bf) != d.MissingRecords() {
		t.Fatalf("backfill: %d bytes (%v), want %d", len(bf), err, len(d.MissingRecords()))
	}
	if rep.Records == nil || rep.Records.Written != 10_000 || rep.Records.Records != 100_000 {
		t.Fatalf("records: %+v", rep.Records)
	}

	// Nothing was written online by the audit.
	if n := c.DBSize(context.Background()).Val(); n != 91_002 {
		t.Fatalf("the audit changed Redis: %d keys", n)
	}

	// --dry-run prints the commands and writes nothing.
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "-q", "--index", d.Index, "--online", url, "--dry-run", "--ttl", "1h").Want(t, 1)
	lines := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
	if len(lines) != 10_000 || lines[0] != "SET dd:"+d.MissingFPs()[0]+" 1 EX 3600 NX" {
		t.Fatalf("dry run: %d lines, first %q", len(lines), lines[0])
	}
	if n := c.DBSize(context.Background()).Val(); n != 91_002 {
		t.Fatalf("--dry-run changed Redis: %d keys", n)
	}

	// --apply writes exactly the missing keys, with their TTL.
	sets := reconciletest.RedisCalls(t, c, "set")
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply", "--ttl", "1h",
		"--checkpoint", "apply.ckpt", "--report", "apply.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "apply.json"))
	if rep.Apply == nil || rep.Apply.Written != 10_000 || rep.Missing != 0 || !rep.Apply.CheckpointRemoved {
		t.Fatalf("apply report: %+v, missing after %d", rep.Apply, rep.Missing)
	}
	if got := reconciletest.RedisCalls(t, c, "set") - sets; got != 10_000 {
		t.Fatalf("%d SET commands for 10000 missing keys", got)
	}
	if ttl := c.TTL(context.Background(), "dd:"+d.MissingFPs()[0]).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of a written key: %v", ttl)
	}
	if _, err := os.Stat(filepath.Join(d.Dir, "apply.ckpt")); !os.IsNotExist(err) {
		t.Fatalf("checkpoint left after a complete apply: %v", err)
	}
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "after.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "after.json")).Counts, 100_000, 0, 1_000)
}

// Members of a set, probed with SMISMEMBER: the missing ones are found
// without listing the set; --apply SADDs them, and then the probe agrees
// (exit 0: a probe cannot see the extras).
func TestRedisSetProbe(t *testing.T) {
	c := reconciletest.RedisDB(t, 2)
	d := reconciletest.NewDataset(t, 20_000)
	reconciletest.LoadRedisSet(t, c, "seen", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	url := reconciletest.RedisURL(t, 2, "set=seen")

	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--probe", "--report", "p.json", "--missing", "m.fpx").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "p.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, -1)
	if rep.Mode != "probe" || rep.Online.Values != 20_000 {
		t.Fatalf("probe report: mode %s, probed %d", rep.Mode, rep.Online.Values)
	}
	if got := reconciletest.Dump(t, d.Dir, "m.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("m.fpx: %d fingerprints", len(got))
	}

	// The same set read whole by SSCAN sees the extras too.
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "s.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "s.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if rep.Online.Expected != 18_200 {
		t.Fatalf("SCARD %d", rep.Online.Expected)
	}

	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--probe", "--apply", "--batch", "500", "--conns", "3").Want(t, 0)
	if n := c.SCard(context.Background(), "seen").Val(); n != 20_200 {
		t.Fatalf("set holds %d after --apply, want 20200", n)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--probe").Want(t, 0)
}

// Keys named by whole SHA-256 digests (64 hex digits) are compared on their
// first 128 bits; --apply cannot make their names from a 128-bit index and
// says so, and with --records it writes the right names.
func TestRedisWholeDigests(t *testing.T) {
	reconciletest.PlainOnly(t, "a key format; the reads run under -race in TestRedisKeys")
	c := reconciletest.RedisDB(t, 3)
	d := reconciletest.NewDataset(t, 10_000)
	reconciletest.LoadRedisKeys(t, c, "sha:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FullHex))
	url := reconciletest.RedisURL(t, 3, "match=sha:*")

	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 9_000, 1_000, 100)
	if !rep.Online.Wide {
		t.Fatal("report does not say the names are whole digests")
	}
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 2)
	if !strings.Contains(r.Stderr, "--apply needs --records") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if n := c.DBSize(context.Background()).Val(); n != 9_100 {
		t.Fatalf("a refused --apply wrote: %d keys", n)
	}
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--probe")
	if r.Code != 2 || !strings.Contains(r.Stderr, "without --probe") {
		t.Fatalf("probe of whole digests: exit %d, %s", r.Code, r.Stderr)
	}

	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply", "--records", d.Records, "--report", "a.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	if rep.Apply.Written != 1_000 || rep.Apply.NotInRecords != 0 {
		t.Fatalf("apply: %+v", rep.Apply)
	}
	ctx := context.Background()
	for _, i := range d.Missing {
		if c.Exists(ctx, "sha:"+reconciletest.FullHex(d.Keys[i])).Val() != 1 {
			t.Fatalf("key of %q not written under its whole digest", d.Keys[i])
		}
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "b.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json")).Counts, 10_000, 0, 100)
}

// A password never shows: not from the environment or a file (a wrong one
// makes the server refuse us), not from a URL (refused before use); the
// right one from the environment works.
func TestRedisPasswordNeverPrinted(t *testing.T) {
	reconciletest.PlainOnly(t, "what is printed, not what runs at once")
	c := reconciletest.RedisDB(t, 4)
	ctx := context.Background()
	const user, secret = "fpdedup_test", "s3cret-Pa55-xyzzy"
	if err := c.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+secret, "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", user) })
	d := reconciletest.NewDataset(t, 100)
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	url := strings.Replace(reconciletest.RedisURL(t, 4, "match=dd:*"), "redis://", "redis://"+user+"@", 1)
	wrong := "wrong-" + secret
	r := reconciletest.Fpdedup(t, d.Dir, []string{"FPDEDUP_REDIS_PASSWORD=" + wrong}, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json").Want(t, 2)
	rep, _ := os.ReadFile(filepath.Join(d.Dir, "r.json"))
	if strings.Contains(r.Stderr+r.Stdout+string(rep), secret) {
		t.Fatalf("the password shows:\n%s\n%s", r.Stderr, rep)
	}
	if !strings.Contains(string(rep), `"error"`) || !strings.Contains(r.Stderr, url) || !strings.Contains(r.Stderr, "WRONGPASS") {
		t.Fatalf("no clear error: %s", r.Stderr)
	}
	pf := filepath.Join(d.Dir, "pw")
	os.WriteFile(pf, []byte(wrong+"\n"), 0o600)
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--password-file", pf).Want(t, 2)
	if strings.Contains(r.Stderr, secret) {
		t.Fatalf("the password shows: %s", r.Stderr)
	}
	withPw := strings.Replace(url, user+"@", user+":"+secret+"@", 1)
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", withPw).Want(t, 2)
	if strings.Contains(r.Stderr, secret) || !strings.Contains(r.Stderr, "FPDEDUP_REDIS_PASSWORD") {
		t.Fatalf("URL with a password: %s", r.Stderr)
	}
	r = reconciletest.Fpdedup(t, d.Dir, []string{"FPDEDUP_REDIS_PASSWORD=" + secret}, "reconcile", "--index", d.Index, "--online", url, "--report", "ok.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "ok.json")).Counts, 90, 10, 1)
	if b, _ := os.ReadFile(filepath.Join(d.Dir, "ok.json")); strings.Contains(string(b)+r.Stderr, secret) {
		t.Fatal("the password shows in a successful run")
	}
	// --apply's own connections authenticate as the user too.
	reconciletest.Fpdedup(t, d.Dir, []string{"FPDEDUP_REDIS_PASSWORD=" + secret}, "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 1)
	if n := c.DBSize(ctx).Val(); n != 101 {
		t.Fatalf("%d keys after --apply as %s, want 101", n, user)
	}
}

// Connections killed (CLIENT KILL) again and again while --apply writes:
// the client redials and our retries go on; the result is exact. The kills
// come every 150 ms and a batch may be retried 8 times: with kills every
// 50 ms and the default 5 retries, one CI run on a loaded machine saw a
// batch killed on all six attempts (exit 2), which tests the machine's
// timing, not the retries.
func TestRedisClientKillDuringApply(t *testing.T) {
	reconciletest.NeedKill(t) // CLIENT KILL hits every client of the server
	c := reconciletest.RedisDB(t, 5)
	d := reconciletest.NewDataset(t, 50_000)
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	url := reconciletest.RedisURL(t, 5, "match=dd:*")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killed := make(chan int, 1)
	go func() {
		n := 0
		for ctx.Err() == nil {
			time.Sleep(150 * time.Millisecond)
			k, _ := c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Int()
			n += k
		}
		killed <- n
	}()
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--apply", "--rate", "10k", "--batch", "200",
		"--retries", "8", "--report", "a.json").Want(t, 1)
	cancel()
	if n := <-killed; n == 0 {
		t.Fatal("no connection was killed during the run")
	}
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	if rep.Apply.Written != 5_000 {
		t.Fatalf("apply: %+v", rep.Apply)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "b.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json")).Counts, 50_000, 0, 500)
}

// A frozen server (SIGSTOP) during --apply: after its retries the run
// stops with a clear error and a checkpoint naming the last key written;
// the server back (SIGCONT), the same command resumes and writes only what
// is still missing, each key once.
func TestRedisServerStoppedDuringApply(t *testing.T) {
	reconciletest.NeedKill(t)
	c := reconciletest.RedisDB(t, 6)
	d := reconciletest.NewDataset(t, 50_000)
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	url := reconciletest.RedisURL(t, 6, "match=dd:*")
	pid, err := strconv.Atoi(strings.TrimSpace(infoField(t, c, "process_id")))
	if err != nil || pid <= 1 {
		t.Fatalf("redis pid: %v", err)
	}
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--apply", "--batch", "100", "--conns", "2",
		"--checkpoint", ckpt, "--timeout", "300ms", "--retries", "2"}

	done := make(chan reconciletest.Result, 1)
	go func() {
		done <- reconciletest.Fpdedup(t, d.Dir, nil, append(args, "--rate", "2k", "--report", "a.json")...)
	}()
	// Freeze the server once the run has checkpointed some progress.
	if !reconciletest.WaitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		t.Fatal("no checkpoint appeared")
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	r := <-done
	syscall.Kill(pid, syscall.SIGCONT)
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "at most 2 per batch") || !strings.Contains(r.Stderr, "rerun the same command to resume") {
		t.Fatalf("unclear error: %s", r.Stderr)
	}
	var ck reconcile.Checkpoint
	b, _ := os.ReadFile(ckpt)
	if err := json.Unmarshal(b, &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 || len(ck.Last) != 32 {
		t.Fatalf("checkpoint %s: %v", b, err)
	}
	// Everything up to the checkpoint is online.
	missing := d.MissingFPs()
	for _, fp := range missing {
		if fp > ck.Last {
			break
		}
		if c.Exists(context.Background(), "dd:"+fp).Val() != 1 {
			t.Fatalf("checkpoint at %s but %s is not online", ck.Last, fp)
		}
	}

	// Pipelines sent to the frozen server sit in its sockets and run when
	// it wakes up (harmless: SET NX); let them land before counting.
	sets := reconciletest.RedisCalls(t, c, "set")
	for {
		time.Sleep(300 * time.Millisecond)
		n := reconciletest.RedisCalls(t, c, "set")
		if n == sets {
			break
		}
		sets = n
	}
	reconciletest.Fpdedup(t, d.Dir, nil, append(args, "--report", "b.json")...).Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json"))
	if rep.Apply.Written != rep.Counts.OnlyOffline || rep.Apply.Written == 0 || ck.Written+rep.Apply.Written > 5_000 {
		t.Fatalf("resume wrote %d of %d still missing (%d before)", rep.Apply.Written, rep.Counts.OnlyOffline, ck.Written)
	}
	if got := reconciletest.RedisCalls(t, c, "set") - sets; got != rep.Apply.Written {
		t.Fatalf("resume sent %d SETs for %d keys", got, rep.Apply.Written)
	}
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "c.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "c.json")).Counts, 50_000, 0, 500)
}

func infoField(t *testing.T, c *redis.Client, field string) string {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("INFO has no %s", field)
	return ""
}

// TestRedisApplyRefused: a user without write commands runs --apply.
// The server answers NOPERM, which a rerun would meet again: the run says
// the write was refused and advises no rerun.
func TestRedisApplyRefused(t *testing.T) {
	reconciletest.PlainOnly(t, "what a refusal says; the apply runs under -race in the apply tests")
	c := reconciletest.RedisDB(t, 4)
	ctx := context.Background()
	const user, secret = "fpdedup_reader", "r3ader-Pa55"
	if err := c.Do(ctx, "ACL", "SETUSER", user, "reset", "on", ">"+secret, "~*", "+@all", "-@write").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Do(context.Background(), "ACL", "DELUSER", user) })
	d := reconciletest.NewDataset(t, 100)
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	url := strings.Replace(reconciletest.RedisURL(t, 4, "match=dd:*"), "redis://", "redis://"+user+"@", 1)
	r := reconciletest.Fpdedup(t, d.Dir, []string{"FPDEDUP_REDIS_PASSWORD=" + secret}, "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 2)
	if !strings.Contains(r.Stderr, "was refused") || !strings.Contains(r.Stderr, "NOPERM") || strings.Contains(r.Stderr, "rerun") {
		t.Fatalf("a write refused for good: %s", r.Stderr)
	}
	if n := c.DBSize(ctx).Val(); n != int64(len(d.OnlineKeys())) {
		t.Fatalf("%d keys after a refused --apply, want %d", n, len(d.OnlineKeys()))
	}
}
