package rbloom

import (
	"fmt"
	"math"

	"github.com/fpdedup/fpdedup/internal/l2bloom"
)

// FPR is the false-positive rate of the filter now, from each sub-filter's
// fill (bits set, below its modulus: Window.Fill, Filter.Fill): an absent
// item is taken for present when all its bits are set in some sub-filter,
// 1 - Π (1 - (fill/M)^hashes). It treats an item's bits as independent,
// which double hashing nearly gives (TestFPR measures it).
func (h *Header) FPR(fill []uint64) float64 {
	miss := 1.0
	for i := range h.Links {
		l := &h.Links[i]
		miss *= 1 - math.Pow(float64(fill[i])/float64(l.Modulus()), float64(l.Hashes))
	}
	return 1 - miss
}

// TargetError is the error rate the filter was reserved with: its first
// sub-filter's, doubled for a scaling filter (BF.RESERVE halves it so that
// the sub-filters' rates, each half the last's, sum to less than it).
func (h *Header) TargetError() float64 {
	e := h.Links[0].Error
	if h.Scaling() {
		e /= tightening
	}
	return e
}

// Room is the number of new items the last sub-filter still takes: the
// next Room() adds of new items go to it, and the one after appends a
// sub-filter (or, NONSCALING, is refused: ErrFull).
func (h *Header) Room() uint64 {
	l := &h.Links[len(h.Links)-1]
	if l.Size >= l.Entries {
		return 0
	}
	return l.Entries - l.Size
}

// Next is the sub-filter the module would append next: the last's
// capacity times the expansion, at half its error rate. ErrFull for a
// NONSCALING filter, ErrGrow for one it could not make.
func (h *Header) Next() (Link, error) {
	if !h.Scaling() {
		return Link{}, ErrFull
	}
	l := &h.Links[len(h.Links)-1]
	return SizeLink(l.Entries*uint64(h.Growth), l.Error*tightening, h.Options, nil, MaxLinkBytes)
}

// Memory is what BF.RESERVE with these parameters takes in the server
// (BF.INFO "Size" of the empty filter), without allocating it.
func (p Params) Memory() (uint64, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	e := p.Error
	if !p.NonScaling {
		e *= tightening
	}
	l, err := SizeLink(p.Capacity, e, p.options(), p.bpe(), MaxLinkBytes)
	if err != nil {
		return 0, fmt.Errorf("%w (%v)", ErrParams, err)
	}
	return chainOverhead + linkOverhead + l.Bytes, nil
}

// Need is the filter a shard holding n items needs for a false-positive
// rate within fpr: BF.RESERVE at error fpr, with the expansion and scaling
// given, and the least capacity (at least n) whose first sub-filter holds
// the n items within fpr by the textbook rate (1 - e^(-k·n/M))^k, so that
// none is appended; and the memory it takes. The module sizes a
// sub-filter for its error at exactly its capacity, which lands a little
// above it (a NONSCALING filter of 20000 at 0.01 holds them at 0.0102), so
// a NONSCALING shard needs a capacity a little above n; a scaling one
// holds them at about fpr/2 (its first sub-filter's rate) and stays within
// fpr however it grows later.
func Need(n uint64, fpr float64, expansion uint32, nonscaling bool) (Params, uint64, error) {
	p := Params{Capacity: max(n, 1), Error: fpr, Expansion: expansion, NonScaling: nonscaling}
	if err := p.Check(); err != nil {
		return Params{}, 0, err
	}
	e := p.Error
	if !p.NonScaling {
		e *= tightening
	}
	within := func(c uint64) (bool, error) {
		l, err := SizeLink(c, e, p.options(), p.bpe(), MaxLinkBytes)
		if err != nil {
			return false, fmt.Errorf("%w (%v)", ErrParams, err)
		}
		return l2bloom.Formula(float64(n), float64(l.Modulus()), int(l.Hashes)) <= fpr, nil
	}
	// The rate falls as the capacity grows (the hashes depend on the
	// error alone); twice the items' bits is far within.
	lo, hi := p.Capacity, p.Capacity
	for {
		ok, err := within(hi)
		if err != nil {
			return Params{}, 0, err
		}
		if ok {
			break
		}
		lo, hi = hi+1, hi*2
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := within(mid)
		if err != nil {
			return Params{}, 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	p.Capacity = hi
	mem, err := p.Memory()
	if err != nil {
		return Params{}, 0, err
	}
	return p, mem, nil
}

// MemoryFor is the most memory a filter of these parameters takes once n
// items are added, as Memory counts it: the sub-filters Add appends until
// their capacities hold n (fewer adds, an item found present, take no
// more). A product of capacities that wraps, as the module's does, is an
// error.
func (p Params) MemoryFor(n uint64) (uint64, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	growth := uint64(p.Expansion)
	if growth == 0 {
		growth = DefaultExpansion
	}
	e := p.Error
	if !p.NonScaling {
		e *= tightening
	}
	entries := p.Capacity
	bytes, held := uint64(chainOverhead), uint64(0)
	for {
		l, err := SizeLink(entries, e, p.options(), p.bpe(), MaxLinkBytes)
		if err != nil {
			return 0, err
		}
		bytes += linkOverhead + l.Bytes
		held += entries
		if held >= n || p.NonScaling {
			return bytes, nil
		}
		if entries > math.MaxUint64/growth {
			return 0, fmt.Errorf("%w: %d entries times %d", ErrGrow, entries, growth)
		}
		entries *= growth
		e *= tightening
	}
}
