package reconciletest

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The servers of scripts/services are one set for all of reconcile's test
// packages, which go test runs side by side, and the tests flush, fill,
// kill and restart them (databases and tables are shared between tests
// that, in one package, never ran at once). A test that asks for a server
// holds them all until it ends: an exclusive lock on a file beside their
// pidfiles, taken once a process and held while any of its tests uses
// them, so that the tests that use servers still run one at a time, as
// when they were one package, while the others run beside them.
var holding struct {
	mu sync.Mutex
	n  int      // tests of this process holding the servers (a test and its subtests)
	f  *os.File // the locked file, while n > 0
}

// hold holds the servers for t until it ends.
func hold(t *testing.T) {
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
