package redisbloom

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"runtime"
	"slices"
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
	switch {
	case missing == 0:
		return []online.Item{}, true, nil
	case missing > math.MaxUint32 || missingItemsBytes(int64(missing), 0) > maxBytes:
		return nil, false, nil
	}
	below := make([]uint32, len(b.missed))
	var n uint32
	for w, x := range b.missed {
		below[w] = n
		n += uint32(bits.OnesCount64(x))
	}
	lay := newLayout(t, b.missed, below, n)
	if err := lay.count(ctx); err != nil {
		return nil, false, err
	}
	if missingItemsBytes(int64(n), lay.text) > maxBytes {
		return nil, false, nil
	}
	items, err := lay.place(ctx)
	if err != nil {
		return nil, false, err
	}
	// Their fingerprints, in rank order: the index's.
	missed := func(r uint64) bool { return b.missed[r>>6]&(1<<(r&63)) != 0 }
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

// missingItemsBytes is the memory MissingItems takes for n items of text
// bytes in all: the items, their texts, and, while they are laid out, a
// copy of each text with its place, length and shard (layout).
func missingItemsBytes(n, text int64) int64 {
	return n*(int64(unsafe.Sizeof(online.Item{}))+entryHead) + 2*text
}

// layout puts the missing items in fingerprint (rank) order. A missing
// rank's place among them is the missing ranks below it; put there one by
// one, in the spool's order, each item is a cache miss or two in arrays
// far larger than the cache. So the entries are first copied by range of
// places (a part: few enough items to stay in the cache), each part's
// from every bucket one after the other, then each part is put in place
// on its own.
type layout struct {
	t      *truth
	missed []uint64
	below  []uint32
	n      uint32
	shift  uint // a place's part: place >> shift
	parts  int
	counts []int64 // [k*parts+p]: bucket k's entries in part p, then their bytes
	bytes  []int64
	text   int64
}

// entryHead is an entry's place, length and shard, before its text.
const entryHead = 12

// partItems is about the most items of a part.
const partItems = 1 << 13

func newLayout(t *truth, missed []uint64, below []uint32, n uint32) *layout {
	l := &layout{t: t, missed: missed, below: below, n: n}
	for uint64(n)>>l.shift > partItems {
		l.shift++
	}
	l.parts = int(uint64(n-1)>>l.shift) + 1
	l.counts = make([]int64, len(t.count)*l.parts)
	l.bytes = make([]int64, len(t.count)*l.parts)
	return l
}

// pos is rank r's place among the missing items, or false if r is not
// missing.
func (l *layout) pos(r uint64) (uint32, bool) {
	w := l.missed[r>>6]
	if w&(1<<(r&63)) == 0 {
		return 0, false
	}
	return l.below[r>>6] + uint32(bits.OnesCount64(w&(1<<(r&63)-1))), true
}

// count counts each bucket's entries and bytes by part, and the texts'.
func (l *layout) count(ctx context.Context) error {
	var text atomic.Int64
	err := l.t.eachBucket(ctx, func(k, _ int, rank uint64, item []byte) (int64, error) {
		if at, ok := l.pos(rank); ok {
			c := k*l.parts + int(at>>l.shift)
			l.counts[c]++
			l.bytes[c] += entryHead + int64(len(item))
			return int64(len(item)), nil
		}
		return 0, nil
	}, &text)
	l.text = text.Load()
	return err
}

// place copies the entries by part, then lays each part's items out in
// place: their texts one after the other in fingerprint order, as the
// writes and the read-back go through them.
func (l *layout) place(ctx context.Context) ([]online.Item, error) {
	buckets := len(l.t.count)
	// Where each bucket's entries of each part go: the parts one after
	// the other, each its buckets'.
	cursor := make([]int64, buckets*l.parts)
	partAt := make([]int64, l.parts+1)
	textAt := make([]int64, l.parts+1) // where a part's texts begin in the arena
	var off, txt int64
	for p := range l.parts {
		partAt[p], textAt[p] = off, txt
		for k := range buckets {
			c := k*l.parts + p
			cursor[c] = off
			off += l.bytes[c]
			txt += l.bytes[c] - entryHead*l.counts[c]
		}
	}
	partAt[l.parts], textAt[l.parts] = off, txt
	entries := make([]byte, off)
	err := l.t.eachBucket(ctx, func(k, _ int, rank uint64, item []byte) (int64, error) {
		if at, ok := l.pos(rank); ok {
			c := k*l.parts + int(at>>l.shift)
			e := entries[cursor[c]:]
			binary.LittleEndian.PutUint32(e, at)
			binary.LittleEndian.PutUint32(e[4:], uint32(len(item)))
			binary.LittleEndian.PutUint32(e[8:], uint32(k))
			copy(e[entryHead:], item)
			cursor[c] += entryHead + int64(len(item))
		}
		return 0, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	items := make([]online.Item, l.n)
	arena := make([]byte, l.text)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), l.parts) {
		wg.Go(func() {
			var lens []uint32
			for p := int(next.Add(1) - 1); p < l.parts; p = int(next.Add(1) - 1) {
				first := uint32(p) << l.shift
				last := min(uint64(first)+1<<l.shift, uint64(l.n))
				lens = slices.Grow(lens[:0], int(last)-int(first))[:int(last)-int(first)]
				part := entries[partAt[p]:partAt[p+1]]
				for e := part; len(e) > 0; {
					at, n := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
					lens[at-first] = n
					e = e[entryHead+int(n):]
				}
				// The part's texts in order, from where its first begins.
				o := textAt[p]
				for i, n := range lens {
					end := o + int64(n)
					items[first+uint32(i)].Key = arena[o:end:end]
					o = end
				}
				for e := part; len(e) > 0; {
					at, n := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
					it := &items[at]
					copy(it.Key, e[entryHead:entryHead+int(n)])
					it.Route = int32(binary.LittleEndian.Uint32(e[8:])) + 1
					e = e[entryHead+int(n):]
				}
			}
		})
	}
	wg.Wait()
	return items, ctx.Err()
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
