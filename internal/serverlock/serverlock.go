// Package serverlock is the locks that tests take on the servers of
// scripts/services (Redis, the Redis Cluster, MariaDB, etcd and its
// cluster), for tests alone.
//
// The servers are one set for every test package that uses them, which go
// test runs side by side, and the tests flush, fill, compact, kill and
// restart them. A test that uses a server holds a lock on it until it
// ends: an exclusive lock on a file beside their pidfiles, taken once a
// process and held while any of its tests uses them, so that the tests
// that use the same servers run one at a time across packages, while the
// others run beside them.
//
// There are two locks: etcd's (HoldEtcd), and the other servers' (Hold).
// A test of etcd alone (the packages of etcd's adapter and client) takes
// etcd's only, and runs beside the tests of Redis and MariaDB; a test
// that uses etcd and other servers takes the other servers' first, then
// etcd's. Taken in that order, and etcd's alone never before the other,
// two processes never wait for each other.
package serverlock

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// lock is one lock file, held while n tests of this process (a test and
// its subtests) hold it.
type lock struct {
	name string
	mu   sync.Mutex
	n    int
	f    *os.File
}

var (
	others = &lock{name: "reconcile-tests.lock"}
	etcd   = &lock{name: "etcd-tests.lock"}
)

// Hold holds the servers but etcd (Redis, the Cluster, MariaDB) for t
// until it ends.
func Hold(t testing.TB) {
	t.Helper()
	others.hold(t)
}

// HoldEtcd holds the etcd servers for t until it ends. A test that holds
// other servers too takes them first (Hold).
func HoldEtcd(t testing.TB) {
	t.Helper()
	etcd.hold(t)
}

func (l *lock) hold(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		dir := os.Getenv("FPDEDUP_SERVICES_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		f, err := os.OpenFile(filepath.Join(dir, l.name), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("the servers' lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("the servers' lock: %v", err)
		}
		l.f = f
	}
	l.n++
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.n--; l.n == 0 {
			l.f.Close() // (closing the file releases its lock)
			l.f = nil
		}
	})
}
