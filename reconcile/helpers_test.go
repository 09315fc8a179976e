package reconcile_test

// End-to-end tests of `fpdedup reconcile` against real servers, never mocks.
// They run the built binary (made once in TestMain) as a user would. Redis
// and MariaDB come from the environment:
//
//	FPDEDUP_REDIS_ADDR=127.0.0.1:6390
//	FPDEDUP_MYSQL_DSN='fpdedup:fpdedup@tcp(127.0.0.1:3390)/fpdedup'
//	FPDEDUP_TEST_KILL=1       the tests may kill, freeze and restart them
//	FPDEDUP_SERVICES_DIR=…    where scripts/services keeps their pidfiles
//
// which scripts/services/with-services.sh sets after starting both:
//
//	bash scripts/services/with-services.sh go test -count=1 ./reconcile/
//
// Without them, the tests that need a server skip and say so.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fpdedup/fpdedup/reconcile"
)

// binDir holds the fpdedup binary the CLI tests run (buildCLI).
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

// raceBuild: the tests run under -race (race_test.go), so the binary they
// run is built with -race as well.
var raceBuild bool

// plainOnly skips a test under -race: one whose time goes to servers
// (a 512 MiB string, a cluster failing over) and whose code paths the
// race step covers through other tests. CI's plain go test step runs it.
func plainOnly(t *testing.T, why string) {
	t.Helper()
	if raceBuild {
		t.Skip("under -race: " + why + "; the plain run tests it")
	}
}

func TestMain(m *testing.M) {
	// The tests' own connections die with the servers they kill: quiet.
	// (So do the in-process runs' go-redis clients, as in the CLI.)
	mysql.SetLogger(log.New(io.Discard, "", 0))
	reconcile.QuietRedisLogs()
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		// Built before any test starts, so that no test's timing (a
		// server stopped some time into a run) includes the build. A
		// fuzz target's processes, which run no CLI, build nothing.
		if err := buildCLI(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cliBinary is the fpdedup binary the CLI tests run (buildCLI).
func cliBinary(t *testing.T) string {
	t.Helper()
	if err := buildCLI(); err != nil {
		t.Fatal(err)
	}
	return binPath
}

// buildCLI makes the binary once: $FPDEDUP_BIN (built already, by CI or
// to test another build), else one built for the test process, with
// -race under -race.
func buildCLI() error {
	binOnce.Do(func() {
		if bin := os.Getenv("FPDEDUP_BIN"); bin != "" {
			binPath = bin
			return
		}
		binDir, binError = os.MkdirTemp("", "reconcile-test-bin-")
		if binError != nil {
			return
		}
		binPath = filepath.Join(binDir, "fpdedup")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = "/usr/local/go/bin/go" // where Go is installed on the project's machines
		}
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		build := exec.Command(gobin, append(args, "github.com/fpdedup/fpdedup/cmd/fpdedup")...)
		var out bytes.Buffer
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			binError = fmt.Errorf("building fpdedup: %v\n%s", err, out.Bytes())
		}
	})
	return binError
}

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
	secs           float64
}

// fpdedup runs the binary in dir with env added to the test's environment.
func fpdedup(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return fpdedupCtx(t, context.Background(), dir, env, args...)
}

func fpdedupCtx(t *testing.T, ctx context.Context, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(ctx, cliBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), secs: time.Since(start).Seconds()}
	if os.Getenv("FPDEDUP_TEST_TIMES") != "" {
		t.Logf("%.2f s: fpdedup %s", r.secs, strings.Join(args, " "))
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running fpdedup %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// want fails unless r exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, head(r.stdout), r.stderr)
	}
	return r
}

func head(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// dataset is a known state: truth keys (all in the index), which of them
// are online, and online-only extras.
type dataset struct {
	keys    []string // truth, in record order
	online  []int    // indexes into keys that are online
	missing []int    // indexes into keys that are not
	extras  []string // keys online but not in the truth
	dir     string
	index   string // truth.fpx (sha256)
	records string // records.txt: one key per line, in keys order
}

func key(i int) string { return fmt.Sprintf("u%d:d%d:%d", i, i%97, 1700000000000+int64(i)) }

func digest(k string) [32]byte { return sha256.Sum256([]byte(k)) }

// fpHex is the 32-digit fingerprint of k, as `sha256sum | cut -c1-32`.
func fpHex(k string) string { d := digest(k); return hex.EncodeToString(d[:16]) }

// fullHex is the 64-digit SHA-256 of k.
func fullHex(k string) string { d := digest(k); return hex.EncodeToString(d[:]) }

// newDataset makes n truth keys, every tenth of them missing online, and
// n/100 online-only extras; it writes the records and builds the index.
func newDataset(t *testing.T, n int) *dataset {
	t.Helper()
	d := &dataset{dir: t.TempDir()}
	var recs bytes.Buffer
	for i := 0; i < n; i++ {
		k := key(i)
		d.keys = append(d.keys, k)
		recs.WriteString(k + "\n")
		if i%10 == 3 {
			d.missing = append(d.missing, i)
		} else {
			d.online = append(d.online, i)
		}
	}
	for i := 0; i < n/100; i++ {
		d.extras = append(d.extras, key(10_000_000+i))
	}
	d.records = filepath.Join(d.dir, "records.txt")
	d.index = filepath.Join(d.dir, "truth.fpx")
	if err := os.WriteFile(d.records, recs.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	fpdedup(t, d.dir, nil, "build", "-q", "--hash", "sha256", "-o", d.index, d.records).want(t, 0)
	return d
}

// onlineKeys are the keys the online side holds: the online truth keys
// and the extras.
func (d *dataset) onlineKeys() []string {
	var ks []string
	for _, i := range d.online {
		ks = append(ks, d.keys[i])
	}
	return append(ks, d.extras...)
}

// missingFPs are the sorted fingerprints of the missing keys.
func (d *dataset) missingFPs() []string {
	var fps []string
	for _, i := range d.missing {
		fps = append(fps, fpHex(d.keys[i]))
	}
	slices.Sort(fps)
	return fps
}

func (d *dataset) extraFPs() []string {
	var fps []string
	for _, k := range d.extras {
		fps = append(fps, fpHex(k))
	}
	slices.Sort(fps)
	return fps
}

// missingRecords is what --backfill must hold: the missing keys' records,
// in record order.
func (d *dataset) missingRecords() string {
	var b strings.Builder
	for _, i := range d.missing {
		b.WriteString(d.keys[i] + "\n")
	}
	return b.String()
}

// cliReport is what `fpdedup reconcile --report` writes: the run's
// figures, then the CLI's error message and exit code.
type cliReport struct {
	reconcile.Report
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

func readReport(t *testing.T, path string) *cliReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r cliReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", path, err)
	}
	return &r
}

func wantCounts(t *testing.T, c reconcile.Counts, both, offline, online int64) {
	t.Helper()
	if c != (reconcile.Counts{Both: both, OnlyOffline: offline, OnlyOnline: online}) {
		t.Fatalf("counts %+v, want both %d, only offline %d, only online %d", c, both, offline, online)
	}
}

// dump lists an index's fingerprints with the CLI.
func dump(t *testing.T, dir, index string) []string {
	t.Helper()
	r := fpdedup(t, dir, nil, "dump", index).want(t, 0)
	return strings.Fields(r.stdout)
}

// ---- servers ----

func redisAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("FPDEDUP_REDIS_ADDR")
	if addr == "" {
		t.Skip("FPDEDUP_REDIS_ADDR is not set: no Redis to test against (run under scripts/services/with-services.sh)")
	}
	return addr
}

func needKill(t *testing.T) {
	t.Helper()
	if os.Getenv("FPDEDUP_TEST_KILL") != "1" {
		t.Skip("FPDEDUP_TEST_KILL is not 1: the servers are not ours to kill (scripts/services/with-services.sh sets it)")
	}
}

// redisDB returns a client on database db, flushed.
func redisDB(t *testing.T, db int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(t), DB: db, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", redisAddr(t), err)
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.FlushDB(context.Background()); c.Close() })
	return c
}

func redisURL(t *testing.T, db int, query string) string {
	return fmt.Sprintf("redis://%s/%d?%s", redisAddr(t), db, query)
}

// loadRedisKeys sets PREFIX+name to 1 for each name, pipelined.
func loadRedisKeys(t *testing.T, c *redis.Client, prefix string, names []string) {
	t.Helper()
	ctx := context.Background()
	for len(names) > 0 {
		n := min(len(names), 2000)
		pipe := c.Pipeline()
		for _, k := range names[:n] {
			pipe.Set(ctx, prefix+k, 1, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		names = names[n:]
	}
}

func loadRedisSet(t *testing.T, c *redis.Client, set string, members []string) {
	t.Helper()
	ctx := context.Background()
	for len(members) > 0 {
		n := min(len(members), 2000)
		args := make([]any, n)
		for i, m := range members[:n] {
			args[i] = m
		}
		if err := c.SAdd(ctx, set, args...).Err(); err != nil {
			t.Fatal(err)
		}
		members = members[n:]
	}
}

func hexes(keys []string, f func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = f(k)
	}
	return out
}

// redisCalls is how many times Redis ran cmd (INFO commandstats).
func redisCalls(t *testing.T, c *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			var n int64
			fmt.Sscan(strings.Split(rest, ",")[0], &n)
			return n
		}
	}
	return 0
}

func mysqlDSN(t *testing.T) *mysql.Config {
	t.Helper()
	dsn := os.Getenv("FPDEDUP_MYSQL_DSN")
	if dsn == "" {
		t.Skip("FPDEDUP_MYSQL_DSN is not set: no MySQL/MariaDB to test against (run under scripts/services/with-services.sh)")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("FPDEDUP_MYSQL_DSN: %v", err)
	}
	return cfg
}

func mysqlDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg := mysqlDSN(t)
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Fatalf("mysql: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// mysqlURL is the --online URL for table.column (the password goes in the
// environment, see mysqlEnv).
func mysqlURL(t *testing.T, table, column, extra string) string {
	cfg := mysqlDSN(t)
	u := fmt.Sprintf("mysql://%s@%s/%s?table=%s&column=%s", cfg.User, cfg.Addr, cfg.DBName, table, column)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

func mysqlEnv(t *testing.T) []string {
	return []string{"FPDEDUP_MYSQL_PASSWORD=" + mysqlDSN(t).Passwd}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// createTable makes a fresh table with one fingerprint column fp of type
// typ as its primary key, and drops it at the end of the test.
func createTable(t *testing.T, db *sql.DB, name, typ string) {
	t.Helper()
	mustExec(t, db, "DROP TABLE IF EXISTS "+name)
	mustExec(t, db, fmt.Sprintf("CREATE TABLE %s (fp %s NOT NULL PRIMARY KEY) ENGINE=InnoDB", name, typ))
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + name) })
}

// loadRows inserts values (each a []byte or string) into table.fp.
func loadRows(t *testing.T, db *sql.DB, table string, values []any) {
	t.Helper()
	for len(values) > 0 {
		n := min(len(values), 2000)
		q := "INSERT INTO " + table + " (fp) VALUES (?)" + strings.Repeat(",(?)", n-1)
		mustExec(t, db, q, values[:n]...)
		values = values[n:]
	}
}

func countRows(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// repoRoot is the module root (the tests run in reconcile/).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// restartRedis kills the test Redis (SIGKILL, by the PID in its pidfile)
// and starts it again, empty, with the project's script: a real restart,
// every key lost, as after a crash without persistence.
func restartRedis(t *testing.T) {
	t.Helper()
	needKill(t)
	dir := os.Getenv("FPDEDUP_SERVICES_DIR")
	if dir == "" {
		t.Skip("FPDEDUP_SERVICES_DIR is not set: the Redis pidfile is unknown (scripts/services/with-services.sh sets it)")
	}
	addr := redisAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	b, err := os.ReadFile(filepath.Join(dir, "redis-"+port, "redis.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		t.Fatalf("redis pidfile: %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing redis %d: %v", pid, err)
	}
	if !waitFor(30*time.Second, func() bool { return !processAlive(pid) }) {
		t.Fatalf("redis %d did not die", pid)
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "scripts", "services", "redis-up.sh"), port)
	cmd.Env = append(os.Environ(), "SERVICES_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restarting redis: %v\n%s", err, out)
	}
}

// processAlive: pid exists and is not a zombie (whose parent, in a
// container, may never reap it).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	return end < 0 || !strings.HasPrefix(s[end+1:], " Z")
}
