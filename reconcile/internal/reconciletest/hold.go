package reconciletest

import (
	"testing"

	"github.com/fpdedup/fpdedup/internal/serverlock"
)

// hold holds the servers but etcd for t until it ends (serverlock:
// reconcile's test packages, etcdkv's and the CLI's fault loop take turns
// with them).
func hold(t *testing.T) {
	t.Helper()
	if etcdOnly {
		t.Fatal("BUG: a test of a package of etcd alone (EtcdOnly) uses other servers: it would run beside their tests")
	}
	serverlock.Hold(t)
}

// holdEtcd holds the etcd servers for t until it ends: after the other
// servers, unless the package tests etcd alone (serverlock's order).
func holdEtcd(t *testing.T) {
	t.Helper()
	if !etcdOnly {
		serverlock.Hold(t)
	}
	serverlock.HoldEtcd(t)
}

// etcdOnly: the package's tests use etcd alone (EtcdOnly).
var etcdOnly bool

// EtcdOnly says, from a test package's TestMain, that its tests use the
// etcd servers alone: they hold etcd's lock only, and run beside the
// tests of Redis and MariaDB.
func EtcdOnly() { etcdOnly = true }
