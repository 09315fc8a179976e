package pipeline

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/units"
)

// L2 as RedisBloom filters (ReplayOptions.RedisBloom): one rbloom.Filter a
// shard, each event's item added as BF.ADD adds it, so that every answer,
// every sub-filter appended and every bit is the module's
// (TestReplayRedisBloomModule holds it to the real module, event by event
// and byte by byte).
//
// Where an event goes: the router hashes the key text (the --key fields
// joined, as the index's recipe makes it) to a shard, whatever the item;
// the item (the key text, its SHA-256 hex or the fingerprint's 32 hex) is
// what BF.ADD is given, hashed by the module's MurmurHash64A pair. Both are
// computed by the parsers, in parallel; the simulation only adds.

// Check refuses parameters BF.RESERVE would refuse, a router a replay
// cannot follow, and filters whose first sub-filter fpdedup cannot make.
func (rb *ReplayRedisBloom) Check() error {
	switch {
	case len(rb.Capacity) == 0:
		return errors.New("replay: RedisBloom needs a capacity")
	case rb.Router == nil:
		return errors.New("replay: RedisBloom needs a router")
	case rb.Router.All():
		return ErrReplayRouteAll
	}
	for _, c := range rb.Capacity {
		if _, err := rb.params(c).Memory(); err != nil {
			return err
		}
	}
	return nil
}

// ErrReplayRouteAll refuses route=all in a replay: BF.ADD's answer is the
// one filter's that the item met, which depends on which items were routed
// there before; with the router unknown there is no answer to replay, not
// even a bound (an event is lost in one shard and new in another).
var ErrReplayRouteAll = errors.New("replay: the router must be known (route=all is for an audit): an add's answer depends on the one shard's filter it meets")

// ReplayMemError is a RedisBloom filter that would grow past the share of
// Mem the filters may take (the plan's Filters).
type ReplayMemError struct {
	Shard     string // the router's name of the shard
	SubFilter int    // the sub-filter it would append, counting from 1
	Bytes     uint64 // its bits' bytes
	Used      int64  // the bytes of every filter so far (bits and bookkeeping)
	Share     int64  // what they may take
	Need      int64  // the least Mem whose share holds them with it
}

func (e *ReplayMemError) Error() string {
	return fmt.Sprintf("replay: the RedisBloom filters outgrew their share of memory: shard %s's sub-filter %d (%s) would take them to %s, beyond the %s they may take",
		e.Shard, e.SubFilter, units.FormatBytes(int64(e.Bytes)), units.FormatBytes(e.Used+int64(e.Bytes)), units.FormatBytes(e.Share))
}

// replayFilterMem is the least Mem whose plan's Filters hold n bytes of
// filters.
func replayFilterMem(opts ReplayOptions, n int64) int64 {
	return memplan.ReplayMemNeeded(opts.planJob(), n)
}

// The Go heap a shard takes beside its filter's bits, counted in the
// filters' share so that a replay of a million small shards stays within
// --mem too: its Filter, header and slices and its rbShard (409 bytes
// measured on amd64) and its figures in the reports at the end (the table,
// --json, --stats-json: about 3 KiB measured at 262144 shards); and each
// sub-filter appended (its Link, slice headers, probe and rbLink: about
// 150 bytes).
const (
	rbShardBytes = 4096
	rbLinkBytes  = 192
)

// ReplayReservedBytes is what the RedisBloom filters BF.RESERVE makes
// take in replay (BF.INFO "Size", and rbShardBytes), every shard of every
// system of a sweep; 0 without them.
func ReplayReservedBytes(opts ReplayOptions) int64 {
	rb := opts.RedisBloom
	if rb == nil {
		return 0
	}
	var n int64
	for _, c := range rb.Capacity {
		m, _ := rb.params(c).Memory() // Check refuses those in error
		n += (int64(m) + rbShardBytes) * int64(rb.Router.Shards())
	}
	return n
}

// filterBudget is the filters' share of Mem, shared by every system.
type filterBudget struct {
	used, share int64
	opts        *ReplayOptions
}

// rbTier is one system's L2 as RedisBloom filters.
type rbTier struct {
	router  *rbloom.Router
	filters []*rbloom.Filter
	shards  []rbShard
	budget  *filterBudget
}

// rbShard is what a shard's filter decided, and its formula rate as it
// fills: 1 - miss·(1 - last.rate()), miss the product of (1 - rate) of
// the full sub-filters.
type rbShard struct {
	st    ReplayShard
	miss  float64
	last  fillRate
	links []rbLink // for prefetch
}

// rbLink is where a sub-filter's bits are, to prefetch an item's: its
// modulus as the module probes it (rbloom.Hash.Bit), how many of the
// item's bits to prefetch, and its first byte's address. The address comes
// from Filter.Chunks, which promises it only until the next add; a
// sub-filter's bytes never move in fact, and a prefetch of a stale address
// would cost a wasted load, never a wrong answer.
type rbLink struct {
	mod    l2bloom.Modulo
	probes uint32
	base   uintptr
}

// rbPrefetchBytes is the least sub-filter whose bits are prefetched: a
// smaller one is mostly in the core's caches, and its positions (a 64-bit
// division each) cost more than the loads they would start.
// BenchmarkReplaySimL2: prefetching made 16 filters of one 64 MiB
// sub-filter 1.8x faster (1.2-1.7M to 2.1-3.1M events/cpu-s) and 16 of 4
// sub-filters of 28-224 KiB 25% slower.
const rbPrefetchBytes = 1 << 20

// locate finds the filter's large sub-filters' bits, after each growth:
// every bit of the last sub-filter (all tested, then set for a new item)
// and the first of each other one (a bit there is clear for most items,
// which ends its test).
func (sh *rbShard) locate(f *rbloom.Filter) {
	hd := f.Header()
	sh.links = sh.links[:0]
	var off, next uint64 // the filter's bytes read, and where the next sub-filter starts
	i := 0
	for it, b := range f.Chunks() {
		if it == 1 {
			continue
		}
		if off == next && i < len(hd.Links) {
			l := &hd.Links[i]
			if l.Bytes >= rbPrefetchBytes {
				k := uint32(1)
				if i == len(hd.Links)-1 {
					k = l.Hashes
				}
				sh.links = append(sh.links, rbLink{mod: l2bloom.NewModulo(l.Modulus()), probes: k, base: uintptr(unsafe.Pointer(&b[0]))})
			}
			next += l.Bytes
			i++
		}
		off += uint64(len(b))
	}
}

// prefetchLines appends the addresses BF.ADD of h is likeliest to touch
// in the large sub-filters.
func (sh *rbShard) prefetchLines(a []uintptr, h rbloom.Hash) []uintptr {
	for _, l := range sh.links {
		for j := range l.probes {
			a = append(a, l.base+uintptr(l.mod.Of(h.A+uint64(j)*h.B)>>3))
		}
	}
	return a
}

func newRBTier(rb *ReplayRedisBloom, capacity uint64, budget *filterBudget) (*rbTier, error) {
	t := &rbTier{router: rb.Router, budget: budget, shards: make([]rbShard, rb.Router.Shards())}
	p := rb.params(capacity)
	mem, err := p.Memory()
	if err != nil {
		return nil, err
	}
	for s := range t.shards {
		if budget.used+int64(mem)+rbShardBytes > budget.share {
			return nil, &ReplayMemError{Shard: rb.Router.Name(s), SubFilter: 1, Bytes: mem, Used: budget.used, Share: budget.share,
				Need: replayFilterMem(*budget.opts, ReplayReservedBytes(*budget.opts))}
		}
		f, err := rbloom.NewFilter(p, budget.share)
		if err != nil {
			return nil, err
		}
		budget.used += int64(f.Header().Bytes()) + rbShardBytes
		t.filters = append(t.filters, f)
		l := &f.Header().Links[0]
		t.shards[s] = rbShard{st: ReplayShard{Name: rb.Router.Name(s)}, miss: 1, last: newFillRate(l.Modulus(), int(l.Hashes))}
		t.shards[s].locate(f)
	}
	return t, nil
}

// rate is the formula's false-positive rate of shard s's filter now.
func (t *rbTier) rate(s int) float64 {
	sh := &t.shards[s]
	return 1 - sh.miss*(1-sh.last.rate())
}

// add is BF.ADD of the item of hash h to shard s's filter, within the
// filters' share of memory.
func (t *rbTier) add(s int, h rbloom.Hash) (rbloom.Added, error) {
	f := t.filters[s]
	hd := f.Header()
	if hd.Room() == 0 && hd.Scaling() && !f.ExistsHash(h) {
		next, err := hd.Next()
		if err != nil {
			return rbloom.Added{}, fmt.Errorf("replay: shard %s: %w", t.router.Name(s), err)
		}
		b, need := t.budget, int64(next.Bytes)+rbLinkBytes
		if b.used+need > b.share {
			return rbloom.Added{}, &ReplayMemError{Shard: t.router.Name(s), SubFilter: len(hd.Links) + 1, Bytes: next.Bytes, Used: b.used, Share: b.share,
				Need: replayFilterMem(*b.opts, b.used+need)}
		}
	}
	a, err := f.AddHash(h)
	if err != nil {
		if errors.Is(err, rbloom.ErrFull) {
			return a, err
		}
		return a, fmt.Errorf("replay: shard %s: %w", t.router.Name(s), err)
	}
	if a.New {
		sh := &t.shards[s]
		if a.Grew {
			l := &hd.Links[a.Link]
			t.budget.used += int64(l.Bytes) + rbLinkBytes
			sh.miss *= 1 - sh.last.rate()
			sh.last = newFillRate(l.Modulus(), int(l.Hashes))
			sh.locate(f)
		}
		sh.last.add()
	}
	return a, nil
}

// mems are the filters' bit arrays, for prefault.
func (t *rbTier) mems() [][]byte {
	var m [][]byte
	for _, f := range t.filters {
		for it, b := range f.Chunks() {
			if it > 1 {
				m = append(m, b)
			}
		}
	}
	return m
}

// stats fills in the tier's figures from the filters as they are now.
func (t *rbTier) stats(tier *ReplayTier) {
	var now, formula float64
	for s, f := range t.filters {
		hd := f.Header()
		st := t.shards[s].st
		fill := f.Fill()
		var set, bits uint64
		for i := range hd.Links {
			set += fill[i]
			bits += hd.Links[i].Modulus()
		}
		st.Items, st.SubFilters, st.Capacity = hd.Size, len(hd.Links), hd.Capacity()
		st.Bytes = int64(hd.Memory())
		st.Fill = float64(set) / float64(bits)
		st.FPRNow = hd.FPR(fill)
		tier.Bytes += st.Bytes
		tier.Keys += st.Items
		now += st.FPRNow
		formula += t.rate(s)
		tier.Shards = append(tier.Shards, st)
	}
	tier.FPRNow = now / float64(len(t.filters))
	tier.FPRFinal = formula / float64(len(t.filters))
}
