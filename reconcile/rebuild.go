package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	Shards       []uint64 `json:"shards"`     // asked for
	Rebuilt      int64    `json:"rebuilt"`    // swapped in
	Keys         int64    `json:"truth_keys"` // in the shards rebuilt
	BitsTruth    int64    `json:"truth_bits"` // bits the truth sets in them
	BitsAfter    int64    `json:"bits_after"` // set after the swap (truth OR live)
	BytesWritten int64    `json:"bytes_written"`
	Seconds      float64  `json:"seconds"`
}

// rebuildSuffix names the key a segment is written to before it is swapped
// in: KEY:rebuild, in KEY's Cluster slot when the template has the shard
// in its hash tag.
const rebuildSuffix = ":rebuild"

// swapScript ORs the live segment into the new one and renames the new
// one over it, in one script: atomic on the node, so no SETBIT the online
// side sends meanwhile falls between the two and is lost, and no reader
// sees a half-written shard. It refuses a live key that is not the
// layout's string, and (ARGV[2] = "1": a retry, whose first attempt may
// have run already) takes a missing new key for a swap already done.
var swapScript = redis.NewScript(`
local want = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 0 then
  if ARGV[2] == '1' then return redis.call('BITCOUNT', KEYS[1]) end
  return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is gone')
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' is a ' .. t .. ', not a bitmap string') end
if redis.call('STRLEN', KEYS[1]) ~= want then return redis.error_reply('FPDEDUP the live ' .. KEYS[1] .. ' changed length during the rebuild') end
if redis.call('STRLEN', KEYS[2]) ~= want then return redis.error_reply('FPDEDUP the rebuilt ' .. KEYS[2] .. ' is not whole') end
redis.call('BITOP', 'OR', KEYS[2], KEYS[2], KEYS[1])
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
// was set online, none cleared. Shards are built in memory whole, as many
// at once as the memory budget holds (one read of the index builds them
// all); a shard of several strings is swapped a segment at a time.
func rebuildShards(ctx context.Context, o *Options, rep *Report, b *bloomSource, x *fpstore.Index) error {
	l := b.layout
	st := &RebuildStats{DryRun: o.DryRun, Target: o.Target.Redacted, Shards: o.Rebuild}
	rep.Rebuild = st
	start := time.Now()
	defer func() { st.Seconds = time.Since(start).Seconds() }()
	sb := l.ShardBytes()
	per := int(min(max(1, (o.Mem-64<<20)/sb), int64(len(o.Rebuild))))
	mem, err := hugemem.Alloc(per * int(sb))
	if err != nil {
		return fmt.Errorf("cannot allocate the shards' bitmaps (%d bytes): %w", per*int(sb), err)
	}
	defer hugemem.Free(mem)
	slot := make([]int32, l.Shards) // a shard's place in this group, -1: not in it
	pos := make([]uint64, l.K)
	for at := 0; at < len(o.Rebuild); at += per {
		group := o.Rebuild[at:min(at+per, len(o.Rebuild))]
		for i := range slot {
			slot[i] = -1
		}
		for j, s := range group {
			slot[s] = int32(j)
		}
		clear(mem[:len(group)*int(sb)])
		keys := make([]int64, len(group))
		err := x.Scan(func(fps []fpstore.Fingerprint) error {
			for _, fp := range fps {
				if j := slot[b.loc.Shard(fp.Hi)]; j >= 0 {
					keys[j]++
					bitmap := mem[int64(j)*sb : int64(j+1)*sb]
					b.loc.Bits(fp.Hi, fp.Lo, pos)
					for _, p := range pos {
						l2bloom.Set(bitmap, p)
					}
				}
			}
			return ctx.Err()
		})
		if err != nil {
			return rebuildStopped(ctx, o, st, err)
		}
		for j, s := range group {
			bitmap := mem[int64(j)*sb : int64(j+1)*sb]
			truthBits := l2bloom.Count(bitmap, l.Bits)
			if o.DryRun {
				for seg := range l.Segments() {
					key := l.Key(b.keys, s, seg)
					fmt.Fprintf(o.DryRunOut, "REBUILD %s from %d truth keys (%d bits set in the shard): SETRANGE %s%s in chunks of %d bytes, then BITOP OR it with %s and RENAME it over %s\n",
						key, keys[j], truthBits, key, rebuildSuffix, b.chunk, key, key)
				}
				st.Keys += keys[j]
				st.BitsTruth += truthBits
				continue
			}
			after, err := b.rebuildShard(ctx, s, bitmap, st)
			if err != nil {
				return rebuildStopped(ctx, o, st, err)
			}
			st.Rebuilt++
			st.Keys += keys[j]
			st.BitsTruth += truthBits
			st.BitsAfter += after
			if br := rep.Bloom; br != nil && s < uint64(len(br.Shards)) {
				// Every truth key of the shard is held now.
				rep.Missing -= br.Shards[s].Missing
			}
		}
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
// whole (a SETRANGE written twice writes the same bytes).
func (b *bloomSource) writeSegment(ctx context.Context, tmp string, part []byte, st *RebuildStats) error {
	if err := retry(ctx, b.o.Retries, b.o.Backoff, b.o.waiting("writing "+tmp+" on "+b.t.Redacted, nil), func() error {
		return b.c.Del(ctx, tmp).Err()
	}); err != nil {
		return err
	}
	for off := 0; off < len(part); {
		start := off
		err := retry(ctx, b.o.Retries, b.o.Backoff, b.o.waiting("writing "+tmp+" on "+b.t.Redacted, nil), func() error {
			pipe := b.c.Pipeline()
			at := start
			for range b.depth {
				if at == len(part) {
					break
				}
				end := min(at+int(b.chunk), len(part))
				pipe.SetRange(ctx, tmp, int64(at), string(part[at:end]))
				at = end
			}
			cmds, err := pipe.Exec(ctx)
			for _, c := range cmds {
				if cerr := c.Err(); cerr != nil {
					return cerr
				}
			}
			if err == nil {
				off = at
			}
			return err
		})
		if err != nil {
			return err
		}
		st.BytesWritten += int64(off - start)
		if p := b.o.Progress; p != nil {
			p.RawBytes.Add(int64(off - start))
		}
	}
	return nil
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
