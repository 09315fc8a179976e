package rediskeys

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

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
)

// Written through a Redis Cluster, --apply checks that no slot changed
// hands meanwhile (online.Placed).
var _ online.Placed = (*Source)(nil)

// Source reads keys PREFIX<hex> by SCAN, or the members of a set by
// SSCAN; probes with pipelined EXISTS or SMISMEMBER; writes with pipelined
// SET NX (optionally with a TTL) or SADD.
//
// A Redis Cluster (Server.Cluster) is read through go-redis's
// ClusterClient: SCAN runs on the masters at once (ForEachMaster; as many
// as the memory budget allows, redisconn.ReplyBudget), their
// pages merged into one stream, and the slot map must be the same before
// and after the scan; a set, SSCAN, SMISMEMBER and SADD go to the master
// owning its slot; EXISTS probes and SET NX writes go in cluster pipelines,
// which split each batch by node and follow MOVED/ASK redirections.
type Source struct {
	*redisconn.Client
	srv     redisconn.Server
	k       Keys
	o       *online.Config
	ttl     time.Duration // of the keys Write sets; 0: none
	narrow  int64         // values of each width seen by Read
	full    int64
	samples int
}

// Open opens the keys k of the server srv; Write gives the keys it sets
// a time to live of ttl (0: none).
func Open(ctx context.Context, srv redisconn.Server, k Keys, o *online.Config, ttl time.Duration) (*Source, error) {
	c, err := redisconn.Open(ctx, srv, o)
	if err != nil {
		return nil, err
	}
	r := &Source{Client: c, srv: srv, k: k, o: o, ttl: ttl, samples: o.Samples}
	if k.Set != "" {
		typ, err := c.C.Type(ctx, k.Set).Result()
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %w", o.Target, err)
		}
		if typ != "set" && typ != "none" {
			r.Close()
			return nil, fmt.Errorf("%s: key %q holds a %s, not a set", o.Target, k.Set, typ)
		}
	}
	if k.HexDigits == 0 && o.Probe {
		// A probe must know how the keys are named before it asks for
		// them: 32-digit names asked of a store of 64-digit ones would all
		// be "missing". Look at a few names.
		if err := r.sampleWidth(ctx); err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: %w", o.Target, err)
		}
	}
	return r, nil
}

// sampleWidth reads a few names (SRANDMEMBER, or SCAN pages until some
// match) to learn their width.
func (r *Source) sampleWidth(ctx context.Context) error {
	var names []string
	if r.k.Set != "" {
		var err error
		if names, err = r.C.SRandMemberN(ctx, r.k.Set, 16).Result(); err != nil {
			return err
		}
	} else {
		var mu sync.Mutex
		err := r.EachNode(ctx, func(ctx context.Context, node *redis.Client) error {
			var cursor uint64
			for i := 0; i < 16; i++ {
				keys, next, err := node.Scan(ctx, cursor, escapeGlob(r.k.Prefix)+"*", 1000).Result()
				if err != nil {
					return err
				}
				mu.Lock()
				for _, k := range keys {
					names = append(names, k[len(r.k.Prefix):])
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

func (r *Source) Sorted() bool { return false }

func (r *Source) Wide() (bool, bool) {
	switch {
	case r.k.HexDigits != 0:
		return r.k.HexDigits == 64, true
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
func (r *Source) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	st.Expected = -1
	if r.k.Set != "" {
		if err := r.expectMembers(ctx, st); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pages := make(chan []string, 4)
	errc := make(chan error, 1)
	var retries atomic.Int64
	defer func() { st.Retries += int(retries.Load()) }()
	scan := func(ctx context.Context, node *redis.Client, where string) error {
		return r.scanCursor(ctx, node, where, st, pages, &retries)
	}
	go func() {
		defer close(pages)
		if r.CC == nil || r.k.Set != "" {
			var node *redis.Client
			if r.CC == nil {
				node = r.C.(*redis.Client)
			}
			errc <- scan(ctx, node, "")
			return
		}
		errc <- r.scanCluster(ctx, cancel, scan, &st.Masters)
	}()
	rest, err := r.parsePages(ctx, st, pages, emit)
	if err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err // the producer's error, or the cause of a cancelled context
	}
	st.Narrow, st.Full = r.narrow, r.full
	if len(rest) > 0 {
		return emit(rest)
	}
	return nil
}

// expectMembers asks SCARD how many members the set has: it bounds the
// scan, and is compared with what the scan reads.
func (r *Source) expectMembers(ctx context.Context, st *online.ReadStats) error {
	var n int64
	err := r.o.Retry(ctx, redisconn.Retryable, "reading "+r.o.Target+": SCARD", nil, func() error {
		var err error
		n, err = r.C.SCard(ctx, r.k.Set).Result()
		return err
	})
	if err != nil {
		return fmt.Errorf("reading %s: SCARD: %w", r.o.Target, err)
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
	return nil
}

// scanCursor walks one cursor, the set's (SSCAN, on whichever node owns
// it) or one node's key space (SCAN), sending each page that holds names
// to pages.
func (r *Source) scanCursor(ctx context.Context, node *redis.Client, where string, st *online.ReadStats, pages chan<- []string, retries *atomic.Int64) error {
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("reading %s: %s%s%w (after %d values; rerun to read again)", r.o.Target, where, what, err, st.Values.Load())
	}
	bound, err := r.cursorBound(ctx, node, st.Expected, retries)
	if err != nil {
		return fail("DBSIZE: ", err)
	}
	var cursor uint64
	match := escapeGlob(r.k.Prefix) + "*"
	for {
		var keys []string
		var next uint64
		err := r.o.Retry(ctx, redisconn.Retryable, "reading "+r.o.Target, retries, func() error {
			var err error
			if r.k.Set != "" {
				keys, next, err = r.C.SScan(ctx, r.k.Set, cursor, "", int64(r.k.ScanCount)).Result()
			} else {
				keys, next, err = node.Scan(ctx, cursor, match, int64(r.k.ScanCount)).Result()
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

// cursorBound is what a cursor's walk may read before it is a
// *ScanBoundError: from SCARD's count (expected) for the set, on the
// server that owns it, else from the node's DBSIZE.
func (r *Source) cursorBound(ctx context.Context, node *redis.Client, expected int64, retries *atomic.Int64) (*ScanBoundError, error) {
	bound := &ScanBoundError{Target: r.o.Target, Command: "SSCAN", Counted: "SCARD", Expected: expected, Count: r.k.ScanCount}
	if r.k.Set != "" {
		bound.Server = r.srv.Addr
		if r.CC != nil {
			if m, err := r.CC.MasterForKey(ctx, r.k.Set); err == nil {
				bound.Server = m.Options().Addr
			}
		}
	} else {
		bound.Command, bound.Counted, bound.Server = "SCAN", "DBSIZE", node.Options().Addr
		err := r.o.Retry(ctx, redisconn.Retryable, "reading "+r.o.Target+": DBSIZE", retries, func() error {
			var err error
			bound.Expected, err = node.DBSize(ctx).Result()
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	bound.MaxValues, bound.MaxCalls = scanBound(bound.Expected, r.k.ScanCount)
	return bound, nil
}

// parsePages turns the names of each page into fingerprints for emit, in
// batches, at the read rate, and returns the last batch, not yet full,
// for Read to emit once the scan has ended well; a name that is not the
// prefix and 32 or 64 hex digits is counted bad.
func (r *Source) parsePages(ctx context.Context, st *online.ReadStats, pages <-chan []string, emit func([]fpstore.Fingerprint) error) ([]fpstore.Fingerprint, error) {
	buf := make([]fpstore.Fingerprint, 0, 8192)
	plen := len(r.k.Prefix)
	for keys := range pages {
		if err := st.Wait(ctx, len(keys)); err != nil {
			return nil, err
		}
		st.Values.Add(int64(len(keys)))
		for _, k := range keys {
			h := k[min(plen, len(k)):]
			fp, ok := online.ParseHex(h)
			if !ok || !strings.HasPrefix(k, r.k.Prefix) {
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
					return nil, err
				}
				buf = buf[:0]
			}
		}
	}
	return buf, nil
}

// scanCluster runs scan on every master of the cluster at once; the first
// that fails stops the others. The masters scanned must be the masters of
// the slot map before and after: a failover, a master added or removed or
// slots moved during the scan could have hidden keys from it (SCAN runs
// per node), so that is an error, never a short count.
func (r *Source) scanCluster(ctx context.Context, cancel context.CancelCauseFunc, scan func(context.Context, *redis.Client, string) error, done *[]string) error {
	before, masters, err := r.SlotMap(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", r.o.Target, err)
	}
	var mu sync.Mutex
	var scanned []string
	var first error
	// At most r.Streams masters at once: the replies in flight stay within
	// the memory budget (redisconn.ReplyBudget).
	slots := make(chan struct{}, r.Streams)
	err = r.CC.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
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
		return fmt.Errorf("reading %s: %w", r.o.Target, err)
	}
	after, _, err := r.SlotMap(ctx)
	if err != nil {
		return fmt.Errorf("reading %s after the scan: %w", r.o.Target, err)
	}
	slices.Sort(scanned)
	*done = scanned
	switch {
	case after != before:
		return fmt.Errorf("reading %s: the cluster's slot map changed during the scan (a failover or slots moved), so keys may have been missed: rerun when it is stable", r.o.Target)
	case !slices.Equal(scanned, masters):
		return fmt.Errorf("reading %s: scanned the masters %v, but the slots are served by %v: rerun", r.o.Target, scanned, masters)
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

func (r *Source) name(it *online.Item, full bool) string {
	if r.k.Set != "" {
		return it.Hex(full)
	}
	return r.k.Prefix + it.Hex(full)
}

func (r *Source) Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error {
	if wide, _ := r.Wide(); wide {
		return online.Permanent{Err: &ProbeWideError{Target: r.o.Target}}
	}
	names := make([]string, len(fps))
	for i, fp := range fps {
		names[i] = fp.String()
	}
	return r.exists(ctx, names, present)
}

// Held asks for the items as Write names them, 64 digits where the names
// are whole digests.
func (r *Source) Held(ctx context.Context, items []online.Item, present []bool) error {
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
func (r *Source) exists(ctx context.Context, names []string, present []bool) error {
	if r.k.Set != "" {
		members := make([]any, len(names))
		for i, n := range names {
			members[i] = n
		}
		res, err := r.C.SMIsMember(ctx, r.k.Set, members...).Result()
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
		keys[i] = r.k.Prefix + n
	}
	if r.CC == nil && len(keys) > 1 {
		// (The names are distinct, as the probes and the read back give
		// them: a key named twice would be counted twice.)
		n, err := r.C.Exists(ctx, keys...).Result()
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
	pipe := r.C.Pipeline()
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
func (r *Source) Write(ctx context.Context, items []online.Item) error {
	full, _ := r.Wide()
	if r.CC != nil {
		return redisconn.Refusal(r.writeCluster(ctx, items, full))
	}
	var b []byte
	var hexb [64]byte
	n := 0
	if r.k.Set != "" {
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(2+len(items)), 10)
		b = append(b, "\r\n"...)
		b = redisconn.AppendBulk(b, "SADD")
		b = redisconn.AppendBulk(b, r.k.Set)
		for i := range items {
			b = redisconn.AppendBulk(b, items[i].AppendHex(hexb[:0], full))
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
		key := []byte(r.k.Prefix)
		for i := range items {
			b = append(b, '*')
			b = strconv.AppendInt(b, int64(4+len(ttl)), 10)
			b = append(b, "\r\n"...)
			b = redisconn.AppendBulk(b, "SET")
			b = redisconn.AppendBulk(b, items[i].AppendHex(key[:len(r.k.Prefix)], full))
			b = redisconn.AppendBulk(b, "1")
			for _, a := range ttl {
				b = redisconn.AppendBulk(b, a)
			}
			b = redisconn.AppendBulk(b, "NX")
		}
		n = len(items)
	}
	return redisconn.Refusal(r.Raw.Pipeline(ctx, b, n))
}

// writeCluster sends the same commands as Write through a cluster
// pipeline, which sends each node its share and follows redirections. A
// SET NX that found the key answers nil: not an error.
func (r *Source) writeCluster(ctx context.Context, items []online.Item, full bool) error {
	pipe := r.CC.Pipeline()
	var hexb [64]byte
	if r.k.Set != "" {
		members := make([]any, len(items))
		for i := range items {
			members[i] = string(items[i].AppendHex(hexb[:0], full))
		}
		pipe.SAdd(ctx, r.k.Set, members...)
	} else {
		args := redis.SetArgs{Mode: "NX", TTL: r.ttl}
		for i := range items {
			pipe.SetArgs(ctx, r.k.Prefix+string(items[i].AppendHex(hexb[:0], full)), 1, args)
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

func (r *Source) Plan(w io.Writer, items []online.Item) error {
	full, _ := r.Wide()
	var b []byte
	for i := range items {
		if r.k.Set != "" {
			b = append(b, "SADD "...)
			b = strconv.AppendQuote(b, r.k.Set)
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
