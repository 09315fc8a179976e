package reconcile_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
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
	wantCounts(t, rep, 90_000, 10_000, 1_000)
	// Retries: the stream cut, then the refused reconnect.
	if rep.Online.Retries < 2 || rep.Online.CountChecked || rep.Online.Note == "" || rep.Online.Distinct != 91_000 {
		t.Fatalf("after a refused reconnect and a resumed read: %+v", rep.Online)
	}
}
