package reconcile_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
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

func rowValues(keys []string, f func(string) any) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = f(k)
	}
	return out
}

func bin16(k string) any { d := digest(k); return d[:16] }
func bin32(k string) any { d := digest(k); return d[:] }
func hex32(k string) any { return fpHex(k) }
func hex64(k string) any { return fullHex(k) }

// A BINARY(16) column, read by one streamed SELECT … ORDER BY and
// merge-joined: exact counts, a COUNT(*) in the same snapshot, the outputs;
// then --dry-run, --apply (multi-row INSERT IGNORE on several connections)
// and a second reconcile that finds nothing missing.
func TestMySQLBinary16(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 100_000)
	createTable(t, db, "rc_bin16", "BINARY(16)")
	loadRows(t, db, "rc_bin16", rowValues(d.onlineKeys(), bin16))
	url := mysqlURL(t, "rc_bin16", "fp", "")
	env := mysqlEnv(t)

	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--report", "r.json",
		"--missing", "missing.fpx", "--extra", "extra.fpx", "--records", d.records, "--backfill", "backfill.txt").want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "r.json"))
	wantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
	if rep.Mode != "merge-join" || rep.Online.Values != 91_000 || !rep.Online.CountChecked || rep.Online.Expected != 91_000 || rep.Online.Wide {
		t.Fatalf("report online: mode %s %+v", rep.Mode, rep.Online)
	}
	if pw := mysqlDSN(t).Passwd; len(pw) > 0 && strings.Contains(string(must(os.ReadFile(filepath.Join(d.dir, "r.json")))), pw) {
		t.Fatal("the report holds the password")
	}
	if got := dump(t, d.dir, "missing.fpx"); !slices.Equal(got, d.missingFPs()) {
		t.Fatalf("missing.fpx: %d fingerprints", len(got))
	}
	if got := dump(t, d.dir, "extra.fpx"); !slices.Equal(got, d.extraFPs()) {
		t.Fatalf("extra.fpx: %d fingerprints", len(got))
	}
	if bf := must(os.ReadFile(filepath.Join(d.dir, "backfill.txt"))); string(bf) != d.missingRecords() {
		t.Fatalf("backfill: %d bytes, want %d", len(bf), len(d.missingRecords()))
	}

	r := fpdedup(t, d.dir, env, "reconcile", "-q", "--index", d.index, "--online", url, "--dry-run").want(t, 1)
	if first := strings.SplitN(r.stdout, "\n", 2)[0]; first != "INSERT IGNORE INTO `rc_bin16` (`fp`) VALUES (x'"+d.missingFPs()[0]+"');" {
		t.Fatalf("dry run: %q", first)
	}
	if n := countRows(t, db, "rc_bin16"); n != 91_000 {
		t.Fatalf("--dry-run wrote: %d rows", n)
	}

	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--apply", "--conns", "4", "--report", "a.json").want(t, 1)
	rep = readReport(t, filepath.Join(d.dir, "a.json"))
	if rep.Apply.Written != 10_000 || rep.Apply.Batches != 10 || rep.Missing != 0 {
		t.Fatalf("apply: %+v", rep.Apply)
	}
	if n := countRows(t, db, "rc_bin16"); n != 101_000 {
		t.Fatalf("%d rows after --apply, want 101000", n)
	}
	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--report", "b.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "b.json")).Counts, 100_000, 0, 1_000)
	// The probe sees no difference now (it cannot see the extras).
	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--probe", "--report", "p.json").want(t, 0)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "p.json")).Counts, 100_000, 0, -1)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A slice: a partitioned index (build --partition 0/2) against a WHERE on
// the same half; and without the WHERE, the other half is set aside as
// outside the index's range, not reported as unknown.
func TestMySQLSlice(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 20_000)
	createTable(t, db, "rc_slice", "BINARY(16)")
	loadRows(t, db, "rc_slice", rowValues(d.onlineKeys(), bin16))
	half := filepath.Join(d.dir, "half.fpx")
	fpdedup(t, d.dir, nil, "build", "-q", "--hash", "sha256", "--partition", "0/2", "-o", half, d.records).want(t, 0)
	var both, missing, extra, outside int64
	for _, i := range d.online {
		if fpHex(d.keys[i]) < "8" {
			both++
		} else {
			outside++
		}
	}
	for _, i := range d.missing {
		if fpHex(d.keys[i]) < "8" {
			missing++
		}
	}
	for _, k := range d.extras {
		if fpHex(k) < "8" {
			extra++
		} else {
			outside++
		}
	}
	env := mysqlEnv(t)
	// (A '?' in the WHERE must stay a '?': values are inlined, not bound.)
	url := mysqlURL(t, "rc_slice", "fp", "where="+urlEscape("fp < x'80000000000000000000000000000000' AND 'a?b' <> ''"))
	fpdedup(t, d.dir, env, "reconcile", "--index", half, "--online", url, "--report", "w.json").want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "w.json"))
	wantCounts(t, rep.Counts, both, missing, extra)
	if rep.Online.OutsideRange != 0 || rep.Online.Expected != both+extra {
		t.Fatalf("with where: %+v", rep.Online)
	}
	fpdedup(t, d.dir, env, "reconcile", "--index", half, "--online", url, "--probe", "--report", "wp.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "wp.json")).Counts, both, missing, -1)
	fpdedup(t, d.dir, env, "reconcile", "--index", half, "--online", mysqlURL(t, "rc_slice", "fp", ""), "--report", "all.json").want(t, 1)
	rep = readReport(t, filepath.Join(d.dir, "all.json"))
	wantCounts(t, rep.Counts, both, missing, extra)
	if rep.Online.OutsideRange != outside {
		t.Fatalf("outside the range: %d, want %d", rep.Online.OutsideRange, outside)
	}
}

func urlEscape(s string) string {
	r := strings.NewReplacer("%", "%25", " ", "%20", "'", "%27", "<", "%3C", ">", "%3E", "&", "%26", "=", "%3D")
	return r.Replace(s)
}

// CHAR(64): whole SHA-256 digests in hex. Compared on 128 bits; --apply
// needs --records and says so before reading anything; the probe uses one
// index range per fingerprint; --apply with --records inserts the digests.
func TestMySQLChar64(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 20_000)
	createTable(t, db, "rc_char64", "CHAR(64) CHARACTER SET ascii")
	loadRows(t, db, "rc_char64", rowValues(d.onlineKeys(), hex64))
	url := mysqlURL(t, "rc_char64", "fp", "")
	env := mysqlEnv(t)

	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--report", "r.json").want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "r.json"))
	wantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if !rep.Online.Wide {
		t.Fatal("whole digests not recognised")
	}
	r := fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--apply").want(t, 2)
	if !strings.Contains(r.stderr, "--apply needs --records") || !strings.Contains(r.stderr, "32-byte") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--probe", "--report", "p.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "p.json")).Counts, 18_000, 2_000, -1)

	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--apply", "--records", d.records, "--report", "a.json").want(t, 1)
	rep = readReport(t, filepath.Join(d.dir, "a.json"))
	if rep.Apply.Written != 2_000 || rep.Apply.NotInRecords != 0 || rep.Records.Digests != 2_000 {
		t.Fatalf("apply %+v, records %+v", rep.Apply, rep.Records)
	}
	for _, i := range d.missing[:50] {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM rc_char64 WHERE fp = ?", fullHex(d.keys[i])).Scan(&n); err != nil || n != 1 {
			t.Fatalf("digest of %q not inserted (%v)", d.keys[i], err)
		}
	}
	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--probe").want(t, 0)
}

// BINARY(32) and CHAR(32) work alike; a CHAR column whose hex is mixed-case
// under a binary collation is not in fingerprint order: an error, never a
// wrong count.
func TestMySQLColumnKinds(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 5_000)
	env := mysqlEnv(t)
	for _, c := range []struct {
		table, typ string
		f          func(string) any
	}{
		{"rc_bin32", "BINARY(32)", bin32},
		{"rc_char32", "CHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", hex32},
	} {
		createTable(t, db, c.table, c.typ)
		loadRows(t, db, c.table, rowValues(d.onlineKeys(), c.f))
		fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", mysqlURL(t, c.table, "fp", ""), "--report", c.table+".json").want(t, 1)
		wantCounts(t, readReport(t, filepath.Join(d.dir, c.table+".json")).Counts, 4_500, 500, 50)
		fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", mysqlURL(t, c.table, "fp", ""), "--probe", "--report", c.table+"-p.json").want(t, 1)
		wantCounts(t, readReport(t, filepath.Join(d.dir, c.table+"-p.json")).Counts, 4_500, 500, -1)
	}

	createTable(t, db, "rc_mixed", "CHAR(32) CHARACTER SET ascii COLLATE ascii_bin")
	vals := rowValues(d.onlineKeys(), hex32)
	for i := 0; i < len(vals); i += 7 {
		vals[i] = strings.ToUpper(vals[i].(string))
	}
	loadRows(t, db, "rc_mixed", vals)
	r := fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", mysqlURL(t, "rc_mixed", "fp", "")).want(t, 2)
	if !strings.Contains(r.stderr, "not in fingerprint order") {
		t.Fatalf("stderr: %s", r.stderr)
	}

	createTable(t, db, "rc_int", "BIGINT")
	r = fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", mysqlURL(t, "rc_int", "fp", "")).want(t, 2)
	if !strings.Contains(r.stderr, "want BINARY(16), BINARY(32), CHAR(32) or CHAR(64)") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	r = fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", mysqlURL(t, "rc_no_such_table", "fp", "")).want(t, 2)
	if !strings.Contains(r.stderr, "no column fp in table") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	r = fpdedup(t, d.dir, []string{"FPDEDUP_MYSQL_PASSWORD=not-the-password-42"}, "reconcile", "--index", d.index, "--online", mysqlURL(t, "rc_int", "fp", ""), "--retries", "1").want(t, 2)
	if !strings.Contains(r.stderr, "Access denied") || strings.Contains(r.stderr, "not-the-password-42") {
		t.Fatalf("wrong password: %s", r.stderr)
	}
}

// The streamed SELECT's connection killed mid-read (KILL CONNECTION):
// rows.Next just stops, and only rows.Err says why (FAULTS.md row 22). The
// read resumes after the last value and the counts are exact; with no
// retries allowed the run fails, never a short success.
func TestMySQLConnectionKilledDuringRead(t *testing.T) {
	db := mysqlDB(t)
	d := newDataset(t, 100_000)
	createTable(t, db, "rc_kill", "BINARY(16)")
	loadRows(t, db, "rc_kill", rowValues(d.onlineKeys(), bin16))
	env := mysqlEnv(t)

	// The server pauses half a second in the middle of the stream (the
	// WHERE sleeps at one row), so the kill lands while rows are flowing
	// rather than after the whole result sits in the socket buffers.
	online := d.onlineKeys()
	slices.SortFunc(online, func(a, b string) int { return strings.Compare(fpHex(a), fpHex(b)) })
	url := mysqlURL(t, "rc_kill", "fp", "where="+urlEscape(fmt.Sprintf("IF(fp = x'%s', SLEEP(0.5), 0) = 0", fpHex(online[len(online)/2]))))
	for _, retries := range []string{"3", "0"} {
		done := make(chan result, 1)
		go func() {
			done <- fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url,
				"--retries", retries, "--report", "k"+retries+".json")
		}()
		killed := killReader(t, db, "rc_kill")
		r := <-done
		if killed == 0 {
			t.Fatalf("retries %s: no connection killed; run: %d %s", retries, r.code, r.stderr)
		}
		rep := readReport(t, filepath.Join(d.dir, "k"+retries+".json"))
		if retries == "0" {
			r.want(t, 2)
			if !strings.Contains(r.stderr, "reading "+url+" failed after") || !strings.Contains(rep.Error, "rerun") {
				t.Fatalf("unclear error: %s", r.stderr)
			}
			continue
		}
		r.want(t, 1)
		wantCounts(t, rep.Counts, 90_000, 10_000, 1_000)
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
	started := waitFor(30*time.Second, func() bool {
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
	needKill(t)
	db := mysqlDB(t)
	d := newDataset(t, 50_000)
	createTable(t, db, "rc_crash", "BINARY(16)")
	loadRows(t, db, "rc_crash", rowValues(d.onlineKeys(), bin16))
	url := mysqlURL(t, "rc_crash", "fp", "")
	env := mysqlEnv(t)
	var pidFile string
	if err := db.QueryRow("SELECT @@pid_file").Scan(&pidFile); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(must(os.ReadFile(pidFile)))))
	if err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(d.dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.index, "--online", url, "--apply", "--batch", "100", "--conns", "2",
		"--checkpoint", ckpt, "--timeout", "2s", "--retries", "2"}
	done := make(chan result, 1)
	go func() { done <- fpdedup(t, d.dir, env, append(args, "--rate", "2k", "--report", "a.json")...) }()
	if !waitFor(20*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		t.Fatal("no checkpoint appeared")
	}
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGKILL)
	r := <-done
	restartMariaDB(t, db)
	r.want(t, 2)
	if !strings.Contains(r.stderr, "writing to "+url+" failed") || !strings.Contains(r.stderr, "rerun the same command to resume") {
		t.Fatalf("unclear error: %s", r.stderr)
	}
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 {
		t.Fatalf("checkpoint: %+v %v", ck, err)
	}
	// What the checkpoint says was written survived the crash.
	for _, fp := range d.missingFPs() {
		if fp > ck.Last {
			break
		}
		var n int
		b, _ := hex.DecodeString(fp)
		if db.QueryRow("SELECT COUNT(*) FROM rc_crash WHERE fp = ?", b).Scan(&n); n != 1 {
			t.Fatalf("checkpoint at %s, but %s is not in the table", ck.Last, fp)
		}
	}
	before := countRows(t, db, "rc_crash")
	fpdedup(t, d.dir, env, append(args, "--report", "b.json")...).want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "b.json"))
	if rep.Apply.Written != 50_500-before || rep.Apply.Written != rep.Counts.OnlyOffline {
		t.Fatalf("resume wrote %d, %d were still missing (%d rows before)", rep.Apply.Written, rep.Counts.OnlyOffline, before)
	}
	if n := countRows(t, db, "rc_crash"); n != 50_500 {
		t.Fatalf("%d rows, want 50500", n)
	}
	fpdedup(t, d.dir, env, "reconcile", "--index", d.index, "--online", url, "--report", "c.json").want(t, 1)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "c.json")).Counts, 50_000, 0, 500)
}

// restartMariaDB starts the killed server again with the project's script.
func restartMariaDB(t *testing.T, db *sql.DB) {
	t.Helper()
	port := mysqlDSN(t).Addr[strings.LastIndex(mysqlDSN(t).Addr, ":")+1:]
	cfg := mysqlDSN(t)
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "scripts", "services", "mariadb-up.sh"), port)
	cmd.Env = append(os.Environ(), "DB_USER="+cfg.User, "DB_PASS="+cfg.Passwd, "DB_NAME="+cfg.DBName)
	if dir := os.Getenv("FPDEDUP_SERVICES_DIR"); dir != "" {
		cmd.Env = append(cmd.Env, "SERVICES_DIR="+dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restarting mariadb: %v\n%s", err, out)
	}
	if !waitFor(30*time.Second, func() bool { return db.Ping() == nil }) {
		t.Fatal("mariadb did not come back")
	}
}
