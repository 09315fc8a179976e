package redisconn

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A Cluster node as CLUSTER NODES describes it: its ID, its address, its
// flags (myself, master, slave, fail, ...), the master it replicates
// (replicas), and the slots it serves (masters).
type clusterNode struct {
	id, addr, flags, master string
	slots                   [][2]int // inclusive ranges
}

// parseClusterNodes reads CLUSTER NODES' lines: "ID HOST:PORT@CPORT[,NAME]
// FLAGS MASTER PING PONG EPOCH LINK SLOT...", a slot a number or a range
// A-B (and [..] for one migrating, which the node still serves until it
// is done: not counted).
func parseClusterNodes(s string) []clusterNode {
	var nodes []clusterNode
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := clusterNode{id: f[0], addr: f[1], flags: f[2], master: f[3]}
		if at := strings.IndexAny(n.addr, "@,"); at >= 0 {
			n.addr = n.addr[:at]
		}
		for _, sl := range f[8:] {
			lo, hi, isRange := strings.Cut(sl, "-")
			a, err := strconv.Atoi(lo)
			if err != nil {
				continue
			}
			b := a
			if isRange {
				if b, err = strconv.Atoi(hi); err != nil {
					continue
				}
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes
}

func (n clusterNode) has(flag string) bool { return strings.Contains(","+n.flags+",", ","+flag+",") }

func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// down is a node the Cluster has given up on, or cannot reach.
func (n clusterNode) down() bool {
	return n.has("fail") || n.has("noaddr") || n.addr == "" || strings.HasPrefix(n.addr, ":")
}

// myself is the node that answered CLUSTER NODES.
func myself(nodes []clusterNode) (clusterNode, bool) {
	for _, n := range nodes {
		if n.has("myself") {
			return n, true
		}
	}
	return clusterNode{}, false
}

// ClusterReplicas is how many replicas, not marked failed, the Cluster's
// configuration as the node conn is on sees it gives that node; false
// when the server is not in a Cluster.
func ClusterReplicas(ctx context.Context, conn *redis.Conn) (int64, bool) {
	out, err := conn.ClusterNodes(ctx).Result()
	if err != nil {
		return 0, false
	}
	nodes := parseClusterNodes(out)
	self, ok := myself(nodes)
	if !ok {
		return 0, false
	}
	var n int64
	for _, x := range nodes {
		if x.master == self.id && !x.down() {
			n++
		}
	}
	return n, true
}

// SlotTakenError is a key's slot that another node than the one a write
// ran on serves in its own view: a failover took it over (or is taking it
// over), and the write may be lost with the old master's data.
type SlotTakenError struct {
	Key, Node string
	By        string // the node that serves it, "" when the write's node said it does not
	Slot      int64
}

func (e *SlotTakenError) Error() string {
	if e.By == "" { // the node the write ran on serves it no more
		return fmt.Sprintf("node %s, where the write ran, no longer serves slot %d (of %q): a failover took it over", e.Node, e.Slot, e.Key)
	}
	return fmt.Sprintf("node %s serves slot %d (of %q) in its own view now, not %s, where the write ran: a failover took it over", e.By, e.Slot, e.Key, e.Node)
}

// SlotOwned checks, after a write to key on conn's node of a Cluster,
// that no other node serves key's slot in its own view: every node the
// Cluster lists (but those it has given up on) is asked. A replica that
// takes its master's slots over (CLUSTER FAILOVER, TAKEOVER too) claims
// them in its own view as it stops replicating, before any other node
// hears of it: a write its old master took after that is lost, though
// the old master, told late, still serves the slot and answers reads of
// it. A node that cannot be asked is an error: it might be the one. One
// server (not a Cluster): nil.
func (r *Client) SlotOwned(ctx context.Context, conn *redis.Conn, key string) error {
	if r.CC == nil {
		return nil
	}
	slot, err := conn.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return err
	}
	out, err := conn.ClusterNodes(ctx).Result()
	if err != nil {
		return err
	}
	nodes := parseClusterNodes(out)
	self, ok := myself(nodes)
	if !ok {
		return fmt.Errorf("CLUSTER NODES of the node %s was written on names no node as itself", key)
	}
	if !self.serves(int(slot)) {
		return &SlotTakenError{Key: key, Node: self.addr, Slot: slot}
	}
	for _, n := range nodes {
		if n.id == self.id || n.down() {
			continue
		}
		me, ok, err := r.selfView(ctx, n)
		if err != nil {
			return fmt.Errorf("asking node %s which node serves slot %d (of %q): %w", n.addr, slot, key, err)
		}
		if ok && me.id != self.id && me.serves(int(slot)) {
			return &SlotTakenError{Key: key, Node: self.addr, By: n.addr, Slot: slot}
		}
	}
	return nil
}

// selfView is node n as it describes itself (the myself line of its
// CLUSTER NODES), asked on a connection of its own with the Cluster
// client's options; false for a node in handshake that does not answer
// (met, not known yet: gone, perhaps).
func (r *Client) selfView(ctx context.Context, n clusterNode) (clusterNode, bool, error) {
	opt := r.CC.Options()
	c := redis.NewClient(&redis.Options{Addr: n.addr, Username: opt.Username, Password: opt.Password, Protocol: opt.Protocol,
		DisableIdentity: true, MaintNotificationsConfig: opt.MaintNotificationsConfig, Dialer: opt.Dialer, TLSConfig: opt.TLSConfig,
		DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout, PoolSize: 1, MaxRetries: 1})
	defer c.Close()
	view, err := c.ClusterNodes(ctx).Result()
	if err != nil && n.has("handshake") {
		return clusterNode{}, false, nil
	}
	if err != nil {
		return clusterNode{}, false, err
	}
	me, ok := myself(parseClusterNodes(view))
	return me, ok, nil
}

// SlotOwners says which node serves which slots, each node as it sees
// itself (asked every node the Cluster lists, but those it has given up
// on): equal before and after a run's writes, no failover moved a slot
// meanwhile. A failover between makes the writes to the slots that moved
// uncertain whatever a read-back says: the old master, told late, takes
// writes and answers reads that its successor never has. "" for one
// server.
func (r *Client) SlotOwners(ctx context.Context) (string, error) {
	if r.CC == nil {
		return "", nil
	}
	out, err := r.CC.ClusterNodes(ctx).Result()
	if err != nil {
		return "", err
	}
	var owners []string
	for _, n := range parseClusterNodes(out) {
		if n.down() {
			continue
		}
		me, ok, err := r.selfView(ctx, n)
		if err != nil {
			return "", fmt.Errorf("asking node %s which slots it serves: %w", n.addr, err)
		}
		if ok && len(me.slots) > 0 {
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s:", me.addr, me.id)
			for _, sl := range me.slots {
				fmt.Fprintf(&b, " %d-%d", sl[0], sl[1])
			}
			owners = append(owners, b.String())
		}
	}
	slices.Sort(owners)
	owners = slices.Compact(owners)
	return strings.Join(owners, "; "), nil
}
