package redisconn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
)

// go-redis's own log lines (a removed replica's dials) are dropped.
func TestMain(m *testing.M) { reconciletest.Main(m, redisconn.QuietRedisLogs) }

// TestSlotOwned, in the real 3-master Cluster: a key's slot is its
// master's while no failover happened, and the slots' owners (SlotOwners)
// do not change; once a replica has taken the master's slots over
// (CLUSTER FAILOVER TAKEOVER) they do, and a write on the old master's
// connection is said lost, whether the old master has heard of the
// takeover yet or not; a key of another master's slot on that connection
// too.
func TestSlotOwned(t *testing.T) {
	reconciletest.NeedKill(t)
	reconciletest.PlainOnly(t, "a replica syncing and taking over; no goroutine of ours")
	ctx := context.Background()
	seeds := reconciletest.ClusterSeeds(t)
	reconciletest.ClusterClient(t) // flushed, the cluster ok
	replica := reconciletest.StartReplica(t, seeds[2])
	replica.CaughtUp(t)
	c, err := redisconn.Open(ctx, redisconn.Server{Addr: seeds[0], Seeds: seeds, Cluster: true}, &online.Config{Target: "the test's cluster", Timeout: 5 * time.Second, Conns: 1, Backoff: time.Millisecond,
		Plan: memplan.Reconcile(memplan.ReconcileJob{Mem: 256 << 20})})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A key of each master: {a}, {b}, ... until all three are found.
	keys := map[string]string{}
	for i := 0; len(keys) < 3 && i < 1000; i++ {
		k := "so:{" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "}"
		m, err := c.CC.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keys[m.Options().Addr]; !ok {
			keys[m.Options().Addr] = k
		}
	}
	if len(keys) != 3 || keys[seeds[2]] == "" {
		t.Fatalf("keys by master: %v", keys)
	}
	old := reconciletest.NodeClient(seeds[2])
	defer old.Close()
	conn := old.Conn()
	defer conn.Close()
	if err := c.SlotOwned(ctx, conn, keys[seeds[2]]); err != nil {
		t.Fatalf("before any failover, %s's own key: %v", seeds[2], err)
	}
	var taken *redisconn.SlotTakenError
	if err := c.SlotOwned(ctx, conn, keys[seeds[0]]); !errors.As(err, &taken) {
		t.Fatalf("%s asked of a key of %s's slot: %v, want a SlotTakenError", seeds[2], seeds[0], err)
	}
	before, err := c.SlotOwners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.SlotOwners(ctx); err != nil || again != before {
		t.Fatalf("the slots' owners asked twice, no failover between: %q, then %q (%v)", before, again, err)
	}
	replica.TakeOver(t)
	if after, err := c.SlotOwners(ctx); err != nil || after == before {
		t.Errorf("the slots' owners after the takeover: %q (%v), as before", after, err)
	}
	err = c.SlotOwned(ctx, conn, keys[seeds[2]])
	if !errors.As(err, &taken) {
		t.Fatalf("after the takeover, the old master's key on its connection: %v, want a SlotTakenError", err)
	}
	t.Logf("after the takeover: %v", err)
}
