package reconcile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/l2bloom"
)

// RebuildStats are the figures of a rebuild of bloom shards
// (Options.Rebuild).
type RebuildStats struct {
	DryRun       bool     `json:"dry_run"`
	Target       string   `json:"target"`
	Shards       []uint64 `json:"shards"`        // asked for
	Rebuilt      int64    `json:"rebuilt"`       // swapped in
	Keys         int64    `json:"truth_keys"`    // in the shards rebuilt
	BitsTruth    int64    `json:"truth_bits"`    // bits the truth sets in them
	BitsAfter    int64    `json:"bits_after"`    // set after the swap (truth OR live)
	BytesWritten int64    `json:"bytes_written"` // the shards' bytes, chunks of zeros (left as the new key's) included
	Seconds      float64  `json:"seconds"`
}

// rebuildSuffix names the key a segment is written to before it is swapped
// in: KEY:rebuild, in KEY's Cluster slot when the template has the shard
// in its hash tag.
const rebuildSuffix = ":rebuild"

// swapScript ORs the live segment into the new one and renames the new
// one over it, in one script: atomic on the node, so no SETBIT the online
// side sends meanwhile falls between the two and is lost, and no reader
// sees a half-written shard. A live key that is missing (a flushed shard)
// or short (one the online side's SETBITs began again after a flush) is
// taken as zeros; one of another type or longer than the layout's is
// refused. ARGV[2] = "1" marks a retry, whose first attempt may have run
// already: then a missing new key is a swap done.
var swapScript = redis.NewScript(`
local want = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then
  if ARGV[2] == '1' then return redis.call('BITCOUNT', KEYS[1]) end
  return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is gone')
end
if redis.call('STRLEN', KEYS[2]) ~= want then return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is not whole') end
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'string' then
  if redis.call('STRLEN', KEYS[1]) > want then return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' grew past the layout\'s length during the rebuild') end
  redis.call('BITOP', 'OR', KEYS[2], KEYS[2], KEYS[1])
elseif t ~= 'none' then
  return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' is a ' .. t .. ', not a bitmap string')
end
redis.call('RENAME', KEYS[2], KEYS[1])
return redis.call('BITCOUNT', KEYS[1])
`)

// hashTagHoldsShard reports whether the template's Cluster hash tag (the
// text between its first '{' and the first '}' after it, when not empty)
// holds the '*': then a shard's keys and their KEY:rebuild share a slot.
func hashTagHoldsShard(t l2bloom.Template) bool {
	s := string(t)
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(s[open+1:], '}')
	return end > 0 && strings.Contains(s[open+1:open+1+end], "*")
}

// rebuildShards writes, for each shard asked for, the exact bitmap of the
// truth's keys into KEY:rebuild with SETRANGE chunks, then swaps it in
// (swapScript): the shard then holds the truth's bits and every bit that
// was set online, none cleared. Shards are built in memory whole, in
// groups the memory budget holds, one read of the index a group; while a
// group is written and swapped in (work the server does) the next is
// built in a second buffer (work this process does), so the two overlap.
// A shard of several strings is swapped a segment at a time.
func rebuildShards(ctx context.Context, o *Options, rep *Report, b *bloomSource, x *fpstore.Index) error {
	l := b.layout
	st := &RebuildStats{DryRun: o.DryRun, Target: o.Target.Redacted, Shards: o.Rebuild}
	rep.Rebuild = st
	start := time.Now()
	defer func() { st.Seconds = time.Since(start).Seconds() }()
	sb := l.ShardBytes()
	n := len(o.Rebuild)
	budget := o.Mem - 64<<20
	buffers := 1
	if budget >= 2*sb && n > 1 {
		buffers = 2
	}
	per := int(min(budget/int64(buffers)/sb, int64(n)))
	if buffers == 2 {
		// At least eight groups, so that all but the first group's build
		// (an eighth of the work) is hidden behind the writes; each costs a
		// read of the index, and four groups were slower than eight
		// (bench/l2bloom.sh).
		per = min(per, (n+7)/8)
	}

	bctx, stop := context.WithCancel(ctx)
	var mems [][]byte
	var builder sync.WaitGroup
	defer func() {
		stop()
		builder.Wait()
		for _, m := range mems {
			hugemem.Free(m)
		}
	}()
	free := make(chan []byte, buffers)
	for range buffers {
		m, err := hugemem.Alloc(per * int(sb))
		if err != nil {
			return fmt.Errorf("cannot allocate the shards' bitmaps (%d bytes): %w", per*int(sb), err)
		}
		mems = append(mems, m)
		free <- m
	}
	type group struct {
		shards []uint64
		maps   [][]byte
		fill   *l2bloom.Filler
		mem    []byte
	}
	ready := make(chan group)
	var buildErr error
	builder.Go(func() {
		defer close(ready)
		for at := 0; at < n; at += per {
			var mem []byte
			select {
			case mem = <-free:
			case <-bctx.Done():
				return
			}
			g := group{shards: o.Rebuild[at:min(at+per, n)], mem: mem}
			for j := range g.shards {
				m := mem[int64(j)*sb : int64(j+1)*sb]
				clear(m)
				g.maps = append(g.maps, m)
			}
			g.fill = l2bloom.NewFiller(l, g.shards, g.maps)
			if err := x.Scan(func(fps []fpstore.Fingerprint) error {
				for _, fp := range fps {
					if g.fill.Wants(fp.Hi) {
						g.fill.Add(fp.Hi, fp.Lo)
					}
				}
				return bctx.Err()
			}); err != nil {
				buildErr = err
				return
			}
			g.fill.Flush()
			select {
			case ready <- g:
			case <-bctx.Done():
				return
			}
		}
	})

	br := rep.Bloom
	// Two shards of a group are written at once, on two connections:
	// while the server runs one's swap the other's chunks are on their way
	// (5% faster than one at a time, bench/l2bloom.sh).
	type shardJob struct {
		s      uint64
		bitmap []byte
	}
	jobs := make(chan shardJob)
	var (
		mu          sync.Mutex
		writeErr    error
		pending     sync.WaitGroup
		writers     sync.WaitGroup
		wctx, wstop = context.WithCancel(ctx)
	)
	defer func() { close(jobs); wstop(); writers.Wait() }()
	for range 2 {
		writers.Go(func() {
			for j := range jobs {
				after, err := b.rebuildShard(wctx, j.s, j.bitmap, st)
				mu.Lock()
				if err != nil && writeErr == nil {
					writeErr = err
					wstop()
				}
				if err == nil {
					st.Rebuilt++
					st.BitsAfter += after
					if br != nil {
						br.Shards[j.s].SetBits, br.Shards[j.s].Rebuilt = after, true
					}
				}
				mu.Unlock()
				pending.Done()
			}
		})
	}
	waitGroup := func() error {
		pending.Wait()
		mu.Lock()
		defer mu.Unlock()
		return writeErr
	}
	for g := range ready {
		for j, s := range g.shards {
			bitmap, keys := g.maps[j], g.fill.Keys(j)
			truthBits := l2bloom.Count(bitmap, l.Bits)
			st.Keys += keys
			st.BitsTruth += truthBits
			if br != nil {
				br.Shards[s].Keys = keys
			}
			if o.DryRun {
				for seg := range l.Segments() {
					key := l.Key(b.keys, s, seg)
					fmt.Fprintf(o.DryRunOut, "REBUILD %s from %d truth keys (%d bits set in the shard): SETRANGE %s%s in chunks of %d bytes, then BITOP OR it with %s and RENAME it over %s\n",
						key, keys, truthBits, key, rebuildSuffix, b.chunk, key, key)
				}
				continue
			}
			pending.Add(1)
			jobs <- shardJob{s, bitmap}
		}
		if err := waitGroup(); err != nil {
			return rebuildStopped(ctx, o, st, err)
		}
		free <- g.mem
	}
	builder.Wait()
	if buildErr != nil {
		return rebuildStopped(ctx, o, st, buildErr)
	}
	if br != nil {
		b.summarise(br, o.TargetFPR, x.Len())
	}
	return nil
}

// rebuildShard writes and swaps in each segment of shard s; it returns the
// bits set after.
func (b *bloomSource) rebuildShard(ctx context.Context, s uint64, bitmap []byte, st *RebuildStats) (int64, error) {
	const segBytes = l2bloom.SegmentBits / 8
	var after int64
	for seg := range b.layout.Segments() {
		key := b.layout.Key(b.keys, s, seg)
		tmp := key + rebuildSuffix
		part := bitmap[seg*segBytes : seg*segBytes+uint64(b.layout.SegmentBytes(seg))]
		var n int64
		err := b.writeSegment(ctx, tmp, part, st)
		if err == nil {
			n, err = b.swap(ctx, key, tmp, len(part))
		}
		if err != nil {
			// Leave no half-written key behind; on a server that fails
			// this too, the next run deletes it first.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			b.c.Del(cctx, tmp)
			cancel()
			return after, fmt.Errorf("rebuilding %s: %w", key, err)
		}
		after += n
	}
	return after, nil
}

// writeSegment writes part into tmp (deleted first: a leftover of an
// interrupted run) in pipelined SETRANGE chunks, each pipeline retried
// whole (a SETRANGE written twice writes the same bytes). Its last byte is
// written first, so that the server allocates the string once, zeroed,
// rather than growing it chunk by chunk (half the server's time here);
// chunks of zeros are then left as they are.
func (b *bloomSource) writeSegment(ctx context.Context, tmp string, part []byte, st *RebuildStats) error {
	if err := retry(ctx, b.o.Retries, b.o.Backoff, b.o.waiting("writing "+tmp+" on "+b.t.Redacted, nil), func() error {
		pipe := b.c.Pipeline()
		pipe.Del(ctx, tmp)
		pipe.SetRange(ctx, tmp, int64(len(part)-1), string(part[len(part)-1:]))
		_, err := pipe.Exec(ctx)
		return err
	}); err != nil {
		return err
	}
	for off := 0; off < len(part); {
		start := off
		err := retry(ctx, b.o.Retries, b.o.Backoff, b.o.waiting("writing "+tmp+" on "+b.t.Redacted, nil), func() error {
			pipe := b.c.Pipeline()
			at := start
			for sent := 0; sent < b.depth && at < len(part); {
				end := min(at+int(b.chunk), len(part))
				if !zeros(part[at:end]) {
					pipe.SetRange(ctx, tmp, int64(at), string(part[at:end]))
					sent++
				}
				at = end
			}
			cmds, err := pipe.Exec(ctx)
			for _, c := range cmds {
				if cerr := c.Err(); cerr != nil {
					return cerr
				}
			}
			if err == nil { // also when all its chunks were zeros: nothing sent
				off = at
			}
			return err
		})
		if err != nil {
			return err
		}
		atomic.AddInt64(&st.BytesWritten, int64(off-start)) // two shards are written at once
		if p := b.o.Progress; p != nil {
			p.RawBytes.Add(int64(off - start))
		}
	}
	return nil
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

// swap runs swapScript, retried: a retry after a reply lost may find the
// swap done (the new key gone), which the script then takes for done.
func (b *bloomSource) swap(ctx context.Context, key, tmp string, n int) (int64, error) {
	var after int64
	attempt := 0
	err := retry(ctx, b.o.Retries, b.o.Backoff, b.o.waiting("swapping in "+key+" on "+b.t.Redacted, nil), func() error {
		flag := "0"
		if attempt > 0 {
			flag = "1"
		}
		attempt++
		v, err := swapScript.Run(ctx, b.c, []string{key, tmp}, n, flag).Int64()
		if err != nil {
			if strings.HasPrefix(err.Error(), "FPDEDUP ") {
				return permanent{errors.New(strings.TrimPrefix(err.Error(), "FPDEDUP "))}
			}
			return err
		}
		after = v
		return nil
	})
	return after, err
}

// rebuildStopped is the error of a rebuild that stopped: once a shard was
// swapped in, an interruption says how many were.
func rebuildStopped(ctx context.Context, o *Options, st *RebuildStats, err error) error {
	if ctx.Err() != nil && st.Rebuilt > 0 {
		return &ApplyInterruptedError{Target: o.Target.Redacted, Rebuilt: st.Rebuilt, Rebuild: int64(len(st.Shards)),
			Cause: context.Cause(ctx), ctxErr: ctx.Err()}
	}
	if ctx.Err() != nil {
		return interrupted(ctx, err)
	}
	return err
}
