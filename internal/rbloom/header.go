package rbloom

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fpdedup/fpdedup/internal/l2bloom"
)

// The dump's header (the data of BF.SCANDUMP key 0, and of the first
// BF.LOADCHUNK): little-endian and packed, a chain's fields then each
// sub-filter's.
//
//	size u64 · nfilters u32 · options u32 · growth u32      (HeaderSize)
//	nfilters × { bytes u64 · bits u64 · size u64 · error f64 · bpe f64 ·
//	             hashes u32 · entries u64 · n2 u8 }          (LinkSize each)
const (
	HeaderSize = 8 + 4 + 4 + 4
	LinkSize   = 8 + 8 + 8 + 8 + 8 + 4 + 8 + 1
)

// The options of a chain (the header's options word), as the module's
// sub-filters are made with them: BF.RESERVE and BF.ADD make
// OptForce64|OptNoRound, with OptNoScaling for NONSCALING.
const (
	// OptNoRound: a sub-filter's bits are entries·bpe, not rounded up to a
	// power of two; its modulus is its bits (n2 = 0).
	OptNoRound = 1
	// OptEntsIsBits: the capacity given is log2 of the bits.
	OptEntsIsBits = 2
	// OptForce64: items are hashed with MurmurHash64A, not the 32-bit
	// MurmurHash2.
	OptForce64 = 4
	// OptNoScaling: a full filter refuses new items instead of growing.
	OptNoScaling = 8

	optKnown = OptNoRound | OptEntsIsBits | OptForce64 | OptNoScaling
)

// Bounds of a dump this package reads or makes: beyond what any filter the
// module makes reaches, and within what its iterators and this package's
// arithmetic can address.
const (
	// MaxHashes: the most hashes of any sub-filter BF.RESERVE or BF.ADD
	// can make (error 2^-1074, the least double, has 1075). A header
	// asking for more would make every item's test as slow as it says.
	MaxHashes = 1075
	// MaxLinkBytes is the largest sub-filter, 1 PiB: bits = bytes·8 and
	// iterators (int64) stay far from overflow.
	MaxLinkBytes = 1 << 50
	// MaxDumpBytes is the most bytes of all sub-filters of a chain.
	MaxDumpBytes = 1 << 52
	// MaxChunk is the most data one BF.SCANDUMP reply carries (the
	// module's MAX_SCANDUMP_SIZE): 16 MiB, never crossing a sub-filter.
	MaxChunk = 16 << 20
)

// The module's constants in a sub-filter's sizing, as its source writes
// them: ln(2)² and ln(2) to 15 digits. Their float64 values, not the exact
// ones, make bpe and hashes equal the module's.
const (
	moduleLn2Sq = 0.480453013918201
	moduleLn2   = 0.693147180559945
)

// Link is one sub-filter of a chain, as the header describes it.
type Link struct {
	Bytes   uint64  // length of its bit array
	Bits    uint64  // Bytes·8
	Size    uint64  // items added to it (each an add answered 1)
	Error   float64 // its target false-positive rate
	BPE     float64 // bits per entry: -ln(Error)/ln(2)²
	Hashes  uint32  // bits an item sets: ceil(ln(2)·BPE)
	Entries uint64  // its capacity: adds go to it until Size reaches this
	N2      uint8   // log2 of its modulus when not 0; 0: the modulus is Bits
}

// Modulus is the range of the sub-filter's bit offsets: 2^N2 when N2 is set
// (the rounded sizes: Bits may be larger, a whole 64-bit word at least,
// and the bits past 2^N2 are never used), Bits otherwise.
func (l *Link) Modulus() uint64 {
	if l.N2 > 0 {
		return 1 << l.N2
	}
	return l.Bits
}

// Header is a chain of sub-filters: the filter at one key.
type Header struct {
	Size    uint64 // items added in all (BF.INFO "Number of items inserted")
	Options uint32
	Growth  uint32 // EXPANSION: each new sub-filter's capacity is the last's times this
	Links   []Link
}

// Bytes is the length of the dump's data: every sub-filter's bytes.
func (h *Header) Bytes() uint64 {
	var n uint64
	for i := range h.Links {
		n += h.Links[i].Bytes
	}
	return n
}

// Capacity is BF.INFO's "Capacity": every sub-filter's entries.
func (h *Header) Capacity() uint64 {
	var n uint64
	for i := range h.Links {
		n += h.Links[i].Entries
	}
	return n
}

// The module's in-memory sizes that BF.INFO's "Size" counts besides the bit
// arrays (its SBChain and SBLink structs on a 64-bit build), verified
// against BF.INFO on chains of 1 to 4 sub-filters.
const (
	chainOverhead = 32
	linkOverhead  = 64
)

// Memory is BF.INFO's "Size": the bytes the filter takes in the server.
func (h *Header) Memory() uint64 {
	return chainOverhead + uint64(len(h.Links))*linkOverhead + h.Bytes()
}

// Scaling reports whether the filter grows when full (no OptNoScaling).
func (h *Header) Scaling() bool { return h.Options&OptNoScaling == 0 }

// Extends reports whether h is old's filter, perhaps grown since: the
// same options and growth, and old's sub-filters as h's first ones, equal
// but for the items added to them. A dump is read over many commands, so a
// reader that wants to know the filter it read is the one whose header it
// parsed reads the header again after the chunks: a filter deleted and
// made again, or replaced by BF.LOADCHUNK, does not extend the old one
// (unless made the same and given the same items, when the answers are
// the same too).
func (h *Header) Extends(old *Header) bool {
	if h.Options != old.Options || h.Growth != old.Growth || len(h.Links) < len(old.Links) {
		return false
	}
	for i := range old.Links {
		a, b := h.Links[i], old.Links[i]
		if a.Size < b.Size {
			return false
		}
		a.Size = b.Size
		if a != b {
			return false
		}
	}
	return h.Size >= old.Size
}

// Hash is item's hash pair in this filter.
func (h *Header) Hash(item []byte) Hash { return HashItem(h.Options, item) }

// linkBookkeeping is the memory a sub-filter's bookkeeping takes: its
// Link (64 bytes) and its offset in each Reader (8); TestLinkBookkeeping
// keeps it true.
const linkBookkeeping = 72

// ParseHeader reads a dump's header and checks it as BF.LOADCHUNK would
// (every check the module makes before it allocates a filter), and more:
// fpdedup also refuses what the module would load but cannot have made
// (see the sentinels' comments). budget bounds what parsing may allocate:
// a sub-filter's bookkeeping is about 64 bytes, so a header of more
// sub-filters than budget/64 is ErrBudget before anything is allocated.
// The sub-filters' bit arrays are not allocated here at all: see Plan.
func ParseHeader(b []byte, budget int64) (*Header, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, the chain's fields alone take %d", ErrHeaderLength, len(b), HeaderSize)
	}
	n := uint64(binary.LittleEndian.Uint32(b[8:]))
	if n == 0 {
		return nil, ErrNoLinks
	}
	if want := HeaderSize + n*LinkSize; uint64(len(b)) != want {
		return nil, fmt.Errorf("%w: %d bytes, %d sub-filters take %d", ErrHeaderLength, len(b), n, want)
	}
	if budget < 0 || n > uint64(budget)/linkBookkeeping {
		return nil, fmt.Errorf("%w: %d sub-filters' bookkeeping, %d bytes allowed", ErrBudget, n, budget)
	}
	h := &Header{
		Size:    binary.LittleEndian.Uint64(b),
		Options: binary.LittleEndian.Uint32(b[12:]),
		Growth:  binary.LittleEndian.Uint32(b[16:]),
		Links:   make([]Link, n),
	}
	p := b[HeaderSize:]
	for i := range h.Links {
		h.Links[i] = Link{
			Bytes:   binary.LittleEndian.Uint64(p),
			Bits:    binary.LittleEndian.Uint64(p[8:]),
			Size:    binary.LittleEndian.Uint64(p[16:]),
			Error:   math.Float64frombits(binary.LittleEndian.Uint64(p[24:])),
			BPE:     math.Float64frombits(binary.LittleEndian.Uint64(p[32:])),
			Hashes:  binary.LittleEndian.Uint32(p[40:]),
			Entries: binary.LittleEndian.Uint64(p[44:]),
			N2:      p[52],
		}
		p = p[LinkSize:]
	}
	if err := h.Check(); err != nil {
		return nil, err
	}
	return h, nil
}

// Check refuses a chain the module would not load, or could not have made
// (the errors say which sub-filter and which field).
func (h *Header) Check() error {
	if len(h.Links) == 0 {
		return ErrNoLinks
	}
	if h.Options&^optKnown != 0 {
		return fmt.Errorf("%w: %#x", ErrOptions, h.Options)
	}
	var items, total uint64
	for i := range h.Links {
		l := &h.Links[i]
		if err := l.check(); err != nil {
			return fmt.Errorf("sub-filter %d of %d: %w", i, len(h.Links), err)
		}
		if l.Size > math.MaxUint64-items {
			return fmt.Errorf("%w: the sub-filters' sizes overflow", ErrSize)
		}
		items += l.Size
		total += l.Bytes
		if total > MaxDumpBytes {
			return fmt.Errorf("%w: more than %d bytes in all", ErrLinkBytes, uint64(MaxDumpBytes))
		}
	}
	if items != h.Size {
		return fmt.Errorf("%w: the chain says %d items, its sub-filters %d", ErrSize, h.Size, items)
	}
	return nil
}

func (l *Link) check() error {
	switch {
	case !(l.Error > 0 && l.Error < 1):
		return fmt.Errorf("%w: error %g", ErrLinkError, l.Error)
	case l.Bytes == 0 || l.Bytes > MaxLinkBytes:
		return fmt.Errorf("%w: %d bytes", ErrLinkBytes, l.Bytes)
	case l.Bits != l.Bytes*8:
		return fmt.Errorf("%w: %d bits in %d bytes", ErrBitsBytes, l.Bits, l.Bytes)
	case l.N2 > 63 || l.N2 > 0 && l.Bits < 1<<l.N2:
		return fmt.Errorf("%w: n2 %d for %d bits", ErrN2, l.N2, l.Bits)
	}
	// The module checks only that hashes is ceil(ln(2)·bpe) as a C int,
	// which a negative, huge or NaN bpe meets with a hashes no filter it
	// makes has.
	if !(l.BPE >= 0 && moduleLn2*l.BPE <= MaxHashes) {
		return fmt.Errorf("%w: %g bits per entry", ErrHashes, l.BPE)
	}
	if l.Hashes != uint32(math.Ceil(moduleLn2*l.BPE)) {
		return fmt.Errorf("%w: %d hashes for %g bits per entry", ErrHashes, l.Hashes, l.BPE)
	}
	return nil
}

// AppendBinary appends the header as BF.SCANDUMP gives it and BF.LOADCHUNK
// takes it.
func (h *Header) AppendBinary(b []byte) ([]byte, error) {
	b = binary.LittleEndian.AppendUint64(b, h.Size)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.Links)))
	b = binary.LittleEndian.AppendUint32(b, h.Options)
	b = binary.LittleEndian.AppendUint32(b, h.Growth)
	for i := range h.Links {
		l := &h.Links[i]
		b = binary.LittleEndian.AppendUint64(b, l.Bytes)
		b = binary.LittleEndian.AppendUint64(b, l.Bits)
		b = binary.LittleEndian.AppendUint64(b, l.Size)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l.Error))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l.BPE))
		b = binary.LittleEndian.AppendUint32(b, l.Hashes)
		b = binary.LittleEndian.AppendUint64(b, l.Entries)
		b = append(b, l.N2)
	}
	return b, nil
}

// probe is what testing an item against one sub-filter needs.
type probe struct {
	mod    l2bloom.Modulo
	hashes uint32
}

func (l *Link) probe() probe { return probe{l2bloom.NewModulo(l.Modulus()), l.Hashes} }
