package rbloom

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// threeLinks is a filter of three sub-filters (capacity 40, expansion 2)
// holding 200 items, and its dump.
func threeLinks(t testing.TB) (*Filter, []chunk) {
	t.Helper()
	f, err := NewFilter(Params{Capacity: 40, Error: 0.01}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := f.Add(fmt.Appendf(nil, "item%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.Header().Links) != 3 {
		t.Fatalf("%d sub-filters, the test wants 3", len(f.Header().Links))
	}
	return f, filterChunks(f)
}

// Header field offsets, for the lies below.
const (
	offNFilters = 8
	offOptions  = 12
	offLinks    = HeaderSize
	lBytes      = 0
	lBits       = 8
	lSize       = 16
	lError      = 24
	lBPE        = 32
	lHashes     = 40
	lN2         = 52
)

// TestHeaderLies: a header with one field changed is refused with the
// error that names it; every header the module refuses (BF.LOADCHUNK into
// an empty key) is refused here too, and the few refused here that the
// module would load are those no filter it makes has (moduleLoads).
func TestHeaderLies(t *testing.T) {
	f, chunks := threeLinks(t)
	good := chunks[0].data
	if _, err := ParseHeader(good, 1<<20); err != nil {
		t.Fatal(err)
	}
	l1 := offLinks + LinkSize // the second sub-filter's fields
	put64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }
	}
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
	}
	putF := func(off int, v float64) func([]byte) []byte { return put64(off, math.Float64bits(v)) }
	l := f.Header().Links[1]
	srv := rbloomtest.Start(t)
	for i, c := range []struct {
		name        string
		lie         func([]byte) []byte
		want        error
		moduleLoads bool // the module takes it: a header no filter of its could have
		unsafe      bool // the module would try to allocate what it says: never sent
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrHeaderLength, false, false},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, ErrHeaderLength, false, false},
		{"longer", func(b []byte) []byte { return append(b, 0) }, ErrHeaderLength, false, false},
		{"no sub-filters", put32(offNFilters, 0), ErrNoLinks, false, false},
		{"more sub-filters than bytes", put32(offNFilters, 4), ErrHeaderLength, false, false},
		{"2^32-1 sub-filters", put32(offNFilters, math.MaxUint32), ErrHeaderLength, false, false},
		{"unknown option", put32(offOptions, OptForce64|16), ErrOptions, false, false},
		{"chain size", put64(0, f.Header().Size+1), ErrSize, false, false},
		{"sub-filter size", put64(l1+lSize, l.Size+1), ErrSize, false, false},
		{"sizes overflow", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[l1+lSize:], math.MaxUint64)
			return b
		}, ErrSize, false, false},
		{"error 0", putF(l1+lError, 0), ErrLinkError, false, false},
		{"error 1", putF(l1+lError, 1), ErrLinkError, false, false},
		{"error NaN", putF(l1+lError, math.NaN()), ErrLinkError, true, false},
		{"bytes 0", put64(l1+lBytes, 0), ErrLinkBytes, false, false},
		{"bits not bytes*8", put64(l1+lBits, l.Bits+8), ErrBitsBytes, false, false},
		{"bytes not bits/8", put64(l1+lBytes, l.Bytes+1), ErrBitsBytes, false, false},
		{"bits 0", put64(l1+lBits, 0), ErrBitsBytes, false, false},
		// bytes·8 wraps to the bits: the module's check passes, and its
		// allocation of 2^61 bytes kills the server.
		{"bytes*8 wraps", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[l1+lBytes:], 1<<61+l.Bytes)
			return b
		}, ErrLinkBytes, true, true},
		{"a petabyte", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[l1+lBytes:], 1<<51)
			binary.LittleEndian.PutUint64(b[l1+lBits:], 1<<54)
			return b
		}, ErrLinkBytes, true, true},
		{"n2 64", func(b []byte) []byte { b[l1+lN2] = 64; return b }, ErrN2, false, false},
		{"n2 above bits", func(b []byte) []byte { b[l1+lN2] = 20; return b }, ErrN2, false, false},
		{"hashes", put32(l1+lHashes, l.Hashes+1), ErrHashes, false, false},
		{"bpe", putF(l1+lBPE, l.BPE*2), ErrHashes, false, false},
		{"bpe NaN", putF(l1+lBPE, math.NaN()), ErrHashes, false, false},
		{"bpe negative, hashes 0", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[l1+lBPE:], math.Float64bits(-1))
			binary.LittleEndian.PutUint32(b[l1+lHashes:], 0)
			return b
		}, ErrHashes, true, false},
		{"hashes 2^31", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[l1+lBPE:], math.Float64bits(1e13))
			binary.LittleEndian.PutUint32(b[l1+lHashes:], uint32(math.Ceil(moduleLn2*1e13)))
			return b
		}, ErrHashes, false, false},
		{"hashes past MaxHashes", func(b []byte) []byte {
			bpe := 1100 / moduleLn2
			binary.LittleEndian.PutUint64(b[l1+lBPE:], math.Float64bits(bpe))
			binary.LittleEndian.PutUint32(b[l1+lHashes:], uint32(math.Ceil(moduleLn2*bpe)))
			return b
		}, ErrHashes, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := c.lie(slices.Clone(good))
			_, err := ParseHeader(b, 1<<20)
			if !errors.Is(err, c.want) || !errors.Is(err, ErrBadHeader) {
				t.Fatalf("ParseHeader: %v, want %v", err, c.want)
			}
			if c.unsafe {
				return
			}
			key := fmt.Sprintf("lie%d", i)
			merr := srv.Client.Do(context.Background(), "BF.LOADCHUNK", key, 1, b).Err()
			if (merr == nil) != c.moduleLoads {
				t.Fatalf("BF.LOADCHUNK: %v; the test says the module loads it: %v", merr, c.moduleLoads)
			}
		})
	}
	if _, err := ParseHeader(good, 3*linkBookkeeping-1); !errors.Is(err, ErrBudget) {
		t.Fatalf("3 sub-filters in a budget of %d bytes: %v", 3*linkBookkeeping-1, err)
	}
}

// feed gives a Reader of the whole dump the chunks and the end; the
// first error, with the index of the chunk that caused it.
func feed(h *Header, chunks []chunk) (int, error) {
	r, err := h.NewReader(0, h.Bytes())
	if err != nil {
		return -1, err
	}
	for i, c := range chunks {
		if _, err := r.Next(c.iter, c.data); err != nil {
			return i, err
		}
	}
	return len(chunks), nil
}

// TestChunkLies: chunk streams that do not make up the header's filter
// are refused at the chunk that lies, with the error that says how.
func TestChunkLies(t *testing.T) {
	f, chunks := threeLinks(t)
	h := f.Header()
	body := chunks[1:] // one chunk a sub-filter
	end := chunk{0, nil}
	total := int64(h.Bytes())
	join := func(a, b chunk) chunk { return chunk{b.iter, append(slices.Clone(a.data), b.data...)} }
	half := func(c chunk) (chunk, chunk) {
		n := len(c.data) / 2
		return chunk{c.iter - int64(len(c.data)-n), c.data[:n]}, chunk{c.iter, c.data[n:]}
	}
	a0, b0 := half(body[0])
	for _, c := range []struct {
		name   string
		chunks []chunk
		at     int
		want   error
	}{
		{"whole", append(slices.Clone(body), end), 4, nil},
		{"halves", []chunk{a0, b0, body[1], body[2], end}, 5, nil},
		{"repeated", []chunk{body[0], body[0]}, 1, ErrChunkBackwards},
		{"backwards", []chunk{body[0], body[1], body[0]}, 2, ErrChunkBackwards},
		{"overlap", []chunk{body[0], {body[1].iter - 1, append([]byte{0}, body[1].data[:len(body[1].data)-1]...)}}, 1, ErrChunkBackwards},
		{"gap", []chunk{body[0], body[2]}, 1, ErrChunkGap},
		{"gap inside", []chunk{a0, {b0.iter, b0.data[1:]}}, 1, ErrChunkGap},
		{"crosses", []chunk{join(body[0], body[1])}, 0, ErrChunkCrosses},
		{"crosses the end", []chunk{body[0], body[1], {body[2].iter + 8, append(slices.Clone(body[2].data), make([]byte, 8)...)}}, 2, ErrChunkCrosses},
		{"past the end", []chunk{body[0], body[1], body[2], {total + 1 + 8, make([]byte, 8)}}, 3, ErrDumpLong},
		{"more after the end", []chunk{body[0], body[1], body[2], end, end}, 4, ErrDumpLong},
		{"never moves", []chunk{{1, nil}}, 0, ErrChunkSize},
		{"ends early", []chunk{body[0], end}, 1, ErrDumpShort},
		{"end with data", []chunk{body[0], body[1], body[2], {0, []byte{1}}}, 3, ErrIterator},
		{"iterator smaller than its data", []chunk{{int64(len(body[0].data)), body[0].data}}, 0, ErrIterator},
		{"negative iterator", []chunk{{-5, body[0].data}}, 0, ErrIterator},
		{"over 16 MiB", []chunk{{MaxChunk + 2, make([]byte, MaxChunk+1)}}, 0, ErrChunkSize},
	} {
		at, err := feed(h, c.chunks)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v at chunk %d", c.name, err, at)
			}
			continue
		}
		if !errors.Is(err, c.want) || !errors.Is(err, ErrBadDump) || at != c.at {
			t.Errorf("%s: %v at chunk %d, want %v at %d", c.name, err, at, c.want, c.at)
		}
	}
}

// TestPlan: passes cover the dump in order without overlap, each within
// the budget, and end on the chunk grid whenever the budget holds a
// chunk.
func TestPlan(t *testing.T) {
	for _, c := range []struct {
		h       *Header
		budgets []int64
	}{
		{&Header{Links: []Link{{Bytes: 100}, {Bytes: 8}, {Bytes: 33}}}, []int64{-1, 0, 1, 7, 8, 100, 141, 1 << 20}},
		{&Header{Links: []Link{{Bytes: 40 << 20}, {Bytes: 8}, {Bytes: 3 << 20}, {Bytes: 100 << 20}}},
			[]int64{1 << 20, MaxChunk - 1, MaxChunk, MaxChunk + 5, 3 * MaxChunk, 1 << 30}},
	} {
		h := c.h
		off := h.offsets()
		grid := func(x uint64) bool {
			for k := range h.Links {
				if x >= off[k] && x <= off[k+1] && ((x-off[k])%MaxChunk == 0 || x == off[k+1]) {
					return true
				}
			}
			return false
		}
		for _, budget := range c.budgets {
			at, n := uint64(0), 0
			for p := range h.Plan(budget) {
				n++
				if p.From != at || p.To <= p.From || p.To-p.From > uint64(max(budget, 1)) {
					t.Fatalf("budget %d: pass %+v after %d", budget, p, at)
				}
				if budget >= MaxChunk && !grid(p.To) {
					t.Fatalf("budget %d: pass %+v ends off the chunk grid", budget, p)
				}
				at = p.To
			}
			if at != h.Bytes() {
				t.Fatalf("budget %d: passes end at %d of %d", budget, at, h.Bytes())
			}
			t.Logf("%d bytes, budget %d: %d passes", h.Bytes(), budget, n)
		}
	}
}

// readPasses evaluates items against key's filter in the module in passes
// of at most budget bytes, as reconcile does: each pass read from its own
// iterator, the end confirmed after the last. It returns the marks, each
// sub-filter's fill and the number of passes.
func readPasses(t testing.TB, srv *rbloomtest.Server, key string, items [][]byte, budget int64) (*Marks, []uint64, int) {
	t.Helper()
	ctx := context.Background()
	v, err := srv.Client.Do(ctx, "BF.SCANDUMP", key, 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader([]byte(v[1].(string)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMarks(len(items))
	fill := make([]uint64, len(h.Links))
	buf := make([]byte, min(uint64(budget), h.Bytes()))
	passes := 0
	for p := range h.Plan(budget) {
		passes++
		w, err := h.Window(p, buf)
		if err != nil {
			t.Fatal(err)
		}
		for !w.Done() {
			v, err := srv.Client.Do(ctx, "BF.SCANDUMP", key, w.Iter()).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Load(v[0].(int64), []byte(v[1].(string))); err != nil {
				t.Fatalf("pass %+v: %v", p, err)
			}
		}
		if p.To == h.Bytes() {
			v, err := srv.Client.Do(ctx, "BF.SCANDUMP", key, w.Iter()).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Load(v[0].(int64), []byte(v[1].(string))); err != nil {
				t.Fatalf("the end: %v", err)
			}
		}
		w.Fill(fill)
		for i, it := range items {
			w.Mark(m, i, it)
		}
	}
	return m, fill, passes
}

// TestPassesAgainstModule: filters in the module (three or more
// sub-filters from a small capacity and an expansion, NONSCALING, one of
// more than 16 MiB) evaluated offline in passes of many sizes, from a
// byte to all of it: every item's presence equals BF.MEXISTS, present
// and absent alike, and the fill of every sub-filter is the same
// whatever the passes.
func TestPassesAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	ctx := context.Background()
	for i, tc := range []struct {
		p       Params
		added   int
		budgets []int64
	}{
		{Params{Capacity: 300, Error: 0.02, Expansion: 2}, 4000, []int64{13, 64, 999, 1 << 12, 1 << 20}},
		{Params{Capacity: 50, Error: 0.1, Expansion: 3}, 3000, []int64{5, 100, 1 << 20}},
		{Params{Capacity: 2000, Error: 0.05, NonScaling: true}, 3000, []int64{1, 700, 1 << 20}},
		{Params{Capacity: 14_000_000, Error: 0.01, Expansion: 2}, 20000, []int64{5 << 20, MaxChunk, MaxChunk + 3<<20, 1 << 30}},
	} {
		t.Run(fmt.Sprintf("%d:cap=%d", i, tc.p.Capacity), func(t *testing.T) {
			if testing.Short() && tc.p.Capacity > 1_000_000 {
				t.Skip("-short (the -race step): the 19 MB filter's passes run in the plain step; 30 s under -race")
			}
			key := fmt.Sprintf("p%d", i)
			if err := c.Do(ctx, reserveArgs(key, tc.p)...).Err(); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(i), 48))
			added := testItems(r, tc.added)
			madd(t, c, key, added)
			probe := append(slices.Clone(added), testItems(rand.New(rand.NewPCG(uint64(i), 49)), 4000)...)
			want := mexists(t, c, key, probe)
			var fill0 []uint64
			for _, budget := range tc.budgets {
				if testing.Short() && budget < 100 {
					continue // passes of a few bytes: a round trip each, minutes under -race
				}
				m, fill, passes := readPasses(t, srv, key, probe, budget)
				present := 0
				for j := range probe {
					if m.Present(j) != want[j] {
						t.Fatalf("budget %d: item %d (%q): %v, BF.MEXISTS %v", budget, j, probe[j], m.Present(j), want[j])
					}
					if want[j] {
						present++
					}
				}
				if m.Count() != present {
					t.Fatalf("budget %d: Count %d, %d present", budget, m.Count(), present)
				}
				if fill0 == nil {
					fill0 = fill
				} else if !slices.Equal(fill, fill0) {
					t.Fatalf("budget %d: fill %v, the first budget's %v", budget, fill, fill0)
				}
				t.Logf("budget %d: %d passes, %d of %d present", budget, passes, present, len(probe))
			}
		})
	}
}

// TestLoaderAgainstModule: a dump read whole into a Filter answers as
// the module, and adds to it go on as the module's adds do.
func TestLoaderAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	ctx := context.Background()
	p := Params{Capacity: 100, Error: 0.01, Expansion: 2}
	if err := c.Do(ctx, reserveArgs("ld", p)...).Err(); err != nil {
		t.Fatal(err)
	}
	items := testItems(rand.New(rand.NewPCG(7, 50)), 4000)
	madd(t, c, "ld", items[:1000])
	d := scandump(t, c, "ld")
	h, err := ParseHeader(d[0].data, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewLoader(h, int64(h.Bytes())-1); !errors.Is(err, ErrBudget) {
		t.Fatalf("a dump of %d bytes loaded in %d: %v", h.Bytes(), h.Bytes()-1, err)
	}
	ld, err := NewLoader(h, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range append(d[1:], chunk{0, nil}) {
		if err := ld.Load(ch.iter, ch.data); err != nil {
			t.Fatal(err)
		}
	}
	f := ld.Filter()
	sameChunks(t, "loaded", filterChunks(f), d)
	answers := madd(t, c, "ld", items[1000:])
	for j, it := range items[1000:] {
		a, err := f.Add(it)
		if err != nil || a.New != (answers[j] == 1) {
			t.Fatalf("add %q: %+v %v, the module %d", it, a, err, answers[j])
		}
	}
	sameChunks(t, "grown", filterChunks(f), scandump(t, c, "ld"))
	if !bytes.Equal(filterChunks(f)[0].data, scandump(t, c, "ld")[0].data) {
		t.Fatal("headers differ")
	}
}

// TestLinkBookkeeping: what ParseHeader's budget counts a sub-filter is
// its Link and its offset in a Reader.
func TestLinkBookkeeping(t *testing.T) {
	if n := unsafe.Sizeof(Link{}) + unsafe.Sizeof(uint64(0)); n != linkBookkeeping {
		t.Fatalf("a sub-filter's bookkeeping is %d bytes, linkBookkeeping says %d", n, linkBookkeeping)
	}
}

// TestExtends: a filter extends its own earlier header once items are
// added and once it grows; not one made again with other parameters,
// nor an older header, nor one whose sub-filter changed.
func TestExtends(t *testing.T) {
	f, err := NewFilter(Params{Capacity: 10, Error: 0.01}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	snap := func() *Header {
		h := *f.Header()
		h.Links = slices.Clone(h.Links)
		return &h
	}
	empty := snap()
	for i := range 5 {
		f.Add(fmt.Appendf(nil, "%d", i))
	}
	some := snap()
	for i := range 100 {
		f.Add(fmt.Appendf(nil, "x%d", i))
	}
	grown := snap()
	other, _ := NewFilter(Params{Capacity: 11, Error: 0.01}, 1<<20)
	changed := snap()
	changed.Links[0].Hashes++
	for _, c := range []struct {
		name     string
		now, old *Header
		want     bool
	}{
		{"itself", some, some, true},
		{"items added", some, empty, true},
		{"grown", grown, empty, true},
		{"older", empty, some, false},
		{"fewer sub-filters", some, grown, false},
		{"made again", other.Header(), empty, false},
		{"a field changed", changed, grown, false},
	} {
		if got := c.now.Extends(c.old); got != c.want {
			t.Errorf("%s: Extends = %v", c.name, got)
		}
	}
}

// TestFillCounted: the fill a filter counts as it adds is the bits set in
// its sub-filters (what a loaded filter's Fill counts), for filters that
// grew and one that did not, 32- and 64-bit.
func TestFillCounted(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Params
		n    int
	}{
		{"one sub-filter", Params{Capacity: 10000, Error: 0.01}, 5000},
		{"grown", Params{Capacity: 100, Error: 0.01}, 5000},
		{"expansion 4, tight", Params{Capacity: 50, Error: 0.0001, Expansion: 4}, 3000},
		{"nonscaling, full", Params{Capacity: 300, Error: 0.1, NonScaling: true}, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := NewFilter(c.p, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.n {
				if _, err := f.Add(fmt.Appendf(nil, "item-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			got := f.Fill()
			f.fill = nil // counted from the bytes
			if want := f.Fill(); !slices.Equal(got, want) {
				t.Fatalf("fill counted %v, the bytes %v", got, want)
			}
		})
	}
}

// TestMarkAll: MarkAll over several goroutines marks what Mark does key by
// key, and what the filter itself answers, in passes of many sizes (a
// sub-filter split across passes too), from blocks that start on a word
// of Marks and from blocks that do not (tested on one goroutine).
func TestMarkAll(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	f, err := NewFilter(Params{Capacity: 1000, Error: 0.01}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var items [][]byte
	for i := range 30000 {
		it := fmt.Appendf(nil, "key%d", i)
		if i%3 != 0 {
			if _, err := f.Add(it); err != nil {
				t.Fatal(err)
			}
		}
		items = append(items, it)
	}
	h := f.Header()
	if len(h.Links) < 4 {
		t.Fatalf("%d sub-filters, the test wants 4 or more", len(h.Links))
	}
	chunks := filterChunks(f)
	for _, budget := range []int64{int64(h.Bytes()), 4096, 777} {
		for _, block := range []int{8192, 5000, 64} {
			one, all := NewMarks(len(items)), NewMarks(len(items))
			buf := make([]byte, min(uint64(budget), h.Bytes()))
			for p := range h.Plan(budget) {
				w, err := h.Window(p, buf)
				if err != nil {
					t.Fatal(err)
				}
				// What BF.SCANDUMP answers for the iterator the pass asks
				// for: the rest of the chunk holding its byte.
				for !w.Done() {
					g := w.Iter() - 1
					i := slices.IndexFunc(chunks[1:], func(c chunk) bool { return c.iter-1 > g })
					c := chunks[1+i]
					tail := c.data[int64(len(c.data))-(c.iter-1-g):]
					if err := w.Load(c.iter, tail); err != nil {
						t.Fatalf("pass %+v: %v", p, err)
					}
				}
				for i, it := range items {
					w.Mark(one, i, it)
				}
				hashes := make([]Hash, 0, block)
				first := 0
				for i, it := range items {
					if hashes = append(hashes, h.Hash(it)); len(hashes) == block || i == len(items)-1 {
						w.MarkAll(all, first, hashes)
						first += len(hashes)
						hashes = hashes[:0]
					}
				}
			}
			for i, it := range items {
				if all.Present(i) != one.Present(i) || one.Present(i) != f.Exists(it) {
					t.Fatalf("budget %d, blocks of %d: key %d: MarkAll %v, Mark %v, the filter %v", budget, block, i, all.Present(i), one.Present(i), f.Exists(it))
				}
			}
			if all.Count() < 20000 {
				t.Fatalf("budget %d, blocks of %d: %d keys present, 20000 were added", budget, block, all.Count())
			}
		}
	}
}
