package reconciletest

import (
	"testing"

	"github.com/fpdedup/fpdedup/internal/serverlock"
)

// hold holds the servers for t until it ends (serverlock: reconcile's
// test packages, etcdkv's and the CLI's fault loop take turns with them).
func hold(t *testing.T) {
	t.Helper()
	serverlock.Hold(t)
}
