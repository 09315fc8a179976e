package redisbloom

import (
	"context"
	"math/bits"
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
	below := make([]uint32, len(b.missed))
	var n uint32
	for w, x := range b.missed {
		below[w] = n
		n += uint32(bits.OnesCount64(x))
	}
	if n == 0 {
		return []online.Item{}, true, nil
	}
	missed := func(r uint64) bool { return b.missed[r>>6]&(1<<(r&63)) != 0 }
	pos := func(r uint64) uint32 {
		return below[r>>6] + uint32(bits.OnesCount64(b.missed[r>>6]&(1<<(r&63)-1)))
	}
	var text int64
	for k := range t.count {
		err := t.each(ctx, k, func(_ int, rank uint64, item []byte) error {
			if missed(rank) {
				text += int64(len(item))
			}
			return nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	if int64(n)*int64(unsafe.Sizeof(online.Item{}))+text > maxBytes {
		return nil, false, nil
	}
	items := make([]online.Item, n)
	arena := make([]byte, 0, text)
	for k := range t.count {
		err := t.each(ctx, k, func(_ int, rank uint64, item []byte) error {
			if missed(rank) {
				at := len(arena)
				arena = append(arena, item...)
				items[pos(rank)] = online.Item{Route: int32(k) + 1, Key: arena[at:len(arena):len(arena)]}
			}
			return nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	// Their fingerprints, in rank order: the index's.
	var r uint64
	i := 0
	err := t.x.Scan(func(fps []fpstore.Fingerprint) error {
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
