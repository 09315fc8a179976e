package etcdkv

// Tests against real etcd, never mocks. The members come from the
// environment, as scripts/services/with-services.sh sets it:
//
//	FPDEDUP_ETCD=127.0.0.1:2391                   a single member
//	FPDEDUP_ETCD_CLUSTER=127.0.0.1:2393,…:2395,…:2397   a 3-member cluster
//	FPDEDUP_TEST_KILL=1        the tests may kill and restart members
//	FPDEDUP_SERVICES_DIR=…     where etcd-up.sh keeps their pidfiles
//
// Without them the tests skip and say so; with CI set they fail.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/internal/serverlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func need(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		msg := fmt.Sprintf("%s is not set: no %s to test against (run under scripts/services/with-services.sh)", env, what)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The etcd servers are shared with reconcile's other test packages,
	// which compact, kill and restart them: one test at a time across
	// packages (this package's use etcd alone: etcd's lock only).
	serverlock.HoldEtcd(t)
	return v
}

// raceBuild: the tests run under -race (race_test.go).
var raceBuild bool

// plainOnly skips a test under -race whose time goes to the servers and
// whose code paths other tests race; CI's plain step runs it.
func plainOnly(t *testing.T, why string) {
	t.Helper()
	if raceBuild {
		t.Skip("under -race: " + why + "; the plain run tests it")
	}
}

func single(t testing.TB) []string { return strings.Split(need(t, "FPDEDUP_ETCD", "etcd"), ",") }

func cluster(t testing.TB) []string {
	return strings.Split(need(t, "FPDEDUP_ETCD_CLUSTER", "3-member etcd cluster"), ",")
}

func needKill(t testing.TB) string {
	t.Helper()
	need(t, "FPDEDUP_TEST_KILL", "permission to kill etcd members")
	return need(t, "FPDEDUP_SERVICES_DIR", "pidfile directory")
}

// dial connects the package's client to endpoints, closed at the end.
func dial(t testing.TB, eps []string, prefix string, tune func(*Options)) *Client {
	t.Helper()
	o := Options{Endpoints: eps, Prefix: prefix, Timeout: 10 * time.Second}
	if tune != nil {
		tune(&o)
	}
	c, err := Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// raw is a bare clientv3 client, for setting up and checking behind the
// package's back.
func raw(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix is a prefix of the test's own, deleted at the end.
func testPrefix(t testing.TB, c *clientv3.Client) string {
	p := fmt.Sprintf("/fpdedup-test/%s-%08x/sha256/", strings.ReplaceAll(t.Name(), "/", "_"), rand.Uint32())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c.Delete(ctx, p, clientv3.WithPrefix())
	})
	return p
}

// digest is the SHA-256 of "u<i>:d<i>:<ts>", as the online side keys it.
func digest(i int) [32]byte {
	return sha256.Sum256(fmt.Appendf(nil, "u%d:d%d:%d", i, i%97, 1714579200000+i))
}

// putAll writes kvs with plain puts, 128 to a transaction.
func putAll(t testing.TB, c *clientv3.Client, kvs map[string]string, opts ...clientv3.OpOption) {
	t.Helper()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := c.Txn(context.Background()).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
	}
	for k, v := range kvs {
		ops = append(ops, clientv3.OpPut(k, v, opts...))
		if len(ops) == 128 {
			flush()
		}
	}
	flush()
}

// memberPID is the PID in etcd-up.sh's pidfile for the member at addr.
func memberPID(t testing.TB, dir, addr string) int {
	t.Helper()
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

// killMember kills the member at addr (SIGKILL, by its pidfile) and waits
// until it is gone; restartMembers brings it back.
func killMember(t testing.TB, dir, addr string) {
	t.Helper()
	pid := memberPID(t, dir, addr)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing etcd %s (pid %d): %v", addr, pid, err)
	}
	for i := 0; i < 3000; i++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil || zombie(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("etcd %d did not die", pid)
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	return end >= 0 && strings.HasPrefix(s[end+1:], " Z")
}

// restartMembers starts the missing members of eps again with the
// project's script: they rejoin with the data they had committed.
func restartMembers(t testing.TB, dir string, eps []string) {
	t.Helper()
	args := []string{filepath.Join(repoRoot(t), "scripts", "services", "etcd-up.sh")}
	for _, e := range eps {
		args = append(args, e[strings.LastIndex(e, ":")+1:])
	}
	cmd := exec.Command("bash", args...)
	cmd.Env = append(os.Environ(), "SERVICES_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restarting etcd %v: %v\n%s", eps, err, out)
	}
}

// leader is the address of the cluster's leader.
func leader(t testing.TB, c *clientv3.Client, eps []string) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		for _, e := range eps {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := c.Status(ctx, e)
			cancel()
			if err == nil && st.Leader == st.Header.MemberId {
				return e
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no leader")
	return ""
}

func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = up
	}
}

func withPrefix() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}
