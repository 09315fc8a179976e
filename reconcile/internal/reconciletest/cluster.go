package reconciletest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ClusterSeeds are the seed addresses of the test's Redis Cluster
// (FPDEDUP_REDIS_CLUSTER, set by scripts/services/with-services.sh).
func ClusterSeeds(t *testing.T) []string {
	t.Helper()
	s := os.Getenv("FPDEDUP_REDIS_CLUSTER")
	if s == "" {
		t.Skip("FPDEDUP_REDIS_CLUSTER is not set: no Redis Cluster to test against (run under scripts/services/with-services.sh)")
	}
	hold(t)
	return strings.Split(s, ",")
}

// ClusterClient returns a client of the cluster, every master flushed
// (now and at the end of the test).
func ClusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterSeeds(t), Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	ctx := context.Background()
	if !WaitFor(30*time.Second, func() bool {
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}) {
		t.Fatalf("the cluster at %v is not ok", ClusterSeeds(t))
	}
	flush := func() error {
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushDB(ctx).Err() })
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flush(); c.Close() })
	return c
}

// ClusterURL is the --online URL of the cluster with query.
func ClusterURL(t *testing.T, query string) string {
	return "redis://" + strings.Join(ClusterSeeds(t), ",") + "/?" + query
}

// RestartCluster starts the killed nodes again with the project's script
// and waits for the cluster to be whole.
func RestartCluster(t *testing.T) {
	t.Helper()
	var ports []string
	for _, s := range ClusterSeeds(t) {
		ports = append(ports, s[strings.LastIndex(s, ":")+1:])
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(RepoRoot(t), "scripts", "services", "redis-cluster-up.sh")}, ports...)...)
	if dir := os.Getenv("FPDEDUP_SERVICES_DIR"); dir != "" {
		cmd.Env = append(os.Environ(), "SERVICES_DIR="+dir)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restarting the cluster: %v\n%s", err, out)
	}
}

// NodePID is the process id of the Redis server at addr (INFO server).
// NodeClient is a client of one cluster node by itself (no cluster
// routing), for asking it about itself.
func NodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
}

func NodePID(t *testing.T, addr string) int {
	t.Helper()
	node := NodeClient(addr)
	defer node.Close()
	info, err := node.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil && pid > 1 {
				return pid
			}
		}
	}
	t.Fatalf("no process_id for %s", addr)
	return 0
}
