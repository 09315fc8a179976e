// Package serverlock is the lock that tests take on the servers of
// scripts/services (Redis, the Redis Cluster, MariaDB, etcd and its
// cluster), for tests alone.
//
// The servers are one set for every test package that uses them, which go
// test runs side by side, and the tests flush, fill, compact, kill and
// restart them. A test that uses a server holds them all until it ends: an
// exclusive lock on a file beside their pidfiles, taken once a process and
// held while any of its tests uses them, so that the tests that use
// servers run one at a time across packages, while the others run beside
// them.
package serverlock

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

var holding struct {
	mu sync.Mutex
	n  int      // tests of this process holding the servers (a test and its subtests)
	f  *os.File // the locked file, while n > 0
}

// Hold holds the servers for t until it ends.
func Hold(t testing.TB) {
	t.Helper()
	holding.mu.Lock()
	defer holding.mu.Unlock()
	if holding.n == 0 {
		dir := os.Getenv("FPDEDUP_SERVICES_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		f, err := os.OpenFile(filepath.Join(dir, "reconcile-tests.lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatalf("the servers' lock: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("the servers' lock: %v", err)
		}
		holding.f = f
	}
	holding.n++
	t.Cleanup(func() {
		holding.mu.Lock()
		defer holding.mu.Unlock()
		if holding.n--; holding.n == 0 {
			holding.f.Close() // (closing the file releases its lock)
			holding.f = nil
		}
	})
}
