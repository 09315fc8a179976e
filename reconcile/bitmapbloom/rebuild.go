package bitmapbloom

import (
	"context"
	"crypto/rand"
	"encoding/binary"
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
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// rebuildSuffix names the key a segment is written to before it is swapped
// in: KEY:rebuild, in KEY's Cluster slot when the template has the shard
// in its hash tag.
const rebuildSuffix = ":rebuild"

// swappedSuffix names the key the swap leaves behind it: KEY:rebuild:swapped
// holds the run's token once the swap has run (for swappedTTL), so that a
// client that lost the reply (a connection reset, a signal closing it)
// learns whether the swap ran from the server, never from a guess.
const (
	swappedSuffix = ":rebuild:swapped"
	swappedTTL    = 10 * time.Minute
)

// swapScript ORs the live segment into the new one and renames the new
// one over it, in one script: atomic on the node, so no SETBIT the online
// side sends meanwhile falls between the two and is lost, and no reader
// sees a half-written shard. A live key that is missing (a flushed shard)
// or short (one the online side's SETBITs began again after a flush) is
// taken as zeros; one of another type or longer than the layout's is
// refused. So is a new key with fewer bits set than the truth's
// (ARGV[2]): what was written was lost in part (its server restarted, or
// another client wrote it), and the script answers "FPDEDUP short N",
// the bits it holds. The swap then marks KEYS[3] with the run's token
// (ARGV[3]): a new key found missing is a swap done by this run only when
// the mark is there (a retry after a lost reply), else it is gone.
var swapScript = redis.NewScript(`
local want = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then
  if redis.call('GET', KEYS[3]) == ARGV[3] then return redis.call('BITCOUNT', KEYS[1]) end
  return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is gone')
end
if redis.call('STRLEN', KEYS[2]) ~= want then return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is not whole') end
local have = redis.call('BITCOUNT', KEYS[2])
if have < tonumber(ARGV[2]) then return redis.error_reply('FPDEDUP short ' .. have) end
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'string' then
  if redis.call('STRLEN', KEYS[1]) > want then return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' grew past the layout\'s length during the rebuild') end
  redis.call('BITOP', 'OR', KEYS[2], KEYS[2], KEYS[1])
elseif t ~= 'none' then
  return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' is a ' .. t .. ', not a bitmap string')
end
redis.call('RENAME', KEYS[2], KEYS[1])
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
return redis.call('BITCOUNT', KEYS[1])
`)

// HashTagHoldsShard reports whether the template's Cluster hash tag (the
// text between its first '{' and the first '}' after it, when not empty)
// holds the '*': then a shard's keys and their KEY:rebuild share a slot.
func HashTagHoldsShard(t l2bloom.Template) bool {
	s := string(t)
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(s[open+1:], '}')
	return end > 0 && strings.Contains(s[open+1:open+1+end], "*")
}

// RebuildOptions say which shards to rebuild, and whether to write or to
// print what would be written.
type RebuildOptions struct {
	Shards    []uint64
	DryRun    bool
	DryRunOut io.Writer
}

// Rebuild writes, for each shard asked for, the exact bitmap of the
// truth's keys into KEY:rebuild with SETRANGE chunks, then swaps it in
// (swapScript): the shard then holds the truth's bits and every bit that
// was set online, none cleared. Once all are swapped in they are read
// back (Source.readBack): a shard is "rebuilt" only if it is whole
// and holds at least the truth's bits then. Shards are built in memory whole, in
// groups the memory budget holds, one read of the index a group; while a
// group is written and swapped in (work the server does) the next is
// built in a second buffer (work this process does), so the two overlap.
// A shard of several strings is swapped a segment at a time.
func Rebuild(ctx context.Context, o *online.Config, ro RebuildOptions, rep *report.Report, b *Source, x *fpstore.Index) error {
	st := &report.RebuildStats{DryRun: ro.DryRun, Target: o.Target, Shards: ro.Shards}
	rep.Rebuild = st
	b.token = rand.Text()
	start := time.Now()
	defer func() { st.Seconds = time.Since(start).Seconds() }()
	buffers, per := rebuildGroups(o, b.layout.ShardBytes(), len(ro.Shards))
	bctx, stop := context.WithCancel(ctx)
	bl := &groupBuilder{l: b.layout, x: x, shards: ro.Shards, per: per, free: make(chan []byte, buffers), ready: make(chan shardGroup)}
	defer bl.close(stop)
	if err := bl.alloc(buffers); err != nil {
		return err
	}
	bl.start(bctx)

	w := newShardWriters(ctx, b, st)
	defer w.close()
	for g := range bl.ready {
		if err := w.group(g, ro, rep.Bloom); err != nil {
			return rebuildStopped(ctx, o, st, err)
		}
		bl.free <- g.mem
	}
	bl.done.Wait()
	if bl.err != nil {
		return rebuildStopped(ctx, o, st, bl.err)
	}
	if len(w.swapped) > 0 {
		if err := b.readBackRebuilt(ctx, rep, w.swapped, w.truthBits); err != nil {
			return rebuildStopped(ctx, o, st, err)
		}
	}
	if br := rep.Bloom; br != nil {
		b.summarise(br, b.targetFPR, x.Len())
	}
	return nil
}

// rebuildGroups is how many buffers of shards (two while there are two
// groups to overlap and room for two shards) and how many shards in each
// the plan's rebuild buffers hold.
func rebuildGroups(o *online.Config, sb int64, n int) (buffers, per int) {
	budget := o.Plan.RebuildBuffers
	buffers = 1
	if budget >= 2*sb && n > 1 {
		buffers = 2
	}
	per = int(min(budget/int64(buffers)/sb, int64(n)))
	if buffers == 2 {
		// At least eight groups, so that all but the first group's build
		// (an eighth of the work) is hidden behind the writes; each costs a
		// read of the index, and four groups were slower than eight
		// (bench/l2bloom.sh).
		per = min(per, (n+7)/8)
	}
	return buffers, per
}

// shardGroup is shards built in one read of the index, into mem.
type shardGroup struct {
	shards []uint64
	maps   [][]byte
	fill   *l2bloom.Filler
	mem    []byte
}

// groupBuilder builds the groups' bitmaps from the index on a goroutine of
// its own, each into a free buffer, and hands them over on ready.
type groupBuilder struct {
	l      l2bloom.Layout
	x      *fpstore.Index
	shards []uint64
	per    int
	mems   [][]byte
	free   chan []byte
	ready  chan shardGroup
	done   sync.WaitGroup
	err    error // the build's, once ready is closed
}

func (bl *groupBuilder) alloc(buffers int) error {
	sb := bl.l.ShardBytes()
	for range buffers {
		m, err := hugemem.Alloc(bl.per * int(sb))
		if err != nil {
			return fmt.Errorf("cannot allocate the shards' bitmaps (%d bytes): %w", bl.per*int(sb), err)
		}
		bl.mems = append(bl.mems, m)
		bl.free <- m
	}
	return nil
}

// close stops the builder and frees the buffers once it has ended.
func (bl *groupBuilder) close(stop context.CancelFunc) {
	stop()
	bl.done.Wait()
	for _, m := range bl.mems {
		hugemem.Free(m)
	}
}

func (bl *groupBuilder) start(ctx context.Context) {
	bl.done.Go(func() {
		defer close(bl.ready)
		for at := 0; at < len(bl.shards); at += bl.per {
			var mem []byte
			select {
			case mem = <-bl.free:
			case <-ctx.Done():
				return
			}
			g, err := bl.build(ctx, bl.shards[at:min(at+bl.per, len(bl.shards))], mem)
			if err != nil {
				bl.err = err
				return
			}
			select {
			case bl.ready <- g:
			case <-ctx.Done():
				return
			}
		}
	})
}

// build fills the exact bitmaps of shards from one read of the index.
func (bl *groupBuilder) build(ctx context.Context, shards []uint64, mem []byte) (shardGroup, error) {
	sb := bl.l.ShardBytes()
	g := shardGroup{shards: shards, mem: mem}
	for j := range g.shards {
		m := mem[int64(j)*sb : int64(j+1)*sb]
		clear(m)
		g.maps = append(g.maps, m)
	}
	g.fill = l2bloom.NewFiller(bl.l, g.shards, g.maps)
	if err := bl.x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			if g.fill.Wants(fp.Hi) {
				g.fill.Add(fp.Hi, fp.Lo)
			}
		}
		return ctx.Err()
	}); err != nil {
		return g, err
	}
	g.fill.Flush()
	return g, nil
}

// shardWriters write the shards of a group and swap them in, two at once
// on two connections: while the server runs one's swap the other's chunks
// are on their way (5% faster than one at a time, bench/l2bloom.sh).
type shardWriters struct {
	b         *Source
	st        *report.RebuildStats
	jobs      chan shardJob
	mu        sync.Mutex
	swapped   []uint64 // the shards swapped in
	truthBits map[uint64]int64
	err       error
	pending   sync.WaitGroup
	writers   sync.WaitGroup
	stop      context.CancelFunc
}

type shardJob struct {
	s      uint64
	bitmap []byte
}

func newShardWriters(ctx context.Context, b *Source, st *report.RebuildStats) *shardWriters {
	w := &shardWriters{b: b, st: st, jobs: make(chan shardJob), truthBits: make(map[uint64]int64, len(st.Shards))}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	for range 2 {
		w.writers.Go(func() {
			for j := range w.jobs {
				err := b.rebuildShard(wctx, j.s, j.bitmap, st)
				w.mu.Lock()
				if err != nil && w.err == nil {
					w.err = err
					stop()
				}
				if err == nil {
					st.Swapped++
					w.swapped = append(w.swapped, j.s)
				}
				w.mu.Unlock()
				w.pending.Done()
			}
		})
	}
	return w
}

func (w *shardWriters) close() { close(w.jobs); w.stop(); w.writers.Wait() }

// group counts a group's truth keys and bits, then writes and swaps in
// each shard (or, in a dry run, says what it would do), and waits for
// them.
func (w *shardWriters) group(g shardGroup, ro RebuildOptions, br *report.BloomReport) error {
	b, l, st := w.b, w.b.layout, w.st
	for j, s := range g.shards {
		bitmap, keys := g.maps[j], g.fill.Keys(j)
		bits := l2bloom.Count(bitmap, l.Bits)
		w.truthBits[s] = bits
		st.Keys += keys
		st.BitsTruth += bits
		if br != nil {
			br.Shards[s].Keys = keys
		}
		if ro.DryRun {
			for seg := range l.Segments() {
				key := l.Key(b.keys, s, seg)
				fmt.Fprintf(ro.DryRunOut, "REBUILD %s from %d truth keys (%d bits set in the shard): SETRANGE %s%s in chunks of %d bytes, then BITOP OR it with %s and RENAME it over %s\n",
					key, keys, bits, key, rebuildSuffix, b.chunk, key, key)
			}
			continue
		}
		w.pending.Add(1)
		w.jobs <- shardJob{s, bitmap}
	}
	w.pending.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// readBackRebuilt reads the shards swapped in back, and counts as rebuilt
// those whole and holding at least the truth's bits; their bits are the
// report's.
func (b *Source) readBackRebuilt(ctx context.Context, rep *report.Report, swapped []uint64, truthBits map[uint64]int64) error {
	slices.Sort(swapped)
	if rep.ReadBack == nil {
		rep.ReadBack = &report.ReadBack{Samples: []string{}}
	}
	rb := rep.ReadBack
	for _, s := range swapped {
		rb.Shards = append(rb.Shards, report.ShardReadBack{Shard: s, Key: b.layout.Key(b.keys, s, 0),
			WantBytes: b.layout.ShardBytes(), WantBits: truthBits[s], WantFrom: "truth"})
	}
	if err := b.readBack(ctx, rb); err != nil {
		return fmt.Errorf("reading the rebuilt shards back on %s: %w; rerun the audit to see what they hold", b.o.Target, err)
	}
	st, br := rep.Rebuild, rep.Bloom
	for _, sh := range rb.Shards {
		if br != nil {
			br.Shards[sh.Shard].SetBits = sh.Bits
			br.Shards[sh.Shard].Rebuilt = !sh.Short
		}
		if !sh.Short {
			st.Rebuilt++
			st.BitsAfter += sh.Bits
		}
	}
	return nil
}

// rebuildShard writes and swaps in each segment of shard s.
func (b *Source) rebuildShard(ctx context.Context, s uint64, bitmap []byte, st *report.RebuildStats) error {
	const segBytes = l2bloom.SegmentBits / 8
	for seg := range b.layout.Segments() {
		key := b.layout.Key(b.keys, s, seg)
		tmp := key + rebuildSuffix
		part := bitmap[seg*segBytes : seg*segBytes+uint64(b.layout.SegmentBytes(seg))]
		truth := l2bloom.Count(part, uint64(len(part))*8)
		mark := key + swappedSuffix
		err := b.writeSegment(ctx, tmp, part, truth, st)
		if err == nil {
			err = b.swap(ctx, key, tmp, mark, len(part), truth)
		}
		// Past a failed swap (its reply lost, or a signal closing the
		// connection while the script ran) the server says whether it
		// ran: on a connection of its own, as a clean-up's.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err != nil && !online.IsPermanent(err) && b.C.Get(cctx, mark).Val() == b.token {
			err = nil
		}
		if err != nil {
			// Leave no half-written key behind; on a server that fails
			// this too, the next run deletes it first.
			b.C.Del(cctx, tmp)
			cancel()
			return fmt.Errorf("rebuilding %s: %w", key, err)
		}
		b.C.Del(cctx, mark)
		cancel()
	}
	return nil
}

// writeSegment writes part, where the truth sets truth bits, into tmp in
// pipelined SETRANGE chunks, and reads tmp's BITCOUNT back. A failed
// write, or one read back with other than the truth's bits, is written
// again whole, from the DEL: after a lost connection the chunks written
// before it may be gone (a server restarted empty holds none of them, and
// the client may have retried the failed pipeline alone on it), so none
// is taken for written. The last byte is written first, so that the
// server allocates the string once, zeroed, rather than growing it chunk
// by chunk (half the server's time here); chunks of zeros are then left as
// they are.
func (b *Source) writeSegment(ctx context.Context, tmp string, part []byte, truth int64, st *report.RebuildStats) error {
	return b.o.Retry(ctx, redisconn.Retryable, "writing "+tmp+" on "+b.o.Target, nil, func() error {
		var sent int64 // this attempt's, for the progress
		defer func() {
			if p := b.o.Progress; p != nil {
				p.RawBytes.Add(-sent) // counted again by the next attempt, or below
			}
		}()
		pipe := b.C.Pipeline()
		pipe.Del(ctx, tmp) // a leftover of an interrupted run, or of this write's last attempt
		pipe.SetRange(ctx, tmp, int64(len(part)-1), string(part[len(part)-1:]))
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for at := 0; at < len(part); {
			start := at
			pipe := b.C.Pipeline()
			for n := 0; n < b.depth && at < len(part); {
				end := min(at+int(b.chunk), len(part))
				if !zeros(part[at:end]) {
					pipe.SetRange(ctx, tmp, int64(at), string(part[at:end]))
					n++
				}
				at = end
			}
			cmds, err := pipe.Exec(ctx) // nothing sent when all its chunks are zeros
			for _, c := range cmds {
				if cerr := c.Err(); cerr != nil {
					return cerr
				}
			}
			if err != nil {
				return err
			}
			sent += int64(at - start)
			if p := b.o.Progress; p != nil {
				p.RawBytes.Add(int64(at - start))
			}
		}
		have, err := b.C.BitCount(ctx, tmp, nil).Result()
		if err != nil {
			return err
		}
		if have != truth {
			return fmt.Errorf("%s read back after its write holds %d bits set, the truth %d (the server lost part of it): written again whole", tmp, have, truth)
		}
		atomic.AddInt64(&st.BytesWritten, int64(len(part))) // two shards are written at once
		sent = 0
		return nil
	})
}

// zeros reports whether p holds only zero bytes.
func zeros(p []byte) bool {
	for len(p) >= 8 {
		if binary.LittleEndian.Uint64(p) != 0 {
			return false
		}
		p = p[8:]
	}
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// swap runs swapScript, retried: a retry after a reply lost finds the
// new key gone and the mark holding the run's token when the swap ran.
func (b *Source) swap(ctx context.Context, key, tmp, mark string, n int, truth int64) error {
	return b.o.Retry(ctx, redisconn.Retryable, "swapping in "+key+" on "+b.o.Target, nil, func() error {
		err := swapScript.Run(ctx, b.C, []string{key, tmp, mark}, n, truth, b.token, swappedTTL.Milliseconds()).Err()
		if err == nil {
			return nil
		}
		msg, ours := strings.CutPrefix(err.Error(), "FPDEDUP ")
		if !ours {
			return err
		}
		if have, short := strings.CutPrefix(msg, "short "); short {
			n, _ := strconv.ParseInt(have, 10, 64)
			return online.Permanent{Err: &RebuiltShortError{Key: tmp, Live: key, Bits: n, Truth: truth}}
		}
		return online.Permanent{Err: errors.New(msg)}
	})
}

// rebuildStopped is the error of a rebuild that stopped: once a shard was
// swapped in, an interruption says how many were.
func rebuildStopped(ctx context.Context, o *online.Config, st *report.RebuildStats, err error) error {
	if ctx.Err() != nil && st.Swapped > 0 {
		return online.ApplyInterrupted(ctx, online.ApplyInterruptedError{Target: o.Target, Rebuilt: st.Swapped, Rebuild: int64(len(st.Shards))})
	}
	if ctx.Err() != nil {
		return online.Interrupted(ctx, err)
	}
	return err
}
