package redisbloom

import (
	"context"
	"errors"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// MissingItems is the items --apply writes, taken from what the audit
// read of the records (its spool: each truth key's item and shard, once)
// instead of reading the records again: the keys it found missing, in
// fingerprint order, each item's Key the filter's item as it is (not a
// key text: itemOf gives it unchanged from then on) and its Route its
// shard. false when the audit did not spool them (item=fp with
// route=all, which no write takes) or when they would take more than
// maxBytes, items and texts: then the records give them, under their own
// bound.
func (b *Source) MissingItems(ctx context.Context, maxBytes int64) ([]online.Item, bool, error) {
	t := b.truth
	if t == nil || t.sp == nil || b.missed == nil || b.spec.Router.All() {
		return nil, false, nil
	}
	// Where each missing rank goes among them: the missing ranks below
	// it, from a count a word of the bitset.
	var missing uint64
	for _, x := range b.missed {
		missing += uint64(bits.OnesCount64(x))
	}
	itemBytes := int64(unsafe.Sizeof(online.Item{})) + 4 // and its length, while they are laid out
	switch {
	case missing == 0:
		return []online.Item{}, true, nil
	case missing > math.MaxUint32 || int64(missing) > maxBytes/itemBytes:
		return nil, false, nil
	}
	below := make([]uint32, len(b.missed))
	var n uint32
	for w, x := range b.missed {
		below[w] = n
		n += uint32(bits.OnesCount64(x))
	}
	missed := func(r uint64) bool { return b.missed[r>>6]&(1<<(r&63)) != 0 }
	pos := func(r uint64) uint32 {
		return below[r>>6] + uint32(bits.OnesCount64(b.missed[r>>6]&(1<<(r&63)-1)))
	}
	// Each item's length first, by its place: the texts are then laid
	// out in fingerprint order, as the writes and the read-back go
	// through them (one after the other, not a cache miss each).
	lens := make([]uint32, n)
	var text atomic.Int64
	err := t.eachBucket(ctx, func(k int, _ int, rank uint64, item []byte) (int64, error) {
		if missed(rank) {
			lens[pos(rank)] = uint32(len(item))
			return int64(len(item)), nil
		}
		return 0, nil
	}, &text)
	if err != nil {
		return nil, false, err
	}
	if int64(n)*itemBytes+text.Load() > maxBytes {
		return nil, false, nil
	}
	items := make([]online.Item, n)
	arena := make([]byte, text.Load())
	off := 0
	for i, l := range lens {
		end := off + int(l)
		items[i].Key = arena[off:end:end]
		off = end
	}
	lens = nil
	err = t.eachBucket(ctx, func(k int, _ int, rank uint64, item []byte) (int64, error) {
		if missed(rank) {
			it := &items[pos(rank)]
			copy(it.Key, item)
			it.Route = int32(k) + 1
		}
		return 0, nil
	}, nil)
	if err != nil {
		return nil, false, err
	}
	// Their fingerprints, in rank order: the index's.
	var r uint64
	i := 0
	err = t.x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			if missed(r) {
				items[i].FP = fp
				i++
			}
			r++
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, false, err
	}
	b.keyIsItem = true
	if b.rr != nil {
		b.rr.ItemsFromAudit = true
	}
	return items, true, nil
}

// eachBucket is each of every bucket, the buckets shared among the
// machine's cores (fn must be safe for that: the entries of one bucket
// come in order, on one goroutine); what fn returns is added to sum
// (unless nil).
func (t *truth) eachBucket(ctx context.Context, fn func(k, j int, rank uint64, item []byte) (int64, error), sum *atomic.Int64) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, min(runtime.GOMAXPROCS(0), len(t.count)))
	for g := range errs {
		wg.Go(func() {
			var got int64
			// A failure takes the buckets not begun from the others.
			for k := int(next.Add(1) - 1); k < len(t.count); k = int(next.Add(1) - 1) {
				err := t.each(ctx, k, func(j int, rank uint64, item []byte) error {
					n, err := fn(k, j, rank, item)
					got += n
					return err
				})
				if err != nil {
					errs[g] = err
					next.Store(int64(len(t.count)))
					return
				}
			}
			if sum != nil {
				sum.Add(got)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
