package reconcile_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

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
	c := reconciletest.RedisDB(t, 7)
	d := reconciletest.NewDataset(t, 50_000)
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	tg, err := reconcile.ParseURL(reconciletest.RedisURL(t, 7, "match=dd:*"))
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	opts := reconcile.Options{Index: d.Index, Target: tg, Apply: true, Checkpoint: ckpt,
		Batch: 100, Conns: 2, Rate: 2000, TmpDir: d.Dir}
	sets := reconciletest.RedisCalls(t, c, "set")

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		if reconciletest.WaitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
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
	if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Last != ie.CheckpointLast || ck.Written != ie.Written {
		t.Fatalf("checkpoint %+v (%v), error says last %s, %d written", ck, err, ie.CheckpointLast, ie.Written)
	}
	for _, fp := range d.MissingFPs() {
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
	if as.MissingAgain != 0 || as.Written != rep.Counts.OnlyOffline || as.Written == 0 || rep.Missing != 0 || !as.CheckpointRemoved {
		t.Fatalf("resume: %+v, %d still missing", as, rep.Counts.OnlyOffline)
	}
	if got := reconciletest.RedisCalls(t, c, "set") - sets; got != 5_000 {
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
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 50_000)
	reconciletest.CreateTable(t, db, "rc_sigint", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_sigint", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	url := reconciletest.MySQLURL(t, "rc_sigint", "fp", "")
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--apply", "--batch", "100", "--conns", "2", "--checkpoint", ckpt}
	cmd := exec.Command(reconciletest.CLIBinary(t), append(args, "--rate", "2k", "--report", "a.json")...)
	cmd.Dir, cmd.Env = d.Dir, append(os.Environ(), reconciletest.MySQLEnv(t)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !reconciletest.WaitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
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
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 || ck.Written != rep.Apply.Written {
		t.Fatalf("checkpoint %+v (%v), report %+v", ck, err, rep.Apply)
	}
	if want := fmt.Sprintf("after writing %d keys to %s; rerun with --checkpoint %s to resume", ck.Written, url, ckpt); !strings.Contains(rep.Error, want) || rep.ExitCode != 130 {
		t.Fatalf("report: exit %d, error %q; want exit 130, an error saying %q", rep.ExitCode, rep.Error, want)
	}
	// The CLI says what was written online, never "nothing was published".
	if want := fmt.Sprintf("interrupted by SIGINT; --apply had written %d keys to %s; rerun with --checkpoint %s to resume", ck.Written, url, ckpt); !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "nothing was published") {
		t.Fatalf("stderr %q lacks %q", stderr.String(), want)
	}
	for _, fp := range d.MissingFPs() {
		if fp > ck.Last {
			break
		}
		var n int
		b, _ := hex.DecodeString(fp)
		if db.QueryRow("SELECT COUNT(*) FROM rc_sigint WHERE fp = ?", b).Scan(&n); n != 1 {
			t.Fatalf("checkpoint at %s, but %s is not in the table", ck.Last, fp)
		}
	}
	before := reconciletest.CountRows(t, db, "rc_sigint")
	reconciletest.Fpdedup(t, d.Dir, reconciletest.MySQLEnv(t), append(args, "--report", "b.json")...).Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json"))
	if rep.Apply.Written != 50_500-before || rep.Apply.Written != rep.Counts.OnlyOffline || rep.Apply.MissingAgain != 0 || rep.Missing != 0 {
		t.Fatalf("resume: %+v, %d still missing, %d rows before", rep.Apply, rep.Counts.OnlyOffline, before)
	}
	if n := reconciletest.CountRows(t, db, "rc_sigint"); n != 50_500 {
		t.Fatalf("%d rows, want 50500", n)
	}
}

// Cancelled anywhere but --apply's writes (here: the streamed read, and
// the probes), Run returns an error wrapping the cause and
// context.Canceled, not an ApplyInterruptedError (nothing was written
// online), and the report is no success. (The CLI's report of such a
// run, and its exit code, are TestInterruptedReportSaysTheSignal's.)
func TestCancelledBeforeApply(t *testing.T) {
	db := reconciletest.MySQLDB(t)
	c := reconciletest.RedisDB(t, 8)
	d := reconciletest.NewDataset(t, 50_000)
	reconciletest.CreateTable(t, db, "rc_cancel", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_cancel", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	for _, tc := range []struct {
		name, url string
		probe     bool
	}{
		{"mysql read", reconciletest.MySQLURL(t, "rc_cancel", "fp", ""), false},
		{"mysql probe", reconciletest.MySQLURL(t, "rc_cancel", "fp", ""), true},
		{"redis scan", reconciletest.RedisURL(t, 8, "match=dd:*&count=100"), false},
		{"redis probe", reconciletest.RedisURL(t, 8, "match=dd:*"), true},
	} {
		tg, err := reconcile.ParseURL(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		pw := ""
		if tg.Kind == reconcile.MySQL {
			pw = reconciletest.MySQLDSN(t).Passwd
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(700*time.Millisecond, func() { cancel(sigCause{"SIGTERM"}) })
		rep, err := reconcile.Run(ctx, reconcile.Options{Index: d.Index, Target: tg, Password: pw, Probe: tc.probe,
			Apply: true, ReadRate: 20_000, Batch: 500, TmpDir: d.Dir})
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
	db := reconciletest.MySQLDB(t)
	c := reconciletest.RedisDB(t, 9)
	d := reconciletest.NewDataset(t, 20_000)
	reconciletest.CreateTable(t, db, "rc_gone2", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_gone2", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(d.OnlineKeys(), reconciletest.FPHex))
	mysqlAddr := reconciletest.MySQLDSN(t).Addr
	for _, tc := range []struct {
		name    string
		target  string // the server's address
		trigger string // cut after a request holding this (go-redis lowercases commands)…
		after   int64  // …and this many bytes of its answers
		args    []string
		want    []string
	}{
		{"redis scan", reconciletest.RedisAddr(t), "scan", 32 << 10, []string{"--read-rate", "20k"}, []string{"reading ", "(after ", "rerun"}},
		{"redis probe", reconciletest.RedisAddr(t), "exists", 8 << 10, []string{"--probe", "--batch", "100", "--read-rate", "20k"}, []string{"probing ", " failed after ", " keys were answered (", "at most 2 per batch): ", "rerun"}},
		{"redis apply", reconciletest.RedisAddr(t), "NX", 2 << 10, []string{"--apply", "--batch", "50", "--rate", "5k"}, []string{"writing to ", "failed", "rerun the same command to resume"}},
		{"mysql probe", mysqlAddr, " IN (", 8 << 10, []string{"--probe", "--batch", "100", "--read-rate", "20k"}, []string{"probing ", " failed after ", " keys were answered (", "at most 2 per batch): ", "rerun"}},
		{"mysql apply", mysqlAddr, "INSERT IGNORE", 200, []string{"--apply", "--batch", "50", "--rate", "5k"}, []string{"writing to ", "failed", "rerun the same command to resume"}},
	} {
		p := reconciletest.NewTCPProxy(t, tc.target, tc.trigger, tc.after, 0)
		var url string
		env := reconciletest.MySQLEnv(t)
		if tc.target == mysqlAddr {
			url = reconciletest.MySQLProxyURL(t, p.Addr, "rc_gone2")
		} else {
			url = fmt.Sprintf("redis://%s/9?match=dd:*&count=100", p.Addr)
			env = nil
		}
		ckpt := filepath.Join(d.Dir, strings.ReplaceAll(tc.name, " ", "-")+".ckpt")
		args := []string{"reconcile", "--index", d.Index, "--online", url, "--retries", "2", "--timeout", "2s"}
		if slices.Contains(tc.args, "--apply") {
			args = append(args, "--checkpoint", ckpt, "--conns", "2")
		}
		r := reconciletest.Fpdedup(t, d.Dir, env, append(args, tc.args...)...)
		if !p.WasShut() {
			t.Fatalf("%s: the proxy never cut the connection; run: %d %s", tc.name, r.Code, r.Stderr)
		}
		if strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine ") {
			t.Fatalf("%s: a panic:\n%s", tc.name, r.Stderr)
		}
		r.Want(t, 2)
		t.Logf("%s: %s", tc.name, strings.TrimSpace(r.Stderr))
		for _, w := range append(tc.want, url) {
			if !strings.Contains(r.Stderr, w) {
				t.Fatalf("%s: the error lacks %q: %s", tc.name, w, r.Stderr)
			}
		}
		if !slices.Contains(tc.args, "--apply") {
			continue
		}
		var ck reconcile.Checkpoint
		if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 2_000 {
			t.Fatalf("%s: checkpoint %+v %v", tc.name, ck, err)
		}
		for _, fp := range d.MissingFPs() {
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
