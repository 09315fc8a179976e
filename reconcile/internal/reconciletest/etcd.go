package reconciletest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// needEtcd is $env, the members of an etcd of scripts/services, holding
// the servers for t; without it the test skips, or fails with CI set
// (CI runs under with-services.sh, so a missing etcd there is a fault).
func needEtcd(t *testing.T, env, what string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		msg := fmt.Sprintf("%s is not set: no %s to test against (run under scripts/services/with-services.sh)", env, what)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	holdEtcd(t)
	return strings.Split(v, ",")
}

// Etcd is the single etcd member's endpoint list ($FPDEDUP_ETCD).
func Etcd(t *testing.T) []string { return needEtcd(t, "FPDEDUP_ETCD", "etcd") }

// EtcdCluster is the 3-member etcd cluster's endpoints
// ($FPDEDUP_ETCD_CLUSTER); NeedKill too, since its tests kill members.
func EtcdCluster(t *testing.T) []string {
	t.Helper()
	eps := needEtcd(t, "FPDEDUP_ETCD_CLUSTER", "3-member etcd cluster")
	NeedKill(t)
	return eps
}

// EtcdClient is a bare clientv3 client on eps, for setting up and checking
// behind fpdedup's back; closed at the end.
func EtcdClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// EtcdPrefix is a prefix of the test's own, deleted at the end.
func EtcdPrefix(t *testing.T, c *clientv3.Client) string {
	p := fmt.Sprintf("/fpdedup-test/%s-%d/sha256/", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c.Delete(ctx, p, clientv3.WithPrefix())
	})
	return p
}

// EtcdURL is the --online URL of prefix on eps, with more parameters.
func EtcdURL(eps []string, prefix, more string) string {
	u := "etcd://" + strings.Join(eps, ",") + "/?prefix=" + url.QueryEscape(prefix)
	if more != "" {
		u += "&" + more
	}
	return u
}

// EtcdPut writes keys[i] = vals[i] (vals nil: "1"), 100 to a transaction.
func EtcdPut(t *testing.T, c *clientv3.Client, keys, vals []string, opts ...clientv3.OpOption) {
	t.Helper()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
	}
	for i, k := range keys {
		v := "1"
		if vals != nil {
			v = vals[i]
		}
		ops = append(ops, clientv3.OpPut(k, v, opts...))
		if len(ops) == 100 {
			flush()
		}
	}
	flush()
}

// EtcdGet reads every key under prefix: key to its value and version.
func EtcdGet(t *testing.T, c *clientv3.Client, prefix string) map[string]EtcdKV {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]EtcdKV, len(r.Kvs))
	for _, kv := range r.Kvs {
		m[string(kv.Key)] = EtcdKV{Value: string(kv.Value), Version: kv.Version}
	}
	return m
}

// EtcdKV is a key's value and version (1: written once).
type EtcdKV struct {
	Value   string
	Version int64
}

// etcdPID is the PID in etcd-up.sh's pidfile for the member at addr.
func etcdPID(t *testing.T, addr string) int {
	t.Helper()
	dir := os.Getenv("FPDEDUP_SERVICES_DIR")
	if dir == "" {
		t.Skip("FPDEDUP_SERVICES_DIR is not set: the etcd pidfiles are unknown (scripts/services/with-services.sh sets it)")
	}
	port := addr[strings.LastIndex(addr, ":")+1:]
	b, err := os.ReadFile(filepath.Join(dir, "etcd-"+port, "etcd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 1 {
		t.Fatalf("etcd pidfile for %s: %q", addr, b)
	}
	return pid
}

// EtcdKill kills the member at addr (SIGKILL) and waits until it is gone.
func EtcdKill(t *testing.T, addr string) {
	t.Helper()
	NeedKill(t)
	pid := etcdPID(t, addr)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing etcd %s (pid %d): %v", addr, pid, err)
	}
	if !WaitFor(30*time.Second, func() bool { return !processAlive(pid) }) {
		t.Fatalf("etcd %d did not die", pid)
	}
}

// EtcdRestart starts the members of eps that are not running again with
// the project's script (they rejoin with what they had committed) and
// waits until all answer.
func EtcdRestart(t *testing.T, eps []string) {
	t.Helper()
	args := []string{filepath.Join(RepoRoot(t), "scripts", "services", "etcd-up.sh")}
	for _, e := range eps {
		args = append(args, e[strings.LastIndex(e, ":")+1:])
	}
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "SERVICES_DIR="+os.Getenv("FPDEDUP_SERVICES_DIR"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restarting etcd %v: %v\n%s", eps, err, out)
	}
}

// EtcdLeader is the address of the cluster's leader.
func EtcdLeader(t *testing.T, c *clientv3.Client, eps []string) string {
	t.Helper()
	var leader string
	if !WaitFor(30*time.Second, func() bool {
		for _, e := range eps {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := c.Status(ctx, e)
			cancel()
			if err == nil && st.Leader == st.Header.MemberId {
				leader = e
				return true
			}
		}
		return false
	}) {
		t.Fatal("the etcd cluster has no leader")
	}
	return leader
}

// EtcdCompact writes a key outside every test's prefix, so that the
// current revision is past any read in progress, and compacts up to it:
// a read pinned to an older revision fails with "compacted".
func EtcdCompact(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := c.Put(ctx, "/fpdedup-test-compact-marker", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, p.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	return p.Header.Revision
}
