package reconciletest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replica is a cluster node the test started as a replica of one of
// the shared cluster's masters.
type Replica struct {
	addr, master string
	id           string
	node, mnode  *redis.Client
}

// StartReplica starts a cluster node on a free port, makes it a replica of
// master and waits for its link; the test's cleanup gives the slots back
// to master and removes the node from the cluster. It loads the RedisBloom
// module when the cluster's nodes do (RedisBloomModule): a replica without
// it cannot load its master's filters.
func StartReplica(t *testing.T, master string) *Replica {
	t.Helper()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}
	if mod := RedisBloomModule(t); mod != "" {
		args = append(args, "--loadmodule", mod)
	}
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rp := &Replica{addr: fmt.Sprintf("127.0.0.1:%d", port), master: master}
	rp.node, rp.mnode = NodeClient(rp.addr), NodeClient(master)
	t.Cleanup(func() {
		rp.remove(t)
		cmd.Process.Kill()
		cmd.Wait()
		rp.node.Close()
		rp.mnode.Close()
	})
	MustWait(t, "the replica answers", func() bool { return rp.node.Ping(ctx).Err() == nil })
	rp.id = rp.node.ClusterMyID(ctx).Val()
	masterID := rp.mnode.ClusterMyID(ctx).Val()
	// The master sends its first sync at once, not after the default 5 s.
	rp.mnode.ConfigSet(ctx, "repl-diskless-sync-delay", "0")
	host, mport, _ := net.SplitHostPort(master)
	rp.node.ClusterMeet(ctx, host, mport)
	MustWait(t, "the replica knows its master", func() bool {
		return strings.Contains(rp.node.ClusterNodes(ctx).Val(), masterID+" ")
	})
	if err := rp.node.Do(ctx, "CLUSTER", "REPLICATE", masterID).Err(); err != nil {
		t.Fatal(err)
	}
	MustWait(t, "the replica's link is up", func() bool {
		return strings.Contains(rp.node.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	// And every master knows it as the master's replica (its handshake
	// done): a replica that takes over before is a node they do not know.
	for _, seed := range ClusterSeeds(t) {
		n := NodeClient(seed)
		MustWait(t, seed+" knows the replica", func() bool {
			for _, l := range strings.Split(n.ClusterNodes(ctx).Val(), "\n") {
				if f := strings.Fields(l); len(f) > 3 && f[0] == rp.id && strings.Contains(f[2], "slave") && f[3] == masterID {
					return true
				}
			}
			return false
		})
		n.Close()
	}
	return rp
}

// CaughtUp waits until the replica has everything the master wrote so
// far: its replication offset at the master's. (WAIT would not do: it
// waits for the writes of its own connection, and this one wrote none, so
// it answered at once while the test's writes, sent on other connections,
// were still on their way: a replica then took over without them.)
func (rp *Replica) CaughtUp(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	target, ok := replOffset(rp.mnode.Info(ctx, "replication").Val(), "master_repl_offset")
	if !ok {
		t.Fatalf("no master_repl_offset in %s's INFO replication", rp.master)
	}
	MustWait(t, "the replica catches up", func() bool {
		got, ok := replOffset(rp.node.Info(ctx, "replication").Val(), "slave_repl_offset")
		return ok && got >= target
	})
}

// replOffset is the offset named field gives in an INFO replication.
func replOffset(info, field string) (int64, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func (rp *Replica) Role(t *testing.T) string {
	v, err := rp.node.Do(context.Background(), "ROLE").Slice()
	if err != nil || len(v) == 0 {
		t.Fatalf("ROLE of %s: %v", rp.addr, err)
	}
	return fmt.Sprint(v[0])
}

// TakeOver makes the replica the master of its master's slots.
func (rp *Replica) TakeOver(t *testing.T) {
	t.Helper()
	if err := rp.node.Do(context.Background(), "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatal(err)
	}
	MustWait(t, "the replica takes over", func() bool { return rp.Role(t) == "master" })
}

// Settled waits until every node of the cluster, the replica too, says
// the cluster is ok: after a takeover the old master goes through a state
// "fail" while it learns that it follows the replica, and a run started
// then refuses the cluster (rightly: not whole).
func (rp *Replica) Settled(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, addr := range append(ClusterSeeds(t), rp.addr) {
		n := NodeClient(addr)
		MustWait(t, addr+" says the cluster is ok", func() bool {
			return strings.Contains(n.ClusterInfo(ctx).Val(), "cluster_state:ok")
		})
		n.Close()
	}
}

// remove gives the slots back to the first master (a graceful CLUSTER
// FAILOVER from it, now a replica) and makes every master forget the node.
func (rp *Replica) remove(t *testing.T) {
	ctx := context.Background()
	if rp.Role(t) == "master" {
		MustWait(t, "the old master follows the new one", func() bool {
			return strings.Contains(rp.mnode.Info(ctx, "replication").Val(), "master_link_status:up")
		})
		// A manual failover gives up after 5 s when the masters' votes do
		// not come (a takeover a moment before, the cluster settling):
		// asked again until it happens.
		isMaster := func() bool {
			v, err := rp.mnode.Do(ctx, "ROLE").Slice()
			return err == nil && len(v) > 0 && v[0] == "master"
		}
		MustWait(t, "the old master is master again", func() bool {
			if err := rp.mnode.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil && !strings.Contains(err.Error(), "master") {
				t.Logf("CLUSTER FAILOVER on %s: %v", rp.master, err)
			}
			return WaitFor(8*time.Second, isMaster)
		})
	}
	rp.mnode.ConfigSet(ctx, "repl-diskless-sync-delay", "5")
	rp.node.Do(ctx, "SHUTDOWN", "NOSAVE")
	for _, seed := range ClusterSeeds(t) {
		n := NodeClient(seed)
		n.ClusterForget(ctx, rp.id)
		MustWait(t, "the masters see the cluster whole", func() bool {
			info := n.ClusterInfo(ctx).Val()
			return strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(ClusterSeeds(t))))
		})
		n.Close()
	}
}

// MustWait waits up to a minute for cond, or fails the test.
func MustWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !WaitFor(time.Minute, cond) {
		t.Fatalf("waited a minute for this, in vain: %s", what)
	}
}

// RedisBloomModule is the module the test servers load
// (scripts/services/redisbloom-module.sh says where it is), "" if none.
func RedisBloomModule(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(RepoRoot(t), "scripts", "services", "redisbloom-module.sh")).Output()
	if err != nil {
		t.Fatalf("redisbloom-module.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}
