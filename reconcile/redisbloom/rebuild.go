package redisbloom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// rebuildSuffix names the key a filter is rebuilt in, beside the live
// one: KEY:rebuild, in KEY's Cluster slot when the template's hash tag
// holds the shard (Spec.HashTagHoldsShard).
const rebuildSuffix = ":rebuild"

// sampleMax is how many of a shard's truth items are asked with
// BF.MEXISTS of the rebuilt filter, before and after the swap.
const sampleMax = 1000

// swapScript renames the rebuilt filter (KEYS[2]) over the live one
// (KEYS[1]) if the live one is as the rebuild first read it: its header
// (ARGV[1]; empty: it was missing) holds its item count, which every add
// the module answers 1 raises, so an equal header means no item arrived
// since. A live filter missing now is replaced as well (nothing online
// is lost). Otherwise it answers {'ARRIVED', the live header}, and
// nothing changes. The rebuilt key must hold the header built (ARGV[2]);
// when it is gone, the answer is {'GONE', the live header}: the caller
// tells a swap whose reply was lost (the live filter is the one built,
// grown perhaps) from a rebuilt key lost (its server restarted).
var swapScript = redis.NewScript(`
local function header(k)
  if redis.call('EXISTS', k) == 0 then return '' end
  if redis.call('TYPE', k)['ok'] ~= 'MBbloom--' then return false end
  return redis.call('BF.SCANDUMP', k, 0)[2]
end
local new = header(KEYS[2])
if new == '' then
  local live = header(KEYS[1])
  if live == false then live = '' end
  return {'GONE', live}
end
if new ~= ARGV[2] then return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is not the filter built') end
local live = header(KEYS[1])
if live == false then return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' is no longer a RedisBloom filter') end
if live ~= '' and live ~= ARGV[1] then return {'ARRIVED', live} end
redis.call('RENAME', KEYS[2], KEYS[1])
return {'SWAPPED', ''}
`)

// RebuildOptions say how Rebuild runs.
type RebuildOptions struct {
	DryRun    bool      // say what would be done, write nothing
	DryRunOut io.Writer // where (one line a command)
}

// RebuildMemError is a rebuilt filter that outgrows the memory budget: a
// shard's filter is built whole in memory before it is written.
type RebuildMemError struct {
	Shard, Key string
	Mem        int64
}

func (e *RebuildMemError) Error() string {
	return fmt.Sprintf("RedisBloom shard %s: the filter rebuilt for %q outgrows the memory budget of %s (it is built whole in memory): give more", e.Shard, e.Key, units.FormatBytes(e.Mem))
}

// UncoveredError is a rebuild refused because the records give the key
// texts of only some of the index's fingerprints: the filters rebuilt
// would lack the others' items, which the live ones may hold.
type UncoveredError struct {
	Keys, Index int64
}

func (e *UncoveredError) Error() string {
	return fmt.Sprintf("not rebuilt: the records give the keys of %d of the index's %d fingerprints, so the filters rebuilt would lack the others' items, which the live ones may hold; give the records the index was built from", e.Keys, e.Index)
}

// NoParamsError is a shard to rebuild whose filter is missing, without
// a capacity and error rate to rebuild it with.
type NoParamsError struct {
	Shard, Key string
}

func (e *NoParamsError) Error() string {
	return fmt.Sprintf("RedisBloom shard %s: filter %q does not exist, so its BF.RESERVE capacity and error rate are not known: give them for its rebuild", e.Shard, e.Key)
}

// RebuiltWrongError is a rebuilt filter that, read back before the swap,
// is not what was built (another header, or a sampled truth item it does
// not hold): not swapped in, and deleted.
type RebuiltWrongError struct {
	Shard, Key, What string
}

func (e *RebuiltWrongError) Error() string {
	return fmt.Sprintf("RedisBloom shard %s: the filter rebuilt in %q is not the one built when read back (%s): not swapped in, the live filter is as it was; rerun the rebuild", e.Shard, e.Key+rebuildSuffix, e.What)
}

// Rebuild makes, for each shard b's options name, the filter the module
// would build for the shard's truth keys (BF.RESERVE at the capacity and
// error given, else the live filter's, then a BF.ADD of each), in
// memory; writes it with BF.LOADCHUNK into KEY:rebuild; checks it there
// (its header, a sample of BF.MEXISTS); and swaps it in with swapScript
// only if the live filter is as the rebuild first read it, so that an
// item added online meanwhile is never dropped without a word: the swap
// is refused (*ArrivedError) and the live filter left as it was. The
// audit (Audit) must have run: it read the truth. Each shard swapped in
// is read back (its header, which must extend the one built, and the
// sample) before it is counted rebuilt.
func (b *Source) Rebuild(ctx context.Context, ro RebuildOptions, rep *report.Report) error {
	if b.truth == nil {
		return errors.New("BUG: a RedisBloom rebuild before the audit read the truth")
	}
	// A filter built from part of the truth would drop the rest of what
	// the live one holds: the records must give every key of the index.
	if t := b.truth; !t.fromIndex && t.distinct < int64(t.x.Len()) {
		return &UncoveredError{Keys: t.distinct, Index: int64(t.x.Len())}
	}
	rs := &report.RebuildStats{DryRun: ro.DryRun, Target: b.o.Target}
	rep.Rebuild = rs
	start := time.Now()
	defer func() { rs.Seconds = time.Since(start).Seconds() }()
	rb := &report.ReadBack{Samples: []string{}}
	if !ro.DryRun {
		rep.ReadBack = rb
	}
	named := 0
	for _, want := range b.rebuild {
		if want {
			named++
		}
	}
	var shards []int
	for s, want := range b.rebuild {
		if want {
			shards = append(shards, s)
		}
	}
	// The next shards' filters are built, one a core, while one is
	// written, checked and swapped in, as many as fit in the plan
	// (prepareMore).
	var queue []*pending
	defer func() {
		for _, p := range queue {
			p.cancel()
			<-p.done
		}
	}()
	for i, s := range shards {
		rs.Shards = append(rs.Shards, uint64(s))
		var cur *prepared
		if len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			<-p.done
			p.cancel()
			cur = p.pr
		} else {
			cur = b.prepare(ctx, s, b.buildBudget(s))
		}
		if cur.err == nil {
			queue = b.prepareMore(ctx, cur, queue, shards[i+1+len(queue):])
		}
		err := cur.err
		if err == nil {
			err = b.rebuildShard(ctx, cur, ro, rep, rb)
		}
		if err != nil {
			// Said beside the error but for the typed ones a caller words
			// itself (the report's Rebuild has it too).
			var np *NoParamsError
			var me *RebuildMemError
			if rs.Swapped > 0 && ctx.Err() == nil && !errors.As(err, &np) && !errors.As(err, &me) {
				return fmt.Errorf("%w (%d of the %d filters named were rebuilt and swapped in before this one)", err, rs.Swapped, named)
			}
			return err
		}
	}
	return nil
}

// prepared is a shard's filter built, and the live one's header as it
// was before: what the swap compares with.
type prepared struct {
	s       int
	began   time.Time
	live    *rbloom.Header
	liveHdr []byte
	p       rbloom.Params
	f       *rbloom.Filter
	added   int64
	err     error
}

// pending is a shard being prepared on a goroutine of its own.
type pending struct {
	s      int
	most   int64         // the bytes its filter may take
	done   chan struct{} // closed once pr is
	pr     *prepared
	cancel context.CancelFunc
}

// buildBudget is what shard s's filter may take, built alone.
func (b *Source) buildBudget(s int) int64 {
	return b.o.Plan.RedisBloomBuild(rbloom.MarksBytes(int(b.truth.keys(s))))
}

// prepare reads shard s's live header and builds its filter within budget.
func (b *Source) prepare(ctx context.Context, s int, budget int64) *prepared {
	pr := b.readLive(ctx, s)
	if pr.err == nil {
		pr.f, pr.added, pr.err = b.build(ctx, s, pr.p, budget)
	}
	return pr
}

// readLive reads shard s's live header, as it is before anything is
// built, and the parameters of the filter to build.
func (b *Source) readLive(ctx context.Context, s int) *prepared {
	pr := &prepared{s: s, began: time.Now()}
	live, liveHdr, err := b.readHeader(ctx, s)
	var fk *FilterKeyError
	switch {
	case errors.As(err, &fk) && fk.Type == "none":
		live, liveHdr = nil, nil
	case errors.As(err, &fk) && fk.Err != nil:
		// A header no filter the module makes has: its parameters are
		// not known, but the swap compares its bytes all the same.
		live = nil
	case err != nil:
		pr.err = fmt.Errorf("%s: %w", b.o.Target, err)
		return pr
	}
	pr.live, pr.liveHdr = live, bytes.Clone(liveHdr)
	pr.p, pr.err = b.rebuildParams(b.spec.Router.Name(s), b.keys[s], live)
	return pr
}

// prepareMore starts building the shards of next in order, each on a
// goroutine of its own, until queue (the shards being built already)
// holds one a core, or the next would not fit beside them in what the
// plan gives their builds: cur's filter as built, and each other at most
// what its truth keys can take (rbloom.Params.MemoryFor, its budget),
// given its live header, read first (readLive). A shard not started is
// prepared when its turn comes.
func (b *Source) prepareMore(ctx context.Context, cur *prepared, queue []*pending, next []int) []*pending {
	marks := rbloom.MarksBytes(int(b.truth.keys(cur.s)))
	used := int64(cur.f.Header().Memory())
	for _, p := range queue {
		marks += rbloom.MarksBytes(int(b.truth.keys(p.s)))
		used += p.most
	}
	for _, s := range next {
		if len(queue) >= runtime.GOMAXPROCS(0) {
			break
		}
		pr := b.readLive(ctx, s)
		if pr.err != nil {
			break // read again, and said, in its turn
		}
		most, err := pr.p.MemoryFor(uint64(b.truth.keys(s)))
		m := marks + rbloom.MarksBytes(int(b.truth.keys(s)))
		if err != nil || int64(most) > b.o.Plan.RedisBloomBuild(m)-used {
			break
		}
		marks, used = m, used+int64(most)
		ctx, cancel := context.WithCancel(ctx)
		pe := &pending{s: s, most: int64(most), done: make(chan struct{}), cancel: cancel}
		go func() {
			defer close(pe.done)
			pr.f, pr.added, pr.err = b.build(ctx, s, pr.p, int64(most))
			pe.pr = pr
		}()
		queue = append(queue, pe)
	}
	return queue
}

// rebuildShard writes, checks and swaps in shard pr.s's filter built
// (Rebuild).
func (b *Source) rebuildShard(ctx context.Context, pr *prepared, ro RebuildOptions, rep *report.Report, rb *report.ReadBack) error {
	s, began, live, liveHdr, p, f, added := pr.s, pr.began, pr.live, pr.liveHdr, pr.p, pr.f, pr.added
	name, key := b.spec.Router.Name(s), b.keys[s]
	newKey := key + rebuildSuffix
	rs := rep.Rebuild
	sh := &rep.RedisBloom.Shards[s]
	h := f.Header()
	hdr, err := h.AppendBinary(nil)
	if err != nil {
		return err
	}
	keys := b.truth.keys(s)
	rs.Keys += keys
	for _, n := range f.Fill() {
		rs.BitsTruth += int64(n)
	}
	describeFilter(sh, h, f.Fill())
	sizeFilter(sh, h, b.opt.TargetFPR)
	if ro.DryRun {
		var n int
		var size int64
		for _, c := range f.Chunks() {
			n++
			size += int64(len(c))
		}
		_, err := fmt.Fprintf(ro.DryRunOut, "REBUILD %s (shard %s) from %d truth keys (%d added, %d taken for present): BF.RESERVE %s %g %d%s, as %d BF.LOADCHUNK of %s into %s, then RENAME it over %s if %s is unchanged (%d items now)\n",
			key, name, keys, added, int64(keys)-added, newKey, p.Error, p.Capacity, reserveOpts(p), n, units.FormatBytes(size), newKey, key, key, liveItems(live))
		return err
	}

	// Written beside the live filter, whole, from the start at each try:
	// a retry after a server restart finds none of it.
	var written int64 // this shard's bytes, counted again at each try
	err = b.o.Retry(ctx, redisconn.Retryable, "writing "+newKey+" on "+b.o.Target, nil, func() error {
		written = 0
		if err := b.C.Del(ctx, newKey).Err(); err != nil {
			return err
		}
		return b.loadChunks(ctx, newKey, f, &written)
	})
	rs.BytesWritten += written
	if err != nil {
		return fmt.Errorf("writing the rebuilt filter %s on %s (the live filter is as it was): %w", newKey, b.o.Target, err)
	}
	if err := b.checkRebuilt(ctx, s, newKey, hdr, h); err != nil {
		b.C.Del(context.WithoutCancel(ctx), newKey)
		return err
	}

	// The swap, retried: a reply lost is asked of the server again. It
	// runs on a connection of its own to the key's master, which then
	// waits for the master's replicas to have it (WAIT counts the writes
	// of its own connection).
	var res []any
	var waited *NotReplicatedError
	err = b.o.Retry(ctx, redisconn.Retryable, "swapping "+newKey+" over "+key+" on "+b.o.Target, nil, func() error {
		node, err := b.master(ctx, key)
		if err != nil {
			return err
		}
		conn := node.Conn()
		defer conn.Close()
		if res, err = swapScript.Run(ctx, conn, []string{key, newKey}, liveHdr, hdr).Slice(); err != nil {
			if c, ok := b.C.(*redis.ClusterClient); ok && (strings.HasPrefix(err.Error(), "MOVED") || strings.HasPrefix(err.Error(), "ASK")) {
				c.ReloadState(ctx)
			}
			return err
		}
		if waited = b.replicated(ctx, conn, name, key); waited == nil {
			if err := b.SlotOwned(ctx, conn, key); err != nil {
				waited = &NotReplicatedError{Shard: name, Key: key, Err: err}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("swapping %s over %s on %s: %w", newKey, key, b.o.Target, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("swapping %s over %s on %s: the script answered %v", newKey, key, b.o.Target, res)
	}
	verdict, _ := res[0].(string)
	now, _ := res[1].(string)
	switch verdict {
	case "ARRIVED":
		b.C.Del(context.WithoutCancel(ctx), newKey)
		ae := &ArrivedError{Shard: name, Key: key, Before: liveItems(live), Took: time.Since(began)}
		if nh, err := rbloom.ParseHeader([]byte(now), b.headerBudget()); err == nil {
			ae.Now = nh.Size
			ae.Changed = live == nil || !nh.Extends(live)
		} else {
			ae.Changed = true
		}
		return fmt.Errorf("%s: %w", b.o.Target, ae)
	case "GONE":
		// Swapped already, its reply lost, if the live filter is the one
		// built (grown since, perhaps); else the rebuilt key was lost.
		nh, err := rbloom.ParseHeader([]byte(now), b.headerBudget())
		if now == "" || err != nil || !nh.Extends(h) {
			return fmt.Errorf("%s: RedisBloom shard %s: the rebuilt filter %s was lost before the swap (its server restarted?); the live filter is as it was: rerun the rebuild", b.o.Target, name, newKey)
		}
	case "SWAPPED":
	default:
		return fmt.Errorf("swapping %s over %s on %s: the script answered %v", newKey, key, b.o.Target, res)
	}
	// Not counted swapped unless replicated: a failover may undo it.
	if waited != nil {
		return waited
	}
	rs.Swapped++
	return b.readBackRebuilt(ctx, s, h, sh, rep, rb)
}

// NotReplicatedError is a rebuilt filter swapped in on a master whose
// replicas did not all acknowledge it (WAIT), or whose slot another node
// serves in its own view (redisconn.SlotTakenError): a failover now could
// bring back the filter it replaced, so it is not counted rebuilt.
type NotReplicatedError struct {
	Shard, Key      string
	Acked, Replicas int64
	Err             error
}

func (e *NotReplicatedError) Error() string {
	what := fmt.Sprintf("%d of the %d replicas of its master acknowledged it", e.Acked, e.Replicas)
	var taken *redisconn.SlotTakenError
	switch {
	case errors.As(e.Err, &taken):
		what = taken.Error()
	case e.Err != nil:
		what = "its master's replicas were not known to have it (" + e.Err.Error() + ")"
	}
	return fmt.Sprintf("RedisBloom shard %s: the rebuilt filter was swapped in over %q, but %s: a failover may have brought back the filter it replaced; not counted rebuilt: audit it, and rerun the rebuild if it misses keys", e.Shard, e.Key, what)
}

// master is the client of the node that serves key's writes: the
// server, or the Cluster's master of its slot.
func (b *Source) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := b.C.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("BUG: a Redis client of type %T", b.C)
}

// replicated waits (WAIT, --timeout) until every replica connected to the
// master conn is on has what conn wrote, so that a rebuild counted is one
// a failover keeps: Redis replicates asynchronously, and a replica that
// takes over without the swap brings the old filter back. nil: no
// replica, or all acknowledged.
func (b *Source) replicated(ctx context.Context, conn *redis.Conn, shard, key string) *NotReplicatedError {
	info, err := conn.Info(ctx, "replication").Result()
	if err != nil {
		return &NotReplicatedError{Shard: shard, Key: key, Err: err}
	}
	var replicas int64
	role := ""
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "connected_slaves:"); ok {
			replicas, _ = strconv.ParseInt(v, 10, 64)
		}
		if v, ok := strings.CutPrefix(line, "role:"); ok {
			role = v
		}
	}
	if role != "master" {
		return &NotReplicatedError{Shard: shard, Key: key, Err: fmt.Errorf("the node it ran on is a %s now", role)}
	}
	// A master whose replica has just taken its slots over (a failover
	// it has not heard of yet) still writes, and counts no replica
	// connected: the Cluster's configuration still names the replica.
	if listed, ok := redisconn.ClusterReplicas(ctx, conn); ok && listed > replicas {
		return &NotReplicatedError{Shard: shard, Key: key, Acked: 0, Replicas: listed,
			Err: fmt.Errorf("%d of the %d replicas the Cluster gives its master are connected to it", replicas, listed)}
	}
	if replicas == 0 {
		return nil
	}
	timeout := b.o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	acked, err := conn.Do(ctx, "WAIT", replicas, timeout.Milliseconds()).Int64()
	if err != nil || acked < replicas {
		return &NotReplicatedError{Shard: shard, Key: key, Acked: acked, Replicas: replicas, Err: err}
	}
	return nil
}

// rebuildParams are BF.RESERVE's for shard s's rebuilt filter: the
// capacity and error given, else the live filter's, with its expansion
// and scaling.
func (b *Source) rebuildParams(name, key string, live *rbloom.Header) (rbloom.Params, error) {
	p := rbloom.Params{Capacity: b.opt.Capacity, Error: b.opt.Error}
	if live != nil {
		if p.Capacity == 0 {
			p.Capacity = live.Links[0].Entries
		}
		if p.Error == 0 {
			p.Error = live.TargetError()
		}
		if live.Scaling() {
			p.Expansion = live.Growth
		} else {
			p.NonScaling = true
		}
	}
	if p.Capacity == 0 || p.Error == 0 {
		return p, &NoParamsError{Shard: name, Key: key}
	}
	if err := p.Check(); err != nil {
		return p, fmt.Errorf("RedisBloom shard %s: %w", name, err)
	}
	return p, nil
}

// build adds shard s's truth items to a new filter of p, as BF.ADD would
// one by one, within budget.
func (b *Source) build(ctx context.Context, s int, p rbloom.Params, budget int64) (*rbloom.Filter, int64, error) {
	name, key := b.spec.Router.Name(s), b.keys[s]
	memErr := &RebuildMemError{Shard: name, Key: key, Mem: b.o.Plan.Mem}
	// NewFilter's error for a first sub-filter past the budget is
	// ErrParams: the budget is told from the parameters first.
	if first, err := p.Memory(); err == nil && int64(first) > budget {
		return nil, 0, memErr
	}
	f, err := rbloom.NewFilter(p, budget)
	if errors.Is(err, rbloom.ErrGrow) || budget <= 0 {
		return nil, 0, memErr
	}
	if err != nil {
		return nil, 0, fmt.Errorf("RedisBloom shard %s: %w", name, err)
	}
	var added int64
	err = b.truth.each(ctx, b.truth.bucket(s), func(_ int, _ uint64, item []byte) error {
		a, err := f.Add(item)
		switch {
		case errors.Is(err, rbloom.ErrGrow):
			return memErr
		case errors.Is(err, rbloom.ErrFull):
			return fmt.Errorf("RedisBloom shard %s: a NONSCALING filter of capacity %d cannot hold its %d truth keys: rebuild it with a larger capacity", name, p.Capacity, b.truth.keys(s))
		case err != nil:
			return err
		}
		if a.New {
			added++
		}
		return nil
	})
	return f, added, err
}

// loadChunks writes f into key with BF.LOADCHUNK, in pipelines of what
// the memory budget's read-ahead holds, and adds the bytes of the chunks
// the server took to written.
func (b *Source) loadChunks(ctx context.Context, key string, f *rbloom.Filter, written *int64) error {
	budget := b.o.Plan.ReadAhead
	pipe := b.C.Pipeline()
	var queued int64
	flush := func() error {
		if pipe.Len() == 0 {
			return nil
		}
		cmds, err := pipe.Exec(ctx)
		for _, c := range cmds {
			if c.Err() != nil {
				return c.Err()
			}
		}
		if err != nil {
			return err
		}
		*written += queued
		queued = 0
		return nil
	}
	for it, c := range f.Chunks() {
		if queued > 0 && queued+int64(len(c)) > budget {
			if err := flush(); err != nil {
				return err
			}
		}
		pipe.Do(ctx, "BF.LOADCHUNK", key, it, c)
		queued += int64(len(c))
	}
	return flush()
}

// checkRebuilt reads the rebuilt filter back before the swap: its header
// must be the one built, BF.INFO must count its items, and a sample of
// the shard's truth items must be held.
func (b *Source) checkRebuilt(ctx context.Context, s int, newKey string, hdr []byte, h *rbloom.Header) error {
	name := b.spec.Router.Name(s)
	var got []byte
	var info map[string]int64
	err := b.o.Retry(ctx, redisconn.Retryable, "reading back "+newKey+" on "+b.o.Target, nil, func() error {
		_, data, err := scandump(b.C.Do(ctx, "BF.SCANDUMP", newKey, 0))
		if err != nil {
			return err
		}
		got = bytes.Clone(data)
		info, err = bfInfo(ctx, b.C, newKey)
		return err
	})
	switch {
	case isNotFound(err):
		return &RebuiltWrongError{Shard: name, Key: b.keys[s], What: "it is gone (its server restarted?)"}
	case err != nil:
		return err
	case !bytes.Equal(got, hdr):
		return &RebuiltWrongError{Shard: name, Key: b.keys[s], What: "its header differs"}
	case uint64(info["Number of items inserted"]) != h.Size || uint64(info["Capacity"]) != h.Capacity() || int(info["Number of filters"]) != len(h.Links):
		return &RebuiltWrongError{Shard: name, Key: b.keys[s], What: fmt.Sprintf("BF.INFO %v, built %d items in %d sub-filters of capacity %d", info, h.Size, len(h.Links), h.Capacity())}
	}
	notHeld, _, err := b.sample(ctx, s, newKey)
	if err != nil {
		return err
	}
	if notHeld > 0 {
		return &RebuiltWrongError{Shard: name, Key: b.keys[s], What: fmt.Sprintf("%d of a sample of its truth items not held (BF.MEXISTS)", notHeld)}
	}
	return nil
}

// sample asks key with BF.MEXISTS for up to sampleMax of shard s's truth
// items, spread over them: how many it does not hold, of how many asked.
func (b *Source) sample(ctx context.Context, s int, key string) (notHeld, asked int64, err error) {
	step := max(int(b.truth.keys(s))/sampleMax, 1)
	var items []any
	err = b.truth.each(ctx, b.truth.bucket(s), func(j int, _ uint64, item []byte) error {
		if j%step == 0 && len(items) < sampleMax {
			items = append(items, string(item))
		}
		return nil
	})
	if err != nil || len(items) == 0 {
		return 0, 0, err
	}
	var v []int64
	err = b.o.Retry(ctx, redisconn.Retryable, "asking "+key+" on "+b.o.Target, nil, func() error {
		var err error
		v, err = b.C.Do(ctx, append([]any{"BF.MEXISTS", key}, items...)...).Int64Slice()
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	for _, x := range v {
		if x != 1 {
			notHeld++
		}
	}
	return notHeld, int64(len(items)), nil
}

// readBackRebuilt reads shard s back after its swap: a filter whose
// header extends the one built (items may have been added since) and
// that holds the sample; else it is counted short.
func (b *Source) readBackRebuilt(ctx context.Context, s int, h *rbloom.Header, sh *report.RedisBloomShard, rep *report.Report, rb *report.ReadBack) error {
	srb := report.ShardReadBack{Shard: uint64(s), Key: b.keys[s], WantFrom: "truth", Type: ModuleType, WantItems: h.Size, WantBytes: int64(h.Bytes())}
	now, _, err := b.readHeader(ctx, s)
	var fk *FilterKeyError
	switch {
	case errors.As(err, &fk):
		srb.Type = fk.Type
	case err != nil:
		return err
	default:
		srb.Items, srb.Bytes = now.Size, int64(now.Bytes())
	}
	notHeld, asked, err := b.sample(ctx, s, b.keys[s])
	if err != nil {
		return err
	}
	rb.Keys += asked
	rb.NotHeld += notHeld
	srb.Short = now == nil || !now.Extends(h) || notHeld > 0
	if srb.Short {
		rb.Short++
	} else {
		sh.Rebuilt = true
		rep.Rebuild.Rebuilt++
	}
	rb.Shards = append(rb.Shards, srb)
	return nil
}

// bfInfo is BF.INFO of key, by field.
func bfInfo(ctx context.Context, c redis.UniversalClient, key string) (map[string]int64, error) {
	v, err := c.Do(ctx, "BF.INFO", key).Slice()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for i := 0; i+1 < len(v); i += 2 {
		k, _ := v[i].(string)
		m[k], _ = v[i+1].(int64)
	}
	return m, nil
}

func reserveOpts(p rbloom.Params) string {
	switch {
	case p.NonScaling:
		return " NONSCALING"
	case p.Expansion == 0:
		return fmt.Sprintf(" EXPANSION %d", rbloom.DefaultExpansion)
	}
	return fmt.Sprintf(" EXPANSION %d", p.Expansion)
}

func liveItems(h *rbloom.Header) uint64 {
	if h == nil {
		return 0
	}
	return h.Size
}
