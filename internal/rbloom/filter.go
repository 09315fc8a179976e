package rbloom

import (
	"fmt"
	"iter"
	"math"
	"slices"
)

// Params are BF.RESERVE's: BF.RESERVE key Error Capacity [EXPANSION n]
// [NONSCALING].
type Params struct {
	Capacity   uint64
	Error      float64
	Expansion  uint32 // 0: the module's default, 2
	NonScaling bool
	// BPE gives a sub-filter's bits per entry for its error rate; nil:
	// the package's BPE. A caller that must match a server's libm to the
	// last bit whatever it is can ask the server (see BPE).
	BPE func(errRate float64) float64
}

// DefaultExpansion is the module's EXPANSION when none is given, and the
// growth a NONSCALING filter's header carries.
const DefaultExpansion = 2

// tightening is the module's ERROR_TIGHTENING_RATIO: a scaling filter's
// first sub-filter has half the error asked for, and each next one half
// the last's, so that their rates sum to less than the error asked for.
const tightening = 0.5

// Check refuses what BF.RESERVE refuses, in its words.
func (p Params) Check() error {
	switch {
	case !(p.Error > 0 && p.Error < 1):
		return fmt.Errorf("%w: error rate %g, want 0 < error < 1", ErrParams, p.Error)
	case p.Capacity == 0 || p.Capacity > math.MaxInt64:
		return fmt.Errorf("%w: capacity %d, want 1 to %d", ErrParams, p.Capacity, int64(math.MaxInt64))
	case p.NonScaling && p.Expansion != 0:
		return fmt.Errorf("%w: nonscaling filters cannot expand", ErrParams)
	}
	return nil
}

// options are the header's options for a filter of these parameters, as
// BF.RESERVE sets them.
func (p Params) options() uint32 {
	o := uint32(OptForce64 | OptNoRound)
	if p.NonScaling {
		o |= OptNoScaling
	}
	return o
}

func (p Params) bpe() func(float64) float64 {
	if p.BPE != nil {
		return p.BPE
	}
	return BPE
}

// BPE is the bits per entry the module gives a sub-filter of error rate
// errRate: -ln(errRate)/ln(2)², with ln(2)² its 15-digit constant and ln
// correctly rounded (crLog: the server's glibc log agrees but in about 65
// arguments in a million).
// Where that is not enough, the server itself answers:
// BF.RESERVE k errRate 1 NONSCALING makes one sub-filter of errRate
// exactly, whose bpe is in BF.SCANDUMP k 0's header.
func BPE(errRate float64) float64 {
	bpe := -(crLog(errRate) / moduleLn2Sq)
	if bpe < 0 {
		bpe = -bpe
	}
	return bpe
}

// SizeLink is the sub-filter the module makes for entries items at error
// rate errRate under these options (its bloom_init). Bits per entry: bpe =
// bpeOf(errRate) (nil: BPE). Bits: with OptNoRound, entries·bpe truncated
// (at least 1); with OptEntsIsBits, 2^entries; otherwise the power of two
// above entries·bpe, with entries grown to fill it. Then bytes rounded up
// to whole 64-bit words, bits = bytes·8, and hashes = ceil(ln(2)·bpe). A
// size the module's arithmetic cannot represent (it would overflow or be
// undefined in C), or larger than maxBytes, is ErrGrow.
func SizeLink(entries uint64, errRate float64, options uint32, bpeOf func(float64) float64, maxBytes uint64) (Link, error) {
	if entries < 1 || !(errRate > 0 && errRate < 1) {
		return Link{}, fmt.Errorf("%w: %d entries at error %g", ErrGrow, entries, errRate)
	}
	if bpeOf == nil {
		bpeOf = BPE
	}
	bpe := bpeOf(errRate)
	if !(bpe > 0 && bpe <= math.MaxFloat64) {
		return Link{}, fmt.Errorf("%w: %g bits per entry", ErrGrow, bpe)
	}
	l := Link{Error: errRate, BPE: bpe, Entries: entries}
	limit := float64(min(maxBytes, MaxLinkBytes)) * 8
	var bits uint64
	switch {
	case options&OptEntsIsBits != 0:
		if entries >= 64 || float64(uint64(1)<<entries) > limit {
			return Link{}, fmt.Errorf("%w: 2^%d bits", ErrGrow, entries)
		}
		l.N2 = uint8(entries)
		bits = 1 << entries
		e := float64(bits) / bpe
		if e >= 1<<64 {
			return Link{}, fmt.Errorf("%w: %.0f entries", ErrGrow, e)
		}
		l.Entries = uint64(e)
	case options&OptNoRound != 0:
		f := float64(entries) * bpe
		if f >= limit {
			return Link{}, fmt.Errorf("%w: %.0f bits", ErrGrow, f)
		}
		bits = max(uint64(f), 1)
	default:
		f := float64(entries) * bpe
		bn2 := math.Logb(f)
		// n2 = logb+1 is a C conversion to uint8, undefined below 0, and
		// 2^64 is past any shift.
		if !(bn2 >= -1 && bn2 <= 62) || math.Ldexp(1, int(bn2)+1) > limit {
			return Link{}, fmt.Errorf("%w: %.0f bits", ErrGrow, f)
		}
		l.N2 = uint8(bn2 + 1)
		bits = 1 << l.N2
		// The rounding up leaves room for more items, which the module
		// counts as capacity: entries += (bits - entries·bpe)/bpe, each
		// step truncated to an integer as its size_t arithmetic does.
		diff := uint64(float64(bits) - f)
		l.Entries += uint64(float64(diff) / bpe)
	}
	if bits%64 != 0 {
		l.Bytes = (bits/64 + 1) * 8
	} else {
		l.Bytes = bits / 8
	}
	if l.Bytes > min(maxBytes, MaxLinkBytes) {
		return Link{}, fmt.Errorf("%w: %d bytes", ErrGrow, l.Bytes)
	}
	l.Bits = l.Bytes * 8
	h := math.Ceil(moduleLn2 * bpe)
	if h > MaxHashes {
		return Link{}, fmt.Errorf("%w: %.0f hashes", ErrGrow, h)
	}
	l.Hashes = uint32(h)
	return l, nil
}

// Filter is a whole filter in memory: one a builder makes as the module
// would, item by item, or one a dump filled. Not safe for concurrent use.
type Filter struct {
	h      Header
	data   [][]byte
	probes []probe
	bpe    func(float64) float64
	left   uint64 // bytes the budget still allows
	// fill is the bits set in each sub-filter, counted as Add sets them
	// (nil for a loaded filter: Fill counts them), so that Fill need not
	// read every byte again.
	fill []uint64
}

// NewFilter is the filter BF.RESERVE makes: one empty sub-filter of the
// capacity, at half the error rate (the whole rate for NONSCALING). budget
// bounds the bytes of all the sub-filters it may ever allocate; a growth
// past it is ErrGrow, before anything is allocated.
func NewFilter(p Params, budget int64) (*Filter, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	growth := p.Expansion
	if growth == 0 {
		growth = DefaultExpansion
	}
	f := &Filter{h: Header{Options: p.options(), Growth: growth}, bpe: p.bpe(), left: uint64(max(budget, 0)), fill: []uint64{}}
	e := p.Error
	if !p.NonScaling {
		e *= tightening
	}
	if err := f.grow(p.Capacity, e); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrParams, err)
	}
	return f, nil
}

func (f *Filter) grow(entries uint64, errRate float64) error {
	l, err := SizeLink(entries, errRate, f.h.Options, f.bpe, f.left)
	if err != nil {
		return err
	}
	f.left -= l.Bytes
	f.h.Links = append(f.h.Links, l)
	f.data = append(f.data, make([]byte, l.Bytes))
	f.probes = append(f.probes, l.probe())
	if f.fill != nil {
		f.fill = append(f.fill, 0)
	}
	return nil
}

// Header is the filter's header, live: the caller must not change it.
func (f *Filter) Header() *Header { return &f.h }

// Exists is BF.EXISTS: whether all of the item's bits are set in some
// sub-filter.
func (f *Filter) Exists(item []byte) bool { return f.ExistsHash(f.h.Hash(item)) }

// ExistsHash is Exists for an item whose hash the caller has.
func (f *Filter) ExistsHash(h Hash) bool {
	for i := len(f.probes) - 1; i >= 0; i-- {
		if f.probes[i].all(f.data[i], h) {
			return true
		}
	}
	return false
}

// Added is what BF.ADD did.
type Added struct {
	New  bool // its answer: 1, the item was not present and now is; 0, it was present (or a false positive)
	Link int  // the sub-filter a new item went to
	Grew bool // a sub-filter was appended for it
}

// Add is BF.ADD: an item present in some sub-filter is left alone (answer
// 0); a new one goes to the last sub-filter, after appending a new one of
// the last's capacity times the expansion and half its error rate if the
// last holds its capacity already. A NONSCALING filter that is full
// refuses a new item (ErrFull) and stays as it was, as the module does.
func (f *Filter) Add(item []byte) (Added, error) { return f.AddHash(f.h.Hash(item)) }

// AddHash is Add for an item whose hash the caller has.
func (f *Filter) AddHash(h Hash) (Added, error) {
	if f.ExistsHash(h) {
		return Added{}, nil
	}
	var a Added
	cur := &f.h.Links[len(f.h.Links)-1]
	if cur.Size >= cur.Entries {
		if f.h.Options&OptNoScaling != 0 {
			return Added{}, ErrFull
		}
		// The module's size_t product: it wraps, and a wrap to 0 fails.
		if err := f.grow(cur.Entries*uint64(f.h.Growth), cur.Error*tightening); err != nil {
			return Added{}, err
		}
		a.Grew = true
	}
	k := len(f.h.Links) - 1
	p, b := f.probes[k], f.data[k]
	var set uint64
	for i := range p.hashes {
		set += setBit(b, p.mod.Of(h.A+uint64(i)*h.B))
	}
	if f.fill != nil {
		f.fill[k] += set
	}
	f.h.Links[k].Size++
	f.h.Size++
	a.New, a.Link = true, k
	return a, nil
}

// Fill is the bits set in each sub-filter, below its modulus.
func (f *Filter) Fill() []uint64 {
	if f.fill != nil {
		return slices.Clone(f.fill)
	}
	fill := make([]uint64, len(f.data))
	for i, b := range f.data {
		fill[i] = onesBelow(b, 0, f.probes[i].mod.M())
	}
	return fill
}

// Chunks are the filter as BF.SCANDUMP gives it and BF.LOADCHUNK takes it:
// (1, header), then each sub-filter's bytes in chunks of at most MaxChunk
// that never cross a sub-filter, each with the iterator after it. The
// chunks alias the filter's memory: valid until its next Add.
func (f *Filter) Chunks() iter.Seq2[int64, []byte] {
	return func(yield func(int64, []byte) bool) {
		hdr, _ := f.h.AppendBinary(nil)
		if !yield(1, hdr) {
			return
		}
		it := int64(1)
		for _, b := range f.data {
			for len(b) > 0 {
				n := min(len(b), MaxChunk)
				it += int64(n)
				if !yield(it, b[:n]) {
					return
				}
				b = b[n:]
			}
		}
	}
}

// Loader builds a Filter from a dump read whole: its header, then every
// chunk in order.
type Loader struct {
	f *Filter
	r *Reader
}

// NewLoader starts loading a filter of this header (checked as
// ParseHeader checks it), whose bit arrays (h.Bytes()) must fit in budget,
// or it is ErrBudget before they are allocated.
func NewLoader(h *Header, budget int64) (*Loader, error) {
	if err := h.Check(); err != nil {
		return nil, err
	}
	if n := h.Bytes(); budget < 0 || n > uint64(budget) {
		return nil, fmt.Errorf("%w: %d bytes of sub-filters, %d allowed", ErrBudget, n, budget)
	}
	f := &Filter{h: *h, bpe: BPE, left: uint64(budget) - h.Bytes()}
	f.h.Links = append([]Link(nil), h.Links...)
	for i := range f.h.Links {
		f.data = append(f.data, make([]byte, f.h.Links[i].Bytes))
		f.probes = append(f.probes, f.h.Links[i].probe())
	}
	r, err := f.h.NewReader(0, f.h.Bytes())
	if err != nil {
		return nil, err
	}
	return &Loader{f: f, r: r}, nil
}

// Iter is the iterator to pass to the next BF.SCANDUMP.
func (l *Loader) Iter() int64 { return l.r.Iter() }

// Done reports whether every byte has been loaded.
func (l *Loader) Done() bool { return l.r.Done() }

// Load takes one BF.SCANDUMP answer after the header.
func (l *Loader) Load(iter int64, data []byte) error {
	p, err := l.r.Next(iter, data)
	if err != nil {
		return err
	}
	if len(p.Data) > 0 {
		copy(l.f.data[p.Link][p.Off:], p.Data)
	}
	return nil
}

// Filter is the loaded filter, once Done; adds to it then go on as the
// module's would (new sub-filters sized with BPE).
func (l *Loader) Filter() *Filter { return l.f }
