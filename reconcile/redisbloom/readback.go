package redisbloom

import (
	"context"
	"errors"
	"unsafe"

	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// The read-back after --apply (online.WholeReader): a filter to which
// many items were written, beside its size, is read back whole and its
// items tested offline, exactly as BF.MEXISTS would test them, instead of
// asking the server for each. A bit set stays set while the filter is the
// same one (its header extends the audit's), so an item found in a dump
// read after the writes is held after them; one not found was not held
// when its bits were read, after the writes.

// ReadWhole chooses, of the shards written to, those whose dump costs
// less to read and test than asking for their items (readAgainCheaper),
// when the memory the plan leaves beside the items held has room for a
// pass. A shard whose header cannot be read now is left to BF.MEXISTS,
// which says what it holds.
func (b *Source) ReadWhole(ctx context.Context, written []int64) ([]bool, error) {
	if b.spec.Router.All() || b.truth == nil {
		return nil, nil
	}
	whole := make([]bool, len(written))
	if _, ok := b.planReadBack(whole, written); !ok {
		return nil, nil
	}
	for s, n := range written {
		if n == 0 {
			continue
		}
		h, _, err := b.readHeader(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue
		}
		whole[s] = readAgainCheaper(h.Bytes(), n, n)
	}
	if _, ok := b.planReadBack(whole, written); !ok {
		// The marks and blocks of those chosen leave no pass: each
		// item is asked instead.
		return nil, nil
	}
	return whole, nil
}

// planReadBack is the plan of a read-back of the shards whole marks,
// written the items of each: a pass takes what the audit's plan gives it
// once the key texts collected for the writes (memplan.Plan.KeyBytes),
// the items' marks and a block of hashes a shard are held besides; false
// when that leaves less than a pass worth its round trips.
func (b *Source) planReadBack(whole []bool, written []int64) (plan, bool) {
	var marks, hashes int64
	for s, w := range whole {
		if w {
			marks += rbloom.MarksBytes(int(written[s]))
			hashes += hashBlock(written[s])
		}
	}
	held := 2*memplan.BitsetBytes(int64(b.truth.x.Len())) + marks + hashes*int64(unsafe.Sizeof(rbloom.Hash{})) + b.o.Plan.KeyBytes()
	p := plan{readAhead: b.o.Plan.ReadAhead}
	p.passBytes, _ = b.o.Plan.RedisBloomPass(held, b.truth.sp != nil, minPass)
	return p, p.passBytes >= minPass
}

// HeldWhole reads the filters of the shards whole marks, as many at once
// as a pass holds (a filter larger than a pass in passes of its own), and
// tests the items each gives that were written to them in the filters in
// memory, a sweep of the items each time. A filter gone or of another
// type holds none of them (ReadBackShards says which it is); one replaced
// while it is read is a *ChangedError.
func (b *Source) HeldWhole(ctx context.Context, whole []bool, written []int64, each func(fn func(*online.Item) error) error, held func(it *online.Item, held bool)) error {
	p, ok := b.planReadBack(whole, written)
	if !ok {
		return errors.New("BUG: RedisBloom filters read back whole without the memory for a pass")
	}
	rr := &report.RedisBloomReport{Shards: make([]report.RedisBloomShard, len(b.keys))}
	a := &auditor{b: b, t: b.truth, plan: p, rr: rr, st: &online.ReadStats{Pace: online.NewPacer(b.o.ReadRate)}, read: make([]*rbloom.Header, len(b.keys))}
	defer a.free()
	marks := make([]*rbloom.Marks, len(whole))
	for s, w := range whole {
		if !w {
			continue
		}
		h, _, err := b.readHeader(ctx, s)
		var fk *FilterKeyError
		switch {
		case errors.As(err, &fk) && fk.Err == nil:
			continue // none held: no marks
		case err != nil:
			return err
		}
		a.read[s] = h
		marks[s] = rbloom.NewMarks(int(written[s]))
	}
	for _, g := range groupPasses(a.read, p.passBytes) {
		if err := a.sweep(ctx, g, marks, each); err != nil {
			return err
		}
	}
	if b.readWhole == nil {
		b.readWhole = make([]bool, len(b.keys))
	}
	for s, w := range whole {
		b.readWhole[s] = b.readWhole[s] || w
	}
	b.readBackBytes += rr.BytesRead
	b.readBackPasses += rr.Passes
	at := make([]int, len(whole))
	return each(func(it *online.Item) error {
		s := b.shardOf(it)
		if s < 0 || s >= len(whole) || !whole[s] {
			return nil
		}
		held(it, marks[s] != nil && marks[s].Present(at[s]))
		at[s]++
		return nil
	})
}

// hashBlock is how many hashes a shard of n items written makes before
// they are tested together: testBlock, or all of them when fewer.
func hashBlock(n int64) int64 { return max(min(n, testBlock), 1) }

// shardPass is a pass of one shard's filter.
type shardPass struct {
	s int
	p rbloom.Pass
}

// groupPasses packs the passes of the filters heads has (nil: none) into
// groups of at most budget bytes, in order: the small filters of a
// read-back together, so that one sweep of the items tests them all; a
// filter larger than budget in passes of its own, one a group.
func groupPasses(heads []*rbloom.Header, budget int64) [][]shardPass {
	var groups [][]shardPass
	var cur []shardPass
	var bytes uint64
	for s, h := range heads {
		if h == nil {
			continue
		}
		for p := range h.Plan(budget) {
			n := p.To - p.From
			if len(cur) > 0 && (bytes+n > uint64(budget) || cur[len(cur)-1].s == s) {
				groups = append(groups, cur)
				cur, bytes = nil, 0
			}
			cur = append(cur, shardPass{s, p})
			bytes += n
		}
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// sweep loads the passes of group g into one buffer and tests in them,
// a block of hashes a shard at a time over the machine's cores (MarkAll),
// the items each gives of their shards, marking marks.
func (a *auditor) sweep(ctx context.Context, g []shardPass, marks []*rbloom.Marks, each func(fn func(*online.Item) error) error) error {
	b := a.b
	var total uint64
	for _, sp := range g {
		total += sp.p.To - sp.p.From
	}
	buf := a.buffer(total)
	windows := make([]*rbloom.Window, len(marks))
	var off uint64
	for _, sp := range g {
		n := sp.p.To - sp.p.From
		w, err := a.window(ctx, sp.s, a.read[sp.s], sp.p, buf[off:off+n:off+n])
		if err != nil {
			return err
		}
		windows[sp.s] = w
		off += n
	}
	at := make([]int, len(marks)) // the next item's number in its shard
	hashes := make([][]rbloom.Hash, len(marks))
	test := func(s int) error {
		n := len(hashes[s])
		windows[s].MarkAll(marks[s], at[s]-n, hashes[s])
		hashes[s] = hashes[s][:0]
		return a.st.Wait(ctx, n)
	}
	var item []byte
	err := each(func(it *online.Item) error {
		s := b.shardOf(it)
		if s < 0 || s >= len(marks) || marks[s] == nil {
			return nil
		}
		j := at[s]
		at[s]++
		if windows[s] == nil {
			return nil // not in this group
		}
		var hh rbloom.Hash
		if !marks[s].Present(j) {
			item = b.itemOf(item[:0], it)
			hh = a.read[s].Hash(item)
		}
		if hashes[s] == nil {
			hashes[s] = make([]rbloom.Hash, 0, hashBlock(int64(marks[s].Len())))
		}
		if hashes[s] = append(hashes[s], hh); len(hashes[s]) == cap(hashes[s]) {
			return test(s)
		}
		return nil
	})
	for s := range hashes {
		if err == nil && len(hashes[s]) > 0 {
			err = test(s)
		}
	}
	if err == nil {
		a.rr.Passes += len(g)
	}
	return err
}
