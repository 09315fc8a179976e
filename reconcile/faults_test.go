package reconcile_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile"
)

// mysqlProxyURL is the --online URL of table.fp reached through addr.
func mysqlProxyURL(t *testing.T, addr, table string) string {
	cfg := mysqlDSN(t)
	return fmt.Sprintf("mysql://%s@%s/%s?table=%s&column=fp", cfg.User, addr, cfg.DBName, table)
}

// The server gone for good in the middle of the streamed SELECT … ORDER BY
// (the proxy in front of it shuts: connections reset, reconnects refused):
// after its retries the run ends with a clear error naming the rows read
// and the retries, exit 2, never a panic and never a short success.
// Before the fix, a failed reconnect left a nil *sql.Conn that the next
// attempt used: a nil pointer panic with --retries 1 or more.
func TestMySQLServerGoneDuringRead(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 100_000)
	createTable(t, db, "rc_gone", "BINARY(16)")
	loadRows(t, db, "rc_gone", rowValues(d.onlineKeys(), bin16))
	env := mysqlEnv(t)
	for _, retries := range []int{2, 0} {
		// 64 KiB of a result of ~2 MB: the stream is cut in its middle.
		p := newTCPProxy(t, mysqlDSN(t).Addr, "ORDER BY", 64<<10, 0)
		url := mysqlProxyURL(t, p.addr, "rc_gone")
		rname := fmt.Sprintf("gone%d.json", retries)
		r := fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url,
			"--retries", fmt.Sprint(retries), "--report", rname)
		if !p.wasShut() {
			t.Fatalf("retries %d: the proxy never cut the stream; run: %d %s", retries, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
			t.Fatalf("retries %d: a panic:\n%s", retries, r.stderr)
		}
		r.want(t, 2)
		want := fmt.Sprintf("and %d retries: ", retries)
		if !strings.Contains(r.stderr, "reading "+url+" failed after ") || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "rerun") {
			t.Fatalf("retries %d: unclear error: %s", retries, r.stderr)
		}
		if retries > 0 && !strings.Contains(r.stderr, "connection refused") {
			t.Fatalf("retries %d: the error does not say why the reconnects failed: %s", retries, r.stderr)
		}
		rep := readReport(t, filepath.Join(d.dir, rname))
		if rep.ExitCode != 2 || rep.Agree || rep.Error == "" || rep.Online.Retries != retries {
			t.Fatalf("retries %d: report: exit %d, agree %v, retries %d, error %q", retries, rep.ExitCode, rep.Agree, rep.Online.Retries, rep.Error)
		}
		if rep.Online.Values <= 0 || rep.Online.Values >= 91_000 {
			t.Fatalf("retries %d: %d rows read: the stream was not cut in its middle", retries, rep.Online.Values)
		}
	}
}

// The server gone in the middle of the stream and back a while later: the
// first reconnect is refused, a later one works, and the read resumes
// after the last value on the new connection, with exact counts. (In
// process, to set the backoff: the proxy listens again between the first
// reconnect, 1 s after the cut, and the second, 2 s after that.)
func TestMySQLReadResumesAfterRefusedReconnect(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 100_000)
	createTable(t, db, "rc_back", "BINARY(16)")
	loadRows(t, db, "rc_back", rowValues(d.onlineKeys(), bin16))
	p := newTCPProxy(t, mysqlDSN(t).Addr, "ORDER BY", 64<<10, 2*time.Second)
	tg, err := reconcile.ParseURL(mysqlProxyURL(t, p.addr, "rc_back"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Run(context.Background(), reconcile.Options{
		Index: d.index, Target: tg, Password: mysqlDSN(t).Passwd,
		Retries: 4, Backoff: time.Second, Timeout: 5 * time.Second, TmpDir: d.dir,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	select {
	case <-p.opened:
	default:
		t.Fatal("the proxy never listened again")
	}
	wantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	// Retries: the stream cut, then the refused reconnect.
	if rep.Online.Retries < 2 || rep.Online.CountChecked || rep.Online.Note == "" || rep.Online.Distinct != 91_000 {
		t.Fatalf("after a refused reconnect and a resumed read: %+v", rep.Online)
	}
}

// sigCause stands for the CLI's signal cause of a cancelled context.
type sigCause struct{ sig string }

func (s sigCause) Error() string { return "interrupted by " + s.sig }

// --apply cancelled through its context (as SIGINT/SIGTERM do in the CLI)
// while keys are being written to Redis: Run returns an
// *ApplyInterruptedError saying how many keys were written, to where, and
// the checkpoint saved at that point, wrapping the cause and
// context.Canceled. Every key up to the checkpoint is online; the rerun
// skips nothing it should write and writes the rest, so that over both
// runs each missing key got exactly one SET.
func TestRedisApplyCancelled(t *testing.T) {
	c := redisDB(t, 7)
	d := newDataset(t, 50_000)
	loadRedisKeys(t, c, "dd:", hexes(d.onlineKeys(), fpHex))
	tg, err := reconcile.ParseURL(redisURL(t, 7, "match=dd:*"))
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(d.dir, "apply.ckpt")
	opts := reconcile.Options{Index: d.index, Target: tg, Apply: true, Checkpoint: ckpt,
		Batch: 100, Conns: 2, Rate: 2000, TmpDir: d.dir}
	sets := redisCalls(t, c, "set")

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		if waitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
			time.Sleep(500 * time.Millisecond)
		}
		cancel(sigCause{"SIGINT"})
	}()
	rep, err := reconcile.Run(ctx, opts)
	var ie *reconcile.ApplyInterruptedError
	var sig sigCause
	if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || !errors.As(err, &sig) || sig.sig != "SIGINT" {
		t.Fatalf("cancelled apply returned %T %v", err, err)
	}
	if ie.Written <= 0 || ie.Written >= 5_000 || ie.Written != rep.Apply.Written || ie.Target != tg.Redacted ||
		ie.Checkpoint != ckpt || !ie.CheckpointSaved || ie.CheckpointErr != nil || len(ie.CheckpointLast) != 32 {
		t.Fatalf("ApplyInterruptedError %+v (report: %+v)", ie, rep.Apply)
	}
	want := fmt.Sprintf("after writing %d keys to %s; rerun with the checkpoint %s to resume", ie.Written, tg.Redacted, ckpt)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
	if rep.Agree {
		t.Fatal("report after the interruption: the sides agree")
	}
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(must(os.ReadFile(ckpt)), &ck); err != nil || ck.Last != ie.CheckpointLast || ck.Written != ie.Written {
		t.Fatalf("checkpoint %+v (%v), error says last %s, %d written", ck, err, ie.CheckpointLast, ie.Written)
	}
	for _, fp := range d.missingFPs() {
		if fp > ck.Last {
			break
		}
		if c.Exists(context.Background(), "dd:"+fp).Val() != 1 {
			t.Fatalf("checkpoint at %s but %s is not online", ck.Last, fp)
		}
	}

	rep, err = reconcile.Run(context.Background(), opts)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	as := rep.Apply
	if as.SkippedCheckpoint != 0 || as.Written != rep.Counts.OnlyOffline || as.Written == 0 || rep.Missing != 0 || !as.CheckpointRemoved {
		t.Fatalf("resume: %+v, %d still missing", as, rep.Counts.OnlyOffline)
	}
	if got := redisCalls(t, c, "set") - sets; got != 5_000 {
		t.Fatalf("%d SETs over the interrupted run and its resume, for 5000 missing keys", got)
	}
	if _, err := os.Stat(ckpt); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint left after the resume: %v", err)
	}
}

// SIGINT to the CLI while --apply writes to MariaDB: exit 130, the report
// says exit 130 too and names the keys written and the checkpoint; the
// same command resumes and the table ends up with every key.
func TestMySQLApplyInterruptedBySIGINT(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 50_000)
	createTable(t, db, "rc_sigint", "BINARY(16)")
	loadRows(t, db, "rc_sigint", rowValues(d.onlineKeys(), bin16))
	url := mysqlURL(t, "rc_sigint", "fp", "")
	ckpt := filepath.Join(d.dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.index, "--online", url, "--apply", "--batch", "100", "--conns", "2", "--checkpoint", ckpt}
	cmd := exec.Command(cliBinary(t), append(args, "--rate", "2k", "--report", "a.json")...)
	cmd.Dir, cmd.Env = d.dir, append(os.Environ(), mysqlEnv(t)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("no checkpoint appeared")
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("after SIGINT: %v, want exit 130\n%s", err, stderr.String())
	}
	rep := readReport(t, filepath.Join(d.dir, "a.json"))
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 || ck.Written != rep.Apply.Written {
		t.Fatalf("checkpoint %+v (%v), report %+v", ck, err, rep.Apply)
	}
	if want := fmt.Sprintf("after writing %d keys to %s; rerun with --checkpoint %s to resume", ck.Written, url, ckpt); !strings.Contains(rep.Error, want) || rep.ExitCode != 130 {
		t.Fatalf("report: exit %d, error %q; want exit 130, an error saying %q", rep.ExitCode, rep.Error, want)
	}
	// The CLI says what was written online, never "nothing was published".
	if want := fmt.Sprintf("interrupted by SIGINT; --apply had written %d keys to %s; rerun with --checkpoint %s to resume", ck.Written, url, ckpt); !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "nothing was published") {
		t.Fatalf("stderr %q lacks %q", stderr.String(), want)
	}
	for _, fp := range d.missingFPs() {
		if fp > ck.Last {
			break
		}
		var n int
		b, _ := hex.DecodeString(fp)
		if db.QueryRow("SELECT COUNT(*) FROM rc_sigint WHERE fp = ?", b).Scan(&n); n != 1 {
			t.Fatalf("checkpoint at %s, but %s is not in the table", ck.Last, fp)
		}
	}
	before := countRows(t, db, "rc_sigint")
	fpdedup(t, d.dir, mysqlEnv(t), append(args, "--report", "b.json")...).want(t, 1)
	rep = readReport(t, filepath.Join(d.dir, "b.json"))
	if rep.Apply.Written != 50_500-before || rep.Apply.Written != rep.Counts.OnlyOffline || rep.Apply.SkippedCheckpoint != 0 || rep.Missing != 0 {
		t.Fatalf("resume: %+v, %d still missing, %d rows before", rep.Apply, rep.Counts.OnlyOffline, before)
	}
	if n := countRows(t, db, "rc_sigint"); n != 50_500 {
		t.Fatalf("%d rows, want 50500", n)
	}
}

// Cancelled anywhere but --apply's writes (here: the streamed read, and
// the probes), Run returns an error wrapping the cause and
// context.Canceled, not an ApplyInterruptedError (nothing was written
// online), and the report is no success. (The CLI's report of such a
// run, and its exit code, are TestInterruptedReportSaysTheSignal's.)
func TestCancelledBeforeApply(t *testing.T) {
	db := mysqlDB(t)
	c := redisDB(t, 8)
	d := newDataset(t, 50_000)
	createTable(t, db, "rc_cancel", "BINARY(16)")
	loadRows(t, db, "rc_cancel", rowValues(d.onlineKeys(), bin16))
	loadRedisKeys(t, c, "dd:", hexes(d.onlineKeys(), fpHex))
	for _, tc := range []struct {
		name, url string
		probe     bool
	}{
		{"mysql read", mysqlURL(t, "rc_cancel", "fp", ""), false},
		{"mysql probe", mysqlURL(t, "rc_cancel", "fp", ""), true},
		{"redis scan", redisURL(t, 8, "match=dd:*&count=100"), false},
		{"redis probe", redisURL(t, 8, "match=dd:*"), true},
	} {
		tg, err := reconcile.ParseURL(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		pw := ""
		if tg.Kind == reconcile.MySQL {
			pw = mysqlDSN(t).Passwd
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(700*time.Millisecond, func() { cancel(sigCause{"SIGTERM"}) })
		rep, err := reconcile.Run(ctx, reconcile.Options{Index: d.index, Target: tg, Password: pw, Probe: tc.probe,
			Apply: true, ReadRate: 20_000, Batch: 500, TmpDir: d.dir})
		cancel(nil)
		var ie *reconcile.ApplyInterruptedError
		var sig sigCause
		if err == nil || !errors.Is(err, context.Canceled) || !errors.As(err, &sig) || errors.As(err, &ie) {
			t.Fatalf("%s: cancelled run returned %T %v", tc.name, err, err)
		}
		if rep.Agree || rep.Apply != nil || rep.Online.Values >= 50_000 {
			t.Fatalf("%s: report after the cancel: agree %v, apply %+v, %d values", tc.name, rep.Agree, rep.Apply, rep.Online.Values)
		}
	}
}

// The server gone for good (the proxy shuts: connections reset, redials
// refused) in the middle of each other retry loop: the Redis SCAN, the
// probes (EXISTS pipelines, WHERE … IN) and --apply's writes (RESP
// pipelines of SET NX, INSERT IGNORE). Each ends after its retries with
// a clear error naming the target, exit 2: no panic, no short success;
// an --apply leaves a checkpoint whose keys are all online.
func TestServerGoneMidRun(t *testing.T) {
	db := mysqlDB(t)
	c := redisDB(t, 9)
	d := newDataset(t, 20_000)
	createTable(t, db, "rc_gone2", "BINARY(16)")
	loadRows(t, db, "rc_gone2", rowValues(d.onlineKeys(), bin16))
	loadRedisKeys(t, c, "dd:", hexes(d.onlineKeys(), fpHex))
	mysqlAddr := mysqlDSN(t).Addr
	for _, tc := range []struct {
		name    string
		target  string // the server's address
		trigger string // cut after a request holding this (go-redis lowercases commands)…
		after   int64  // …and this many bytes of its answers
		args    []string
		want    []string
	}{
		{"redis scan", redisAddr(t), "scan", 32 << 10, []string{"--read-rate", "20k"}, []string{"reading ", "(after ", "rerun"}},
		{"redis probe", redisAddr(t), "exists", 8 << 10, []string{"--probe", "--batch", "100", "--read-rate", "20k"}, []string{"probing ", " failed after ", " keys were answered (", "at most 2 per batch): ", "rerun"}},
		{"redis apply", redisAddr(t), "NX", 2 << 10, []string{"--apply", "--batch", "50", "--rate", "5k"}, []string{"writing to ", "failed", "rerun the same command to resume"}},
		{"mysql probe", mysqlAddr, " IN (", 8 << 10, []string{"--probe", "--batch", "100", "--read-rate", "20k"}, []string{"probing ", " failed after ", " keys were answered (", "at most 2 per batch): ", "rerun"}},
		{"mysql apply", mysqlAddr, "INSERT IGNORE", 200, []string{"--apply", "--batch", "50", "--rate", "5k"}, []string{"writing to ", "failed", "rerun the same command to resume"}},
	} {
		p := newTCPProxy(t, tc.target, tc.trigger, tc.after, 0)
		var url string
		env := mysqlEnv(t)
		if tc.target == mysqlAddr {
			url = mysqlProxyURL(t, p.addr, "rc_gone2")
		} else {
			url = fmt.Sprintf("redis://%s/9?match=dd:*&count=100", p.addr)
			env = nil
		}
		ckpt := filepath.Join(d.dir, strings.ReplaceAll(tc.name, " ", "-")+".ckpt")
		args := []string{"reconcile", "--index", d.index, "--online", url, "--retries", "2", "--timeout", "2s"}
		if slices.Contains(tc.args, "--apply") {
			args = append(args, "--checkpoint", ckpt, "--conns", "2")
		}
		r := fpdedup(t, d.dir, env, append(args, tc.args...)...)
		if !p.wasShut() {
			t.Fatalf("%s: the proxy never cut the connection; run: %d %s", tc.name, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
			t.Fatalf("%s: a panic:\n%s", tc.name, r.stderr)
		}
		r.want(t, 2)
		t.Logf("%s: %s", tc.name, strings.TrimSpace(r.stderr))
		for _, w := range append(tc.want, url) {
			if !strings.Contains(r.stderr, w) {
				t.Fatalf("%s: the error lacks %q: %s", tc.name, w, r.stderr)
			}
		}
		if !slices.Contains(tc.args, "--apply") {
			continue
		}
		var ck reconcile.Checkpoint
		if err := json.Unmarshal(must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 2_000 {
			t.Fatalf("%s: checkpoint %+v %v", tc.name, ck, err)
		}
		for _, fp := range d.missingFPs() {
			if fp > ck.Last {
				break
			}
			var n int
			if tc.target == mysqlAddr {
				b, _ := hex.DecodeString(fp)
				db.QueryRow("SELECT COUNT(*) FROM rc_gone2 WHERE fp = ?", b).Scan(&n)
			} else {
				n = int(c.Exists(context.Background(), "dd:"+fp).Val())
			}
			if n != 1 {
				t.Fatalf("%s: checkpoint at %s, but %s is not online", tc.name, ck.Last, fp)
			}
		}
	}
}

// The issue as reported: mariadbd killed (SIGKILL) in the middle of the
// streamed SELECT … ORDER BY, with --retries 2. The reconnects are refused
// until the server is back, so the run ends with the clear error, exit 2
// (it panicked on a nil *sql.Conn); restarted, the same command reads it
// all with exact counts.
func TestMySQLServerKilledDuringRead(t *testing.T) {
	needKill(t)
	db := mysqlDB(t)
	d := newDataset(t, 100_000)
	createTable(t, db, "rc_killread", "BINARY(16)")
	loadRows(t, db, "rc_killread", rowValues(d.onlineKeys(), bin16))
	env := mysqlEnv(t)
	pid := mariadbPID(t, db)
	online := d.onlineKeys()
	slices.SortFunc(online, func(a, b string) int { return strings.Compare(fpHex(a), fpHex(b)) })
	// The server pauses half a second in the middle of the stream: the
	// kill lands while rows are flowing.
	url := mysqlURL(t, "rc_killread", "fp", "where="+urlEscape(fmt.Sprintf("IF(fp = x'%s', SLEEP(0.5), 0) = 0", fpHex(online[len(online)/2]))))
	done := make(chan result, 1)
	go func() {
		done <- fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--retries", "2", "--report", "k.json")
	}()
	started := waitFor(30*time.Second, func() bool {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "SELECT `fp` FROM `rc_killread`%ORDER BY%").Scan(&n)
		return n > 0
	})
	if !started {
		t.Fatalf("the streamed SELECT never showed; run: %+v", <-done)
	}
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	r := <-done
	restartMariaDB(t, db)
	if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("a panic:\n%s", r.stderr)
	}
	r.want(t, 2)
	t.Logf("%s", strings.TrimSpace(r.stderr))
	if !strings.Contains(r.stderr, "reading "+url+" failed after ") || !strings.Contains(r.stderr, "and 2 retries: ") {
		t.Fatalf("unclear error: %s", r.stderr)
	}
	rep := readReport(t, filepath.Join(d.dir, "k.json"))
	if rep.ExitCode != 2 || rep.Agree || rep.Online.Retries != 2 || rep.Online.Values >= 91_000 {
		t.Fatalf("report: exit %d, agree %v, %+v", rep.ExitCode, rep.Agree, rep.Online)
	}
	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--report", "r.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "r.json")).Counts, 90_000, 10_000, 1_000)
}

// mariadbPID is the server's process id, from its pid file.
func mariadbPID(t *testing.T, db *sql.DB) int {
	t.Helper()
	var pidFile string
	if err := db.QueryRow("SELECT @@pid_file").Scan(&pidFile); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(must(os.ReadFile(pidFile)))))
	if err != nil || pid <= 1 {
		t.Fatalf("mariadb pid file %s: %v", pidFile, err)
	}
	return pid
}
