package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// redisSource reads keys PREFIX<hex> by SCAN, or the members of a set by
// SSCAN; probes with pipelined EXISTS or SMISMEMBER; writes with pipelined
// SET NX (optionally with a TTL) or SADD.
//
// A Redis Cluster (Target.Cluster) is read through go-redis's
// ClusterClient: SCAN runs on the masters at once (ForEachMaster; as many
// as the memory budget allows, replyBudget), their
// pages merged into one stream, and the slot map must be the same before
// and after the scan; a set, SSCAN, SMISMEMBER and SADD go to the master
// owning its slot; EXISTS probes and SET NX writes go in cluster pipelines,
// which split each batch by node and follow MOVED/ASK redirections.
type redisSource struct {
	t       *Target
	c       redis.UniversalClient
	cc      *redis.ClusterClient // a Redis Cluster; nil for one server
	o       *online.Config
	ttl     time.Duration // of the keys Write sets; 0: none
	narrow  int64         // values of each width seen by Read
	full    int64
	samples int
	raw     *respPool // Apply's writes to one server
	streams int       // masters scanned at once (replyBudget)
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

func openRedis(ctx context.Context, t *Target, o *online.Config, ttl time.Duration) (*redisSource, error) {
	r := &redisSource{t: t, o: o, ttl: ttl, samples: o.Samples}
	// Every connection is guarded (respguard.go): no reply makes a client
	// allocate more than maxReply, whatever its header says.
	maxReply, streams := replyBudget(o.Mem)
	r.streams = streams
	dial := dialGuarded(min(o.Timeout, 5*time.Second), maxReply, o.Hangup)
	if t.Cluster {
		r.cc = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                    t.Seeds,
			Username:                 t.User,
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
		r.c = r.cc
	} else {
		r.c = redis.NewClient(&redis.Options{
			Addr:            t.Addr,
			Username:        t.User,
			Password:        o.Password,
			DB:              t.DB,
			Protocol:        2,
			DisableIdentity: true,
			// Redis 7.0 does not know CLIENT MAINT_NOTIFICATIONS.
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			DialTimeout:              min(o.Timeout, 5*time.Second),
			ReadTimeout:              o.Timeout,
			WriteTimeout:             o.Timeout,
			PoolSize:                 o.Conns + 2,
			MaxRetries:               1, // ours (retry) are on top, with their own backoff
			Dialer:                   dial,
		})
		r.raw = newRespPool(t.Addr, t.User, o.Password, t.DB, o.Timeout, o.Conns, maxReply, o.Hangup)
	}
	c := r.c
	err := o.Retry(ctx, redisRetryable, "reaching "+t.Redacted, nil, func() error { return c.Ping(ctx).Err() })
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("cannot reach %s: %w", t.Redacted, err)
	}
	if err := r.checkTopology(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", t.Redacted, err)
	}
	if t.Kind == RedisSet {
		typ, err := c.Type(ctx, t.Set).Result()
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %w", t.Redacted, err)
		}
		if typ != "set" && typ != "none" {
			r.Close()
			return nil, fmt.Errorf("%s: key %q holds a %s, not a set", t.Redacted, t.Set, typ)
		}
	}
	if t.HexDigits == 0 && o.Probe && t.Kind != RedisBloom {
		// A probe must know how the keys are named before it asks for
		// them: 32-digit names asked of a store of 64-digit ones would all
		// be "missing". Look at a few names.
		if err := r.sampleWidth(ctx); err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %w", t.Redacted, err)
		}
	}
	return r, nil
}

// sampleWidth reads a few names (SRANDMEMBER, or SCAN pages until some
// match) to learn their width.
func (r *redisSource) sampleWidth(ctx context.Context) error {
	var names []string
	if r.t.Kind == RedisSet {
		var err error
		if names, err = r.c.SRandMemberN(ctx, r.t.Set, 16).Result(); err != nil {
			return err
		}
	} else {
		var mu sync.Mutex
		err := r.eachNode(ctx, func(ctx context.Context, node *redis.Client) error {
			var cursor uint64
			for i := 0; i < 16; i++ {
				keys, next, err := node.Scan(ctx, cursor, escapeGlob(r.t.Prefix)+"*", 1000).Result()
				if err != nil {
					return err
				}
				mu.Lock()
				for _, k := range keys {
					names = append(names, k[len(r.t.Prefix):])
				}
				enough := len(names) >= 16
				mu.Unlock()
				if cursor = next; cursor == 0 || enough {
					break
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, n := range names {
		if _, ok := online.ParseHex(n); ok {
			if len(n) == 64 {
				r.full++
			} else {
				r.narrow++
			}
		}
	}
	return nil
}

// Retryable: see redisRetryable.
func (r *redisSource) Retryable(err error) bool { return redisRetryable(err) }

func (r *redisSource) Close() error {
	if r.raw != nil {
		r.raw.close()
	}
	return r.c.Close()
}

// eachNode runs fn on the server, or on every master of a cluster at once.
func (r *redisSource) eachNode(ctx context.Context, fn func(ctx context.Context, node *redis.Client) error) error {
	if r.cc == nil {
		return fn(ctx, r.c.(*redis.Client))
	}
	return r.cc.ForEachMaster(ctx, fn)
}

// checkTopology makes sure a cluster is whole (every slot served), and
// that a single server is not a node of a cluster: a SCAN there would see
// only the keys of its own slots, and call all the others missing.
func (r *redisSource) checkTopology(ctx context.Context) error {
	if r.cc == nil {
		info, err := r.c.Info(ctx, "cluster").Result()
		var re *ReplyError
		if errors.As(err, &re) {
			return err // a broken server; an error reply (INFO refused) is let be
		}
		if err == nil && strings.Contains(info, "cluster_enabled:1") {
			return fmt.Errorf("%s is a node of a Redis Cluster, where a SCAN sees only the keys of the node's own slots: add cluster=1 to the URL (or list several seed addresses, host1:port1,host2:port2) to read every master", r.t.Addr)
		}
		return nil
	}
	info, err := r.cc.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_state:"); ok && v != "ok" {
			return fmt.Errorf("the cluster's state is %q, not ok: a master is down or slots are not served", v)
		}
	}
	_, _, err = r.slotMap(ctx)
	return err
}

// slotMap describes which master serves which slots (CLUSTER SLOTS), as a
// string to compare, and lists the masters; every one of the 16384 slots
// must be served.
func (r *redisSource) slotMap(ctx context.Context) (string, []string, error) {
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS answers on every version we read.
	slots, err := r.cc.ClusterSlots(ctx).Result()
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

func (r *redisSource) Sorted() bool { return false }

func (r *redisSource) Wide() (bool, bool) {
	switch {
	case r.t.HexDigits != 0:
		return r.t.HexDigits == 64, true
	case r.o.Probe && r.full == 0:
		return false, true // nothing says otherwise: names of 32 digits
	case r.full > 0 && r.narrow == 0:
		return true, true
	case r.narrow > 0 && r.full == 0:
		return false, true
	}
	return false, false
}

// Read walks the key space (or the set) with SCAN/SSCAN. Pages are parsed
// in this goroutine while the next one is on its way. A page that fails is
// asked again with the same cursor (the cursor is valid across
// connections), with bounded retries and backoff. Each walk is bounded by
// what DBSIZE (SCARD) said before it (scanBound): a cursor that does not
// come back to 0 is a *ScanBoundError, not a run that never ends.
func (r *redisSource) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	st.Expected = -1
	if r.t.Kind == RedisSet {
		// SCARD bounds the scan, and is compared with what it reads.
		var n int64
		err := r.o.Retry(ctx, redisRetryable, "reading "+r.t.Redacted+": SCARD", nil, func() error {
			var err error
			n, err = r.c.SCard(ctx, r.t.Set).Result()
			return err
		})
		if err != nil {
			return fmt.Errorf("reading %s: SCARD: %w", r.t.Redacted, err)
		}
		st.Expected = n
		st.CheckDistinct = func(got int64) string {
			// SSCAN returns every member present for the whole scan at
			// least once; SCARD was taken before it. A difference means
			// the set changed meanwhile (or members are not fingerprints).
			if got != n {
				return fmt.Sprintf("SCARD said %d members before the scan, %d distinct were read: the set changed during the scan?", n, got)
			}
			return ""
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pages := make(chan []string, 4)
	errc := make(chan error, 1)
	var retries atomic.Int64
	defer func() { st.Retries += int(retries.Load()) }()
	// scan walks one cursor: the set's (SSCAN, on whichever node owns it),
	// or one node's key space (SCAN).
	scan := func(ctx context.Context, node *redis.Client, where string) error {
		var cursor uint64
		match := escapeGlob(r.t.Prefix) + "*"
		fail := func(what string, err error) error {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("reading %s: %s%s%w (after %d values; rerun to read again)", r.t.Redacted, where, what, err, st.Values.Load())
		}
		bound := &ScanBoundError{Target: r.t.Redacted, Command: "SSCAN", Counted: "SCARD", Expected: st.Expected, Count: r.t.ScanCount}
		if r.t.Kind == RedisSet {
			bound.Server = r.t.Addr
			if r.cc != nil {
				if m, err := r.cc.MasterForKey(ctx, r.t.Set); err == nil {
					bound.Server = m.Options().Addr
				}
			}
		} else {
			bound.Command, bound.Counted, bound.Server = "SCAN", "DBSIZE", node.Options().Addr
			err := r.o.Retry(ctx, redisRetryable, "reading "+r.t.Redacted+": DBSIZE", &retries, func() error {
				var err error
				bound.Expected, err = node.DBSize(ctx).Result()
				return err
			})
			if err != nil {
				return fail("DBSIZE: ", err)
			}
		}
		bound.MaxValues, bound.MaxCalls = scanBound(bound.Expected, r.t.ScanCount)
		for {
			var keys []string
			var next uint64
			err := r.o.Retry(ctx, redisRetryable, "reading "+r.t.Redacted, &retries, func() error {
				var err error
				if r.t.Kind == RedisSet {
					keys, next, err = r.c.SScan(ctx, r.t.Set, cursor, "", int64(r.t.ScanCount)).Result()
				} else {
					keys, next, err = node.Scan(ctx, cursor, match, int64(r.t.ScanCount)).Result()
				}
				return err
			})
			if err != nil {
				return fail("", err)
			}
			bound.Calls++
			bound.Values += int64(len(keys))
			if len(keys) > 0 {
				select {
				case pages <- keys:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
			if bound.Values > bound.MaxValues || bound.Calls > bound.MaxCalls {
				return bound
			}
		}
	}
	go func() {
		defer close(pages)
		if r.cc == nil || r.t.Kind == RedisSet {
			var node *redis.Client
			if r.cc == nil {
				node = r.c.(*redis.Client)
			}
			errc <- scan(ctx, node, "")
			return
		}
		errc <- r.scanCluster(ctx, cancel, scan, &st.Masters)
	}()
	buf := make([]fpstore.Fingerprint, 0, 8192)
	plen := len(r.t.Prefix)
	for keys := range pages {
		if err := st.Wait(ctx, len(keys)); err != nil {
			return err
		}
		st.Values.Add(int64(len(keys)))
		for _, k := range keys {
			h := k[min(plen, len(k)):]
			fp, ok := online.ParseHex(h)
			if !ok || !strings.HasPrefix(k, r.t.Prefix) {
				st.AddBad(k, r.samples)
				continue
			}
			if len(h) == 64 {
				r.full++
			} else {
				r.narrow++
			}
			if buf = append(buf, fp); len(buf) == cap(buf) {
				if err := emit(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	if err := <-errc; err != nil {
		return err // the producer's error, or the cause of a cancelled context
	}
	st.Narrow, st.Full = r.narrow, r.full
	if len(buf) > 0 {
		return emit(buf)
	}
	return nil
}

// scanCluster runs scan on every master of the cluster at once; the first
// that fails stops the others. The masters scanned must be the masters of
// the slot map before and after: a failover, a master added or removed or
// slots moved during the scan could have hidden keys from it (SCAN runs
// per node), so that is an error, never a short count.
func (r *redisSource) scanCluster(ctx context.Context, cancel context.CancelCauseFunc, scan func(context.Context, *redis.Client, string) error, done *[]string) error {
	before, masters, err := r.slotMap(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", r.t.Redacted, err)
	}
	var mu sync.Mutex
	var scanned []string
	var first error
	// At most r.streams masters at once: the replies in flight stay within
	// the memory budget (replyBudget).
	slots := make(chan struct{}, r.streams)
	err = r.cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		mu.Lock()
		scanned = append(scanned, addr)
		mu.Unlock()
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		err := scan(ctx, node, "master "+addr+": ")
		<-slots
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
			cancel(err)
		}
		return err
	})
	if first != nil {
		return first
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", r.t.Redacted, err)
	}
	after, _, err := r.slotMap(ctx)
	if err != nil {
		return fmt.Errorf("reading %s after the scan: %w", r.t.Redacted, err)
	}
	slices.Sort(scanned)
	*done = scanned
	switch {
	case after != before:
		return fmt.Errorf("reading %s: the cluster's slot map changed during the scan (a failover or slots moved), so keys may have been missed: rerun when it is stable", r.t.Redacted)
	case !slices.Equal(scanned, masters):
		return fmt.Errorf("reading %s: scanned the masters %v, but the slots are served by %v: rerun", r.t.Redacted, scanned, masters)
	}
	return nil
}

// scanBound is how far a SCAN (SSCAN) may go before its cursor comes back
// to 0, for a store that said it holds n keys (members), at count a call:
//
//   - values: Redis returns every key present for the whole scan at least
//     once, and a key more than once only when its table is resized during
//     the scan; keys added meanwhile may be returned too. 4·(n + count),
//     and 65536 more for a store that grows from almost nothing.
//   - calls: a call visits buckets until it holds count keys or has
//     visited 10·count buckets (Redis's scanGenericCommand), so a walk
//     takes n/count calls that fill up, 4 times over, and the calls over
//     empty buckets: a table keeps its size after its keys are deleted
//     until it is shrunk (never while a fork saves), up to 2^26 buckets
//     here, 2^26/(10·count) calls (6711 at the default count 1000).
//
// n is taken as at most 2^32, the most keys a Redis database (members a
// set) holds: a server that says more does not make the bound overflow.
func scanBound(n int64, count int) (maxValues, maxCalls int64) {
	c := int64(min(max(count, 1), 1<<31))
	n = min(max(n, 0), 1<<32)
	return 4*(n+c) + 1<<16, 4*(n/c+1) + (1<<26)/(10*c) + 64
}

// escapeGlob escapes the glob characters of a literal prefix for MATCH.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *redisSource) name(it *online.Item, full bool) string {
	if r.t.Kind == RedisSet {
		return it.Hex(full)
	}
	return r.t.Prefix + it.Hex(full)
}

func (r *redisSource) Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error {
	if wide, _ := r.Wide(); wide {
		return online.Permanent{Err: &ProbeWideError{Target: r.t.Redacted}}
	}
	names := make([]string, len(fps))
	for i, fp := range fps {
		names[i] = fp.String()
	}
	return r.exists(ctx, names, present)
}

// Held asks for the items as Write names them, 64 digits where the names
// are whole digests.
func (r *redisSource) Held(ctx context.Context, items []online.Item, present []bool) error {
	full, _ := r.Wide()
	names := make([]string, len(items))
	for i := range items {
		names[i] = items[i].Hex(full)
	}
	return r.exists(ctx, names, present)
}

// exists asks whether each hex name is online: a member of the set
// (SMISMEMBER), or the key PREFIX<name> (EXISTS). On one server one EXISTS
// of all the keys answers how many exist: when all do, that is the
// answer (a batch read back after --apply, 1M keys: 1.6 s in EXISTS a
// key, pipelined); else each is asked.
func (r *redisSource) exists(ctx context.Context, names []string, present []bool) error {
	if r.t.Kind == RedisSet {
		members := make([]any, len(names))
		for i, n := range names {
			members[i] = n
		}
		res, err := r.c.SMIsMember(ctx, r.t.Set, members...).Result()
		if err != nil {
			return err
		}
		if len(res) != len(names) {
			return fmt.Errorf("SMISMEMBER answered %d of %d members", len(res), len(names))
		}
		copy(present, res)
		return nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = r.t.Prefix + n
	}
	if r.cc == nil && len(keys) > 1 {
		// (The names are distinct, as the probes and the read back give
		// them: a key named twice would be counted twice.)
		n, err := r.c.Exists(ctx, keys...).Result()
		if err != nil {
			return err
		}
		if n == int64(len(keys)) {
			for i := range present[:len(keys)] {
				present[i] = true
			}
			return nil
		}
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for i, c := range cmds {
		present[i] = c.Val() > 0
	}
	return nil
}

// Write sends one pipeline: SET PREFIX<hex> 1 NX [EX|PX ttl] per item, or
// one SADD of them all. The replies (set or not) are not used: after a
// retried pipeline they would call this run's own writes "existing"
// (FAULTS.md row 23); only error replies count.
func (r *redisSource) Write(ctx context.Context, items []online.Item) error {
	full, _ := r.Wide()
	if r.cc != nil {
		return r.writeCluster(ctx, items, full)
	}
	var b []byte
	var hexb [64]byte
	n := 0
	if r.t.Kind == RedisSet {
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(2+len(items)), 10)
		b = append(b, "\r\n"...)
		b = appendBulk(b, "SADD")
		b = appendBulk(b, r.t.Set)
		for i := range items {
			b = appendBulk(b, items[i].AppendHex(hexb[:0], full))
		}
		n = 1
	} else {
		var ttl []string
		switch {
		case r.ttl <= 0:
		case r.ttl%time.Second == 0:
			ttl = []string{"EX", strconv.FormatInt(int64(r.ttl/time.Second), 10)}
		default:
			ttl = []string{"PX", strconv.FormatInt(r.ttl.Milliseconds(), 10)}
		}
		key := []byte(r.t.Prefix)
		for i := range items {
			b = append(b, '*')
			b = strconv.AppendInt(b, int64(4+len(ttl)), 10)
			b = append(b, "\r\n"...)
			b = appendBulk(b, "SET")
			b = appendBulk(b, items[i].AppendHex(key[:len(r.t.Prefix)], full))
			b = appendBulk(b, "1")
			for _, a := range ttl {
				b = appendBulk(b, a)
			}
			b = appendBulk(b, "NX")
		}
		n = len(items)
	}
	return r.raw.pipeline(ctx, b, n)
}

// writeCluster sends the same commands as Write through a cluster
// pipeline, which sends each node its share and follows redirections. A
// SET NX that found the key answers nil: not an error.
func (r *redisSource) writeCluster(ctx context.Context, items []online.Item, full bool) error {
	pipe := r.cc.Pipeline()
	var hexb [64]byte
	if r.t.Kind == RedisSet {
		members := make([]any, len(items))
		for i := range items {
			members[i] = string(items[i].AppendHex(hexb[:0], full))
		}
		pipe.SAdd(ctx, r.t.Set, members...)
	} else {
		args := redis.SetArgs{Mode: "NX", TTL: r.ttl}
		for i := range items {
			pipe.SetArgs(ctx, r.t.Prefix+string(items[i].AppendHex(hexb[:0], full)), 1, args)
		}
	}
	cmds, err := pipe.Exec(ctx)
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !errors.Is(cerr, redis.Nil) {
			return cerr
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil
}

func (r *redisSource) Plan(w io.Writer, items []online.Item) error {
	full, _ := r.Wide()
	var b []byte
	for i := range items {
		if r.t.Kind == RedisSet {
			b = append(b, "SADD "...)
			b = strconv.AppendQuote(b, r.t.Set)
			b = append(b, ' ')
			b = append(b, items[i].Hex(full)...)
		} else {
			b = append(b, "SET "...)
			b = append(b, r.name(&items[i], full)...)
			b = append(b, " 1"...)
			switch {
			case r.ttl <= 0:
			case r.ttl%time.Second == 0:
				b = append(b, " EX "...)
				b = strconv.AppendInt(b, int64(r.ttl/time.Second), 10)
			default:
				b = append(b, " PX "...)
				b = strconv.AppendInt(b, r.ttl.Milliseconds(), 10)
			}
			b = append(b, " NX"...)
		}
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}
