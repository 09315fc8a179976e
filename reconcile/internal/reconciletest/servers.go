package reconciletest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisAddr is the test Redis's address ($FPDEDUP_REDIS_ADDR); the test
// holds the servers (hold) until it ends.
func RedisAddr(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("FPDEDUP_REDIS_ADDR")
	if addr == "" {
		t.Skip("FPDEDUP_REDIS_ADDR is not set: no Redis to test against (run under scripts/services/with-services.sh)")
	}
	hold(t)
	return addr
}

// NeedKill skips the test unless the servers are its to kill.
func NeedKill(t *testing.T) {
	t.Helper()
	if os.Getenv("FPDEDUP_TEST_KILL") != "1" {
		t.Skip("FPDEDUP_TEST_KILL is not 1: the servers are not ours to kill (scripts/services/with-services.sh sets it)")
	}
}

// RedisDB returns a client on database db, flushed.
func RedisDB(t *testing.T, db int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr(t), DB: db, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", RedisAddr(t), err)
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.FlushDB(context.Background()); c.Close() })
	return c
}

// RedisURL is the --online URL of database db with query.
func RedisURL(t *testing.T, db int, query string) string {
	return fmt.Sprintf("redis://%s/%d?%s", RedisAddr(t), db, query)
}

// LoadRedisKeys sets PREFIX+name to 1 for each name, pipelined.
func LoadRedisKeys(t *testing.T, c *redis.Client, prefix string, names []string) {
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

// LoadRedisSet adds members to the set, in batches.
func LoadRedisSet(t *testing.T, c *redis.Client, set string, members []string) {
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

// Hexes are f of each key.
func Hexes(keys []string, f func(string) string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = f(k)
	}
	return out
}

// RedisCalls is how many times Redis ran cmd (INFO commandstats).
func RedisCalls(t *testing.T, c *redis.Client, cmd string) int64 {
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

// MySQLDSN is the test MariaDB's DSN ($FPDEDUP_MYSQL_DSN); the test
// holds the servers (hold) until it ends.
func MySQLDSN(t *testing.T) *mysql.Config {
	t.Helper()
	dsn := os.Getenv("FPDEDUP_MYSQL_DSN")
	if dsn == "" {
		t.Skip("FPDEDUP_MYSQL_DSN is not set: no MySQL/MariaDB to test against (run under scripts/services/with-services.sh)")
	}
	hold(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("FPDEDUP_MYSQL_DSN: %v", err)
	}
	return cfg
}

// MySQLDB is a connection pool to the test MariaDB.
func MySQLDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg := MySQLDSN(t)
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

// MySQLURL is the --online URL for table.column (the password goes in the
// environment, see mysqlEnv).
func MySQLURL(t *testing.T, table, column, extra string) string {
	cfg := MySQLDSN(t)
	u := fmt.Sprintf("mysql://%s@%s/%s?table=%s&column=%s", cfg.User, cfg.Addr, cfg.DBName, table, column)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// MySQLReaderURL is MySQLURL for the user who may only SELECT
// ($FPDEDUP_MYSQL_READER, made by scripts/services/mariadb-up.sh; the
// same password).
func MySQLReaderURL(t *testing.T, table, column string) string {
	t.Helper()
	reader := os.Getenv("FPDEDUP_MYSQL_READER")
	if reader == "" {
		msg := "FPDEDUP_MYSQL_READER is not set: no user who may only read (run under scripts/services/with-services.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return strings.Replace(MySQLURL(t, table, column, ""), "mysql://"+MySQLDSN(t).User+"@", "mysql://"+reader+"@", 1)
}

// MySQLEnv is the environment that gives the CLI the MariaDB password.
func MySQLEnv(t *testing.T) []string {
	return []string{"FPDEDUP_MYSQL_PASSWORD=" + MySQLDSN(t).Passwd}
}

// MustExec runs q, failing the test on an error.
func MustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// CreateTable makes a fresh table with one fingerprint column fp of type
// typ as its primary key, and drops it at the end of the test.
func CreateTable(t *testing.T, db *sql.DB, name, typ string) {
	t.Helper()
	MustExec(t, db, "DROP TABLE IF EXISTS "+name)
	MustExec(t, db, fmt.Sprintf("CREATE TABLE %s (fp %s NOT NULL PRIMARY KEY) ENGINE=InnoDB", name, typ))
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + name) })
}

// LoadRows inserts values (each a []byte or string) into table.fp.
func LoadRows(t *testing.T, db *sql.DB, table string, values []any) {
	t.Helper()
	for len(values) > 0 {
		n := min(len(values), 2000)
		q := "INSERT INTO " + table + " (fp) VALUES (?)" + strings.Repeat(",(?)", n-1)
		MustExec(t, db, q, values[:n]...)
		values = values[n:]
	}
}

// CountRows is COUNT(*) of table.
func CountRows(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// RepoRoot is the module root: the directory above the test's that holds
// go.mod.
func RepoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// WaitFor polls cond every 10 ms until it holds or d passes.
func WaitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// RestartRedis kills the test Redis (SIGKILL, by the PID in its pidfile)
// and starts it again, empty, with the project's script: a real restart,
// every key lost, as after a crash without persistence.
func RestartRedis(t *testing.T) {
	t.Helper()
	NeedKill(t)
	dir := os.Getenv("FPDEDUP_SERVICES_DIR")
	if dir == "" {
		t.Skip("FPDEDUP_SERVICES_DIR is not set: the Redis pidfile is unknown (scripts/services/with-services.sh sets it)")
	}
	addr := RedisAddr(t)
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
	if !WaitFor(30*time.Second, func() bool { return !processAlive(pid) }) {
		t.Fatalf("redis %d did not die", pid)
	}
	cmd := exec.Command("bash", filepath.Join(RepoRoot(t), "scripts", "services", "redis-up.sh"), port)
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

// MySQLProxyURL is the --online URL of table.fp reached through addr.
func MySQLProxyURL(t *testing.T, addr, table string) string {
	cfg := MySQLDSN(t)
	return fmt.Sprintf("mysql://%s@%s/%s?table=%s&column=fp", cfg.User, addr, cfg.DBName, table)
}

// RowValues are f of each key, rows to load.
func RowValues(keys []string, f func(string) any) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = f(k)
	}
	return out
}

// Bin16 is k's fingerprint as BINARY(16).
func Bin16(k string) any { d := Digest(k); return d[:16] }

// Bin32 is k's SHA-256 as BINARY(32).
func Bin32(k string) any { d := Digest(k); return d[:] }

// Hex32 is k's fingerprint as CHAR(32).
func Hex32(k string) any { return FPHex(k) }

// Hex64 is k's SHA-256 as CHAR(64).
func Hex64(k string) any { return FullHex(k) }

// Must is v, or a panic on err.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// URLEscape escapes s for a URL's query.
func URLEscape(s string) string {
	r := strings.NewReplacer("%", "%25", " ", "%20", "'", "%27", "<", "%3C", ">", "%3E", "&", "%26", "=", "%3D")
	return r.Replace(s)
}

// RestartMariaDB starts the killed server again with the project's script.
func RestartMariaDB(t *testing.T, db *sql.DB) {
	t.Helper()
	port := MySQLDSN(t).Addr[strings.LastIndex(MySQLDSN(t).Addr, ":")+1:]
	cfg := MySQLDSN(t)
	cmd := exec.Command("bash", filepath.Join(RepoRoot(t), "scripts", "services", "mariadb-up.sh"), port)
	cmd.Env = append(os.Environ(), "DB_USER="+cfg.User, "DB_PASS="+cfg.Passwd, "DB_NAME="+cfg.DBName)
	if dir := os.Getenv("FPDEDUP_SERVICES_DIR"); dir != "" {
		cmd.Env = append(cmd.Env, "SERVICES_DIR="+dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restarting mariadb: %v\n%s", err, out)
	}
	if !WaitFor(30*time.Second, func() bool { return db.Ping() == nil }) {
		t.Fatal("mariadb did not come back")
	}
}
