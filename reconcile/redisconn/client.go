package redisconn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Client is a connection to a Redis server or a Redis Cluster, every
// connection guarded (respguard.go): no reply makes it allocate more than
// its share of the memory budget, whatever its header says. C is
// go-redis's client; CC the same as a Cluster client (nil for one
// server), whose pipelines split a batch by node and follow MOVED and ASK;
// Raw, on one server, the pool of prepared-byte pipelines for the hot
// writes. Safe for concurrent use, as go-redis's clients are.
type Client struct {
	C       redis.UniversalClient
	CC      *redis.ClusterClient // a Redis Cluster; nil for one server
	Raw     *Pool                // the writes to one server; nil for a Cluster
	Streams int                  // masters a scan may read at once (ReplyBudget)
	srv     Server
}

// Open connects to srv with o's password, timeouts and connections, pings
// it (retried as o says) and checks its topology: a Cluster must be whole,
// every slot served, and a single server must not be a node of one.
// Errors name the server by o.Target.
func Open(ctx context.Context, srv Server, o *online.Config) (*Client, error) {
	return OpenBounded(ctx, srv, o, Bounds{})
}

// OpenBounded is Open for a client whose replies b widens the guard's
// bounds for.
func OpenBounded(ctx context.Context, srv Server, o *online.Config, b Bounds) (*Client, error) {
	r := &Client{srv: srv}
	r.Streams = o.Plan.ReplyStreams
	chk := b.checker(o.Plan.MaxReply)
	dial := dialGuarded(min(o.Timeout, 5*time.Second), chk, o.Hangup)
	if srv.Cluster {
		r.CC = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    srv.Seeds,
			Username:                 srv.User,
			Password:                 o.Password,
			Protocol:                 2,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			DialTimeout:              min(o.Timeout, 5*time.Second),
			ReadTimeout:              o.Timeout,
			WriteTimeout:             o.Timeout,
			PoolSize:                 o.Conns + 2, // per node
			MaxRetries:               1,
			MaxRedirects:             8, // MOVED/ASK while slots migrate
			Dialer:                   dial,
		})
		r.C = r.CC
	} else {
		r.C = redis.NewClient(&redis.Options{
			Addr:            srv.Addr,
			Username:        srv.User,
			Password:        o.Password,
			DB:              srv.DB,
			Protocol:        2,
			DisableIdentity: true,
			// Redis 7.0 does not know CLIENT MAINT_NOTIFICATIONS.
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			DialTimeout:              min(o.Timeout, 5*time.Second),
			ReadTimeout:              o.Timeout,
			WriteTimeout:             o.Timeout,
			PoolSize:                 o.Conns + 2,
			MaxRetries:               1, // ours (online.Config.Retry) are on top, with their own backoff
			Dialer:                   dial,
		})
		r.Raw = newPool(srv.Addr, srv.User, o.Password, srv.DB, o.Timeout, o.Conns, chk, o.Hangup)
	}
	c := r.C
	err := o.Retry(ctx, Retryable, "reaching "+o.Target, nil, func() error { return c.Ping(ctx).Err() })
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("cannot reach %s: %w", o.Target, err)
	}
	if err := r.checkTopology(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", o.Target, err)
	}
	return r, nil
}

// QuietRedisLogs drops go-redis's own log lines ("failed to dial after 5
// attempts" …), which it prints to stderr through one logger for the
// whole process: what failed reaches the caller as Run's error, once.
// Run never changes that logger itself (a program that embeds this
// package may want those lines, or log elsewhere); a command line whose
// stderr is for its summary and its one error calls this once, before
// Run. Not safe to call while go-redis clients are in use.
func QuietRedisLogs() { redis.SetLogger(quietLog{}) }

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// Close closes every connection.
func (r *Client) Close() error {
	if r.Raw != nil {
		r.Raw.close()
	}
	return r.C.Close()
}

// Retryable: see the package's Retryable.
func (r *Client) Retryable(err error) bool { return Retryable(err) }

// EachNode runs fn on the server, or on every master of a cluster at once.
func (r *Client) EachNode(ctx context.Context, fn func(ctx context.Context, node *redis.Client) error) error {
	if r.CC == nil {
		return fn(ctx, r.C.(*redis.Client))
	}
	return r.CC.ForEachMaster(ctx, fn)
}

// checkTopology makes sure a cluster is whole (every slot served), and
// that a single server is not a node of a cluster: a SCAN there would see
// only the keys of its own slots, and call all the others missing.
func (r *Client) checkTopology(ctx context.Context) error {
	if r.CC == nil {
		info, err := r.C.Info(ctx, "cluster").Result()
		var re *ReplyError
		if errors.As(err, &re) {
			return err // a broken server; an error reply (INFO refused) is let be
		}
		if err == nil && strings.Contains(info, "cluster_enabled:1") {
			return fmt.Errorf("%s is a node of a Redis Cluster, where a SCAN sees only the keys of the node's own slots: add cluster=1 to the URL (or list several seed addresses, host1:port1,host2:port2) to read every master", r.srv.Addr)
		}
		return nil
	}
	info, err := r.CC.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_state:"); ok && v != "ok" {
			return fmt.Errorf("the cluster's state is %q, not ok: a master is down or slots are not served", v)
		}
	}
	_, _, err = r.SlotMap(ctx)
	return err
}

// SlotMap describes which master serves which slots (CLUSTER SLOTS), as a
// string to compare, and lists the masters; every one of the 16384 slots
// must be served.
func (r *Client) SlotMap(ctx context.Context) (string, []string, error) {
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS answers on every version we read.
	slots, err := r.CC.ClusterSlots(ctx).Result()
	if err != nil {
		return "", nil, err
	}
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	var b strings.Builder
	var masters []string
	next := 0
	for _, sl := range slots {
		if len(sl.Nodes) == 0 {
			continue
		}
		if sl.Start != next {
			return "", nil, fmt.Errorf("slots %d-%d are served by no master: the cluster is not whole", next, sl.Start-1)
		}
		next = sl.End + 1
		m := sl.Nodes[0]
		fmt.Fprintf(&b, "%d-%d=%s/%s ", sl.Start, sl.End, m.Addr, m.ID)
		if !slices.Contains(masters, m.Addr) {
			masters = append(masters, m.Addr)
		}
	}
	if next != 16384 {
		return "", nil, fmt.Errorf("slots %d-16383 are served by no master: the cluster is not whole", next)
	}
	slices.Sort(masters)
	return b.String(), masters, nil
}
