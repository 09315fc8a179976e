package mysqltable_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func TestMain(m *testing.M) { reconciletest.Main(m, reconcile.QuietRedisLogs) }

// A BINARY(16) column, read by one streamed SELECT … ORDER BY and
// merge-joined: exact counts, a COUNT(*) in the same snapshot, the outputs;
// then --dry-run, --apply (multi-row INSERT IGNORE on several connections)
// and a second reconcile that finds nothing missing.
func TestMySQLBinary16(t *testing.T) {
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 100_000)
	reconciletest.CreateTable(t, db, "rc_bin16", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_bin16", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	url := reconciletest.MySQLURL(t, "rc_bin16", "fp", "")
	env := reconciletest.MySQLEnv(t)

	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json",
		"--missing", "missing.fpx", "--extra", "extra.fpx", "--records", d.Records, "--backfill", "backfill.txt").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	if rep.Mode != "merge-join" || rep.Online.Values != 91_000 || !rep.Online.CountChecked || rep.Online.Expected != 91_000 || rep.Online.Wide {
		t.Fatalf("report online: mode %s %+v", rep.Mode, rep.Online)
	}
	if pw := reconciletest.MySQLDSN(t).Passwd; len(pw) > 0 && strings.Contains(string(reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "r.json")))), pw) {
		t.Fatal("the report holds the password")
	}
	if got := reconciletest.Dump(t, d.Dir, "missing.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("missing.fpx: %d fingerprints", len(got))
	}
	if got := reconciletest.Dump(t, d.Dir, "extra.fpx"); !slices.Equal(got, d.ExtraFPs()) {
		t.Fatalf("extra.fpx: %d fingerprints", len(got))
	}
	if bf := reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "backfill.txt"))); string(bf) != d.MissingRecords() {
		t.Fatalf("backfill: %d bytes, want %d", len(bf), len(d.MissingRecords()))
	}

	r := reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "-q", "--index", d.Index, "--online", url, "--dry-run").Want(t, 1)
	if first := strings.SplitN(r.Stdout, "\n", 2)[0]; first != "INSERT IGNORE INTO `rc_bin16` (`fp`) VALUES (x'"+d.MissingFPs()[0]+"');" {
		t.Fatalf("dry run: %q", first)
	}
	if n := reconciletest.CountRows(t, db, "rc_bin16"); n != 91_000 {
		t.Fatalf("--dry-run wrote: %d rows", n)
	}

	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--apply", "--conns", "4", "--report", "a.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	if rep.Apply.Written != 10_000 || rep.Apply.Batches != 10 || rep.Missing != 0 {
		t.Fatalf("apply: %+v", rep.Apply)
	}
	if n := reconciletest.CountRows(t, db, "rc_bin16"); n != 101_000 {
		t.Fatalf("%d rows after --apply, want 101000", n)
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--report", "b.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json")).Counts, 100_000, 0, 1_000)
	// The probe sees no difference now (it cannot see the extras).
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--probe", "--report", "p.json").Want(t, 0)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "p.json")).Counts, 100_000, 0, -1)
}

// A slice: a partitioned index (build --partition 0/2) against a WHERE on
// the same half; and without the WHERE, the other half is set aside as
// outside the index's range, not reported as unknown.
func TestMySQLSlice(t *testing.T) {
	reconciletest.PlainOnly(t, "a slice of the index; the reads run under -race in TestMySQLBinary16")
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 20_000)
	reconciletest.CreateTable(t, db, "rc_slice", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_slice", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	half := filepath.Join(d.Dir, "half.fpx")
	reconciletest.Fpdedup(t, d.Dir, nil, "build", "-q", "--hash", "sha256", "--partition", "0/2", "-o", half, d.Records).Want(t, 0)
	var both, missing, extra, outside int64
	for _, i := range d.Online {
		if reconciletest.FPHex(d.Keys[i]) < "8" {
			both++
		} else {
			outside++
		}
	}
	for _, i := range d.Missing {
		if reconciletest.FPHex(d.Keys[i]) < "8" {
			missing++
		}
	}
	for _, k := range d.Extras {
		if reconciletest.FPHex(k) < "8" {
			extra++
		} else {
			outside++
		}
	}
	env := reconciletest.MySQLEnv(t)
	// (A '?' in the WHERE must stay a '?': values are inlined, not bound.)
	url := reconciletest.MySQLURL(t, "rc_slice", "fp", "where="+reconciletest.URLEscape("fp < x'80000000000000000000000000000000' AND 'a?b' <> ''"))
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", half, "--online", url, "--report", "w.json").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "w.json"))
	reconciletest.WantCounts(t, rep.Counts, both, missing, extra)
	if rep.Online.OutsideRange != 0 || rep.Online.Expected != both+extra {
		t.Fatalf("with where: %+v", rep.Online)
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", half, "--online", url, "--probe", "--report", "wp.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "wp.json")).Counts, both, missing, -1)
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", half, "--online", reconciletest.MySQLURL(t, "rc_slice", "fp", ""), "--report", "all.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "all.json"))
	reconciletest.WantCounts(t, rep.Counts, both, missing, extra)
	if rep.Online.OutsideRange != outside {
		t.Fatalf("outside the range: %d, want %d", rep.Online.OutsideRange, outside)
	}
}

// CHAR(64): whole SHA-256 digests in hex. Compared on 128 bits; --apply
// needs --records and says so before reading anything; the probe uses one
// index range per fingerprint; --apply with --records inserts the digests.
func TestMySQLChar64(t *testing.T) {
	reconciletest.PlainOnly(t, "a column kind; the reads and writes run under -race in TestMySQLBinary16")
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 20_000)
	reconciletest.CreateTable(t, db, "rc_char64", "CHAR(64) CHARACTER SET ascii")
	reconciletest.LoadRows(t, db, "rc_char64", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Hex64))
	url := reconciletest.MySQLURL(t, "rc_char64", "fp", "")
	env := reconciletest.MySQLEnv(t)

	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json").Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if !rep.Online.Wide {
		t.Fatal("whole digests not recognised")
	}
	r := reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 2)
	if !strings.Contains(r.Stderr, "--apply needs --records") || !strings.Contains(r.Stderr, "32-byte") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--probe", "--report", "p.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "p.json")).Counts, 18_000, 2_000, -1)

	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--apply", "--records", d.Records, "--report", "a.json").Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	if rep.Apply.Written != 2_000 || rep.Apply.NotInRecords != 0 || rep.Records.Digests != 2_000 {
		t.Fatalf("apply %+v, records %+v", rep.Apply, rep.Records)
	}
	for _, i := range d.Missing[:50] {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM rc_char64 WHERE fp = ?", reconciletest.FullHex(d.Keys[i])).Scan(&n); err != nil || n != 1 {
			t.Fatalf("digest of %q not inserted (%v)", d.Keys[i], err)
		}
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--probe").Want(t, 0)
}

// BINARY(32) and CHAR(32) work alike; a CHAR column whose hex is mixed-case
// under a binary collation is not in fingerprint order: an error, never a
// wrong count.
func TestMySQLColumnKinds(t *testing.T) {
	reconciletest.PlainOnly(t, "column kinds; the reads run under -race in TestMySQLBinary16")
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 5_000)
	env := reconciletest.MySQLEnv(t)
	for _, c := range []struct {
		table, typ string
		f          func(string) any
	}{
		{"rc_bin32", "BINARY(32)", reconciletest.Bin32},
		{"rc_char32", "CHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", reconciletest.Hex32},
	} {
		reconciletest.CreateTable(t, db, c.table, c.typ)
		reconciletest.LoadRows(t, db, c.table, reconciletest.RowValues(d.OnlineKeys(), c.f))
		reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", reconciletest.MySQLURL(t, c.table, "fp", ""), "--report", c.table+".json").Want(t, 1)
		reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, c.table+".json")).Counts, 4_500, 500, 50)
		reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", reconciletest.MySQLURL(t, c.table, "fp", ""), "--probe", "--report", c.table+"-p.json").Want(t, 1)
		reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, c.table+"-p.json")).Counts, 4_500, 500, -1)
	}

	reconciletest.CreateTable(t, db, "rc_mixed", "CHAR(32) CHARACTER SET ascii COLLATE ascii_bin")
	vals := reconciletest.RowValues(d.OnlineKeys(), reconciletest.Hex32)
	for i := 0; i < len(vals); i += 7 {
		vals[i] = strings.ToUpper(vals[i].(string))
	}
	reconciletest.LoadRows(t, db, "rc_mixed", vals)
	r := reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", reconciletest.MySQLURL(t, "rc_mixed", "fp", "")).Want(t, 2)
	if !strings.Contains(r.Stderr, "not in fingerprint order") {
		t.Fatalf("stderr: %s", r.Stderr)
	}

	reconciletest.CreateTable(t, db, "rc_int", "BIGINT")
	r = reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", reconciletest.MySQLURL(t, "rc_int", "fp", "")).Want(t, 2)
	if !strings.Contains(r.Stderr, "want BINARY(16), BINARY(32), CHAR(32) or CHAR(64)") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	r = reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", reconciletest.MySQLURL(t, "rc_no_such_table", "fp", "")).Want(t, 2)
	if !strings.Contains(r.Stderr, "no column fp in table") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	r = reconciletest.Fpdedup(t, d.Dir, []string{"FPDEDUP_MYSQL_PASSWORD=not-the-password-42"}, "reconcile", "--index", d.Index, "--online", reconciletest.MySQLURL(t, "rc_int", "fp", ""), "--retries", "1").Want(t, 2)
	if !strings.Contains(r.Stderr, "Access denied") || strings.Contains(r.Stderr, "not-the-password-42") {
		t.Fatalf("wrong password: %s", r.Stderr)
	}
}

// The streamed SELECT's connection killed mid-read (KILL CONNECTION):
// rows.Next just stops, and only rows.Err says why (FAULTS.md row 22). The
// read resumes after the last value and the counts are exact; with no
// retries allowed the run fails, never a short success.
func TestMySQLConnectionKilledDuringRead(t *testing.T) {
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 100_000)
	reconciletest.CreateTable(t, db, "rc_kill", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_kill", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	env := reconciletest.MySQLEnv(t)

	// The server pauses half a second in the middle of the stream (the
	// WHERE sleeps at one row), so the kill lands while rows are flowing
	// rather than after the whole result sits in the socket buffers.
	online := d.OnlineKeys()
	slices.SortFunc(online, func(a, b string) int { return strings.Compare(reconciletest.FPHex(a), reconciletest.FPHex(b)) })
	url := reconciletest.MySQLURL(t, "rc_kill", "fp", "where="+reconciletest.URLEscape(fmt.Sprintf("IF(fp = x'%s', SLEEP(0.5), 0) = 0", reconciletest.FPHex(online[len(online)/2]))))
	for _, retries := range []string{"3", "0"} {
		done := make(chan reconciletest.Result, 1)
		go func() {
			done <- reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url,
				"--retries", retries, "--report", "k"+retries+".json")
		}()
		killed := killReader(t, db, "rc_kill")
		r := <-done
		if killed == 0 {
			t.Fatalf("retries %s: no connection killed; run: %d %s", retries, r.Code, r.Stderr)
		}
		rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "k"+retries+".json"))
		if retries == "0" {
			r.Want(t, 2)
			if !strings.Contains(r.Stderr, "reading "+url+" failed after") || !strings.Contains(rep.Error, "rerun") {
				t.Fatalf("unclear error: %s", r.Stderr)
			}
			continue
		}
		r.Want(t, 1)
		reconciletest.WantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
		if rep.Online.Retries < 1 || rep.Online.CountChecked || rep.Online.Note == "" {
			t.Fatalf("after a resumed read: %+v", rep.Online)
		}
	}
}

// killReader waits for reconcile's streamed SELECT on table, lets it read
// for a while, and kills every connection of the same user but its own.
func killReader(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var user string
	conn.QueryRowContext(ctx, "SELECT SUBSTRING_INDEX(USER(), '@', 1)").Scan(&user)
	started := reconciletest.WaitFor(30*time.Second, func() bool {
		var n int
		conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "SELECT `fp` FROM `"+table+"`%ORDER BY%").Scan(&n)
		return n > 0
	})
	if !started {
		return 0
	}
	time.Sleep(200 * time.Millisecond)
	rows, err := conn.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> CONNECTION_ID()", user)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
			continue
		}
	}
	return len(ids)
}

// The server killed (SIGKILL to mariadbd) during --apply: a clear error and
// a checkpoint; the server restarted, the same command writes only what is
// still missing, once.
func TestMySQLServerKilledDuringApply(t *testing.T) {
	reconciletest.NeedKill(t)
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 50_000)
	reconciletest.CreateTable(t, db, "rc_crash", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_crash", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	url := reconciletest.MySQLURL(t, "rc_crash", "fp", "")
	env := reconciletest.MySQLEnv(t)
	var pidFile string
	if err := db.QueryRow("SELECT @@pid_file").Scan(&pidFile); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(reconciletest.Must(os.ReadFile(pidFile)))))
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--apply", "--batch", "100", "--conns", "2",
		"--checkpoint", ckpt, "--timeout", "2s", "--retries", "2"}
	done := make(chan reconciletest.Result, 1)
	go func() {
		done <- reconciletest.Fpdedup(t, d.Dir, env, append(args, "--rate", "2k", "--report", "a.json")...)
	}()
	if !reconciletest.WaitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		t.Fatal("no checkpoint appeared")
	}
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	r := <-done
	reconciletest.RestartMariaDB(t, db)
	r.Want(t, 2)
	if !strings.Contains(r.Stderr, "writing to "+url+" failed") || !strings.Contains(r.Stderr, "rerun the same command to resume") {
		t.Fatalf("unclear error: %s", r.Stderr)
	}
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 {
		t.Fatalf("checkpoint: %+v %v", ck, err)
	}
	// What the checkpoint says was written survived the crash.
	for _, fp := range d.MissingFPs() {
		if fp > ck.Last {
			break
		}
		var n int
		b, _ := hex.DecodeString(fp)
		if db.QueryRow("SELECT COUNT(*) FROM rc_crash WHERE fp = ?", b).Scan(&n); n != 1 {
			t.Fatalf("checkpoint at %s, but %s is not in the table", ck.Last, fp)
		}
	}
	before := reconciletest.CountRows(t, db, "rc_crash")
	reconciletest.Fpdedup(t, d.Dir, env, append(args, "--report", "b.json")...).Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json"))
	if rep.Apply.Written != 50_500-before || rep.Apply.Written != rep.Counts.OnlyOffline {
		t.Fatalf("resume wrote %d, %d were still missing (%d rows before)", rep.Apply.Written, rep.Counts.OnlyOffline, before)
	}
	if n := reconciletest.CountRows(t, db, "rc_crash"); n != 50_500 {
		t.Fatalf("%d rows, want 50500", n)
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--report", "c.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "c.json")).Counts, 50_000, 0, 500)
}

// The server gone for good in the middle of the streamed SELECT … ORDER BY
// (the proxy in front of it shuts: connections reset, reconnects refused):
// after its retries the run ends with a clear error naming the rows read
// and the retries, exit 2, never a panic and never a short success.
// Before the fix, a failed reconnect left a nil *sql.Conn that the next
// attempt used: a nil pointer panic with --retries 1 or more.
func TestMySQLServerGoneDuringRead(t *testing.T) {
	reconciletest.PlainOnly(t, "the reconnect runs under -race in TestMySQLConnectionKilledDuringRead")
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 100_000)
	reconciletest.CreateTable(t, db, "rc_gone", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_gone", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	env := reconciletest.MySQLEnv(t)
	for _, retries := range []int{2, 0} {
		// 64 KiB of a result of ~2 MB: the stream is cut in its middle.
		p := reconciletest.NewTCPProxy(t, reconciletest.MySQLDSN(t).Addr, "ORDER BY", 64<<10, 0)
		url := reconciletest.MySQLProxyURL(t, p.Addr, "rc_gone")
		rname := fmt.Sprintf("gone%d.json", retries)
		r := reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url,
			"--retries", fmt.Sprint(retries), "--report", rname)
		if !p.WasShut() {
			t.Fatalf("retries %d: the proxy never cut the stream; run: %d %s", retries, r.Code, r.Stderr)
		}
		if strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine ") {
			t.Fatalf("retries %d: a panic:\n%s", retries, r.Stderr)
		}
		r.Want(t, 2)
		want := fmt.Sprintf("and %d retries: ", retries)
		if !strings.Contains(r.Stderr, "reading "+url+" failed after ") || !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "rerun") {
			t.Fatalf("retries %d: unclear error: %s", retries, r.Stderr)
		}
		if retries > 0 && !strings.Contains(r.Stderr, "connection refused") {
			t.Fatalf("retries %d: the error does not say why the reconnects failed: %s", retries, r.Stderr)
		}
		rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, rname))
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
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 100_000)
	reconciletest.CreateTable(t, db, "rc_back", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_back", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	p := reconciletest.NewTCPProxy(t, reconciletest.MySQLDSN(t).Addr, "ORDER BY", 64<<10, 2*time.Second)
	tg, err := reconcile.ParseURL(reconciletest.MySQLProxyURL(t, p.Addr, "rc_back"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Run(context.Background(), reconcile.Options{
		Index: d.Index, Target: tg, Password: reconciletest.MySQLDSN(t).Passwd,
		Retries: 4, Backoff: time.Second, Timeout: 5 * time.Second, TmpDir: d.Dir,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	select {
	case <-p.Opened:
	default:
		t.Fatal("the proxy never listened again")
	}
	reconciletest.WantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	// Retries: the stream cut, then the refused reconnect.
	if rep.Online.Retries < 2 || rep.Online.CountChecked || rep.Online.Note == "" || rep.Online.Distinct != 91_000 {
		t.Fatalf("after a refused reconnect and a resumed read: %+v", rep.Online)
	}
}

// The issue as reported: mariadbd killed (SIGKILL) in the middle of the
// streamed SELECT … ORDER BY, with --retries 2. The reconnects are refused
// until the server is back, so the run ends with the clear error, exit 2
// (it panicked on a nil *sql.Conn); restarted, the same command reads it
// all with exact counts.
func TestMySQLServerKilledDuringRead(t *testing.T) {
	reconciletest.PlainOnly(t, "a server killed and restarted; the reconnect runs under -race in TestMySQLConnectionKilledDuringRead")
	reconciletest.NeedKill(t)
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 100_000)
	reconciletest.CreateTable(t, db, "rc_killread", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_killread", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	env := reconciletest.MySQLEnv(t)
	pid := mariadbPID(t, db)
	online := d.OnlineKeys()
	slices.SortFunc(online, func(a, b string) int { return strings.Compare(reconciletest.FPHex(a), reconciletest.FPHex(b)) })
	// The server pauses half a second in the middle of the stream: the
	// kill lands while rows are flowing.
	url := reconciletest.MySQLURL(t, "rc_killread", "fp", "where="+reconciletest.URLEscape(fmt.Sprintf("IF(fp = x'%s', SLEEP(0.5), 0) = 0", reconciletest.FPHex(online[len(online)/2]))))
	done := make(chan reconciletest.Result, 1)
	go func() {
		done <- reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--retries", "2", "--report", "k.json")
	}()
	started := reconciletest.WaitFor(30*time.Second, func() bool {
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
	reconciletest.RestartMariaDB(t, db)
	if strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "goroutine ") {
		t.Fatalf("a panic:\n%s", r.Stderr)
	}
	r.Want(t, 2)
	t.Logf("%s", strings.TrimSpace(r.Stderr))
	if !strings.Contains(r.Stderr, "reading "+url+" failed after ") || !strings.Contains(r.Stderr, "and 2 retries: ") {
		t.Fatalf("unclear error: %s", r.Stderr)
	}
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "k.json"))
	if rep.ExitCode != 2 || rep.Agree || rep.Online.Retries != 2 || rep.Online.Values >= 91_000 {
		t.Fatalf("report: exit %d, agree %v, %+v", rep.ExitCode, rep.Agree, rep.Online)
	}
	reconciletest.Fpdedup(t, d.Dir, env, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json")).Counts, 90_000, 10_000, 1_000)
}

// mariadbPID is the server's process id, from its pid file.
func mariadbPID(t *testing.T, db *sql.DB) int {
	t.Helper()
	var pidFile string
	if err := db.QueryRow("SELECT @@pid_file").Scan(&pidFile); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(reconciletest.Must(os.ReadFile(pidFile)))))
	if err != nil || pid <= 1 {
		t.Fatalf("mariadb pid file %s: %v", pidFile, err)
	}
	return pid
}

// TestMySQLApplyRefused: a user who may only SELECT runs --apply. The
// server refuses the INSERT for good (1142): the run says the write was
// refused, and advises no rerun, which would be refused the same.
func TestMySQLApplyRefused(t *testing.T) {
	reconciletest.PlainOnly(t, "what a refusal says; the apply runs under -race in the apply tests")
	db := reconciletest.MySQLDB(t)
	d := reconciletest.NewDataset(t, 1_000)
	reconciletest.CreateTable(t, db, "rc_refused", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_refused", reconciletest.RowValues(d.OnlineKeys(), reconciletest.Bin16))
	url := reconciletest.MySQLReaderURL(t, "rc_refused", "fp")
	r := reconciletest.Fpdedup(t, d.Dir, reconciletest.MySQLEnv(t), "reconcile", "--index", d.Index, "--online", url, "--apply").Want(t, 2)
	if !strings.Contains(r.Stderr, "was refused") || !strings.Contains(r.Stderr, "1142") || strings.Contains(r.Stderr, "rerun") {
		t.Fatalf("a write refused for good: %s", r.Stderr)
	}
	if n := reconciletest.CountRows(t, db, "rc_refused"); n != int64(len(d.OnlineKeys())) {
		t.Fatalf("%d rows after a refused --apply, want %d", n, len(d.OnlineKeys()))
	}
}
