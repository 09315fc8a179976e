package rbloom

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"

	"github.com/fpdedup/fpdedup/internal/l2bloom"

	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// TestCRLog: crLog against ln computed with Python's decimal at 60 digits
// and rounded to a double (float(Decimal(x).ln())); the last four are
// arguments where glibc 2.36's log is 1 ULP off.
func TestCRLog(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{0.01, -4.605170185988091},
		{0.005, -5.298317366548036},
		{0.001, -6.907755278982137},
		{1e-10, -23.025850929940457},
		{0.5, -0.6931471805599453},
		{0.9999999999999999, -1.1102230246251565e-16},
		{5e-324, -744.4400719213812},
		{1.5, 0.4054651081081644},
		{1024.0, 6.931471805599453},
		{1e+300, 690.7755278982137},
		{2.34375e-09, -19.87151362620983},
		{0.7575958187696579, -0.27760525617294063},
		{0.8941633349579339, -0.11186681920124393},
		{0.018905189898268882, -3.9683187968196094},
	} {
		if got := crLog(c.x); got != c.want {
			t.Errorf("crLog(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

// TestSizeLinkAgainstModule: the first sub-filter BF.RESERVE makes, for
// rates people choose and capacities from 1 up, scaling and not: every
// field of the module's header equals SizeLink's. Then the one rate among
// them where glibc's log is off by an ULP, 2.34375e-9: BPE differs from
// the module in the last bit of bpe only, and a BPE asked of the server
// (BF.RESERVE … 1 NONSCALING) makes the header byte-identical.
func TestSizeLinkAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	ctx := context.Background()
	first := func(key string, args ...any) Link {
		t.Helper()
		if err := c.Do(ctx, append([]any{"BF.RESERVE", key}, args...)...).Err(); err != nil {
			t.Fatalf("BF.RESERVE %s %v: %v", key, args, err)
		}
		d := scandump(t, c, key)
		c.Del(ctx, key)
		h, err := ParseHeader(d[0].data, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return h.Links[0]
	}
	n := 0
	for _, m := range []float64{1, 2, 2.5, 5, 7.5} {
		for k := 1; k <= 8; k++ {
			e := m * math.Pow(10, -float64(k))
			for _, capacity := range []uint64{1, 7, 100, 12345, 100000} {
				for _, nonscaling := range []bool{false, true} {
					args := []any{e, capacity}
					p := Params{Capacity: capacity, Error: e, NonScaling: nonscaling}
					if nonscaling {
						args = append(args, "NONSCALING")
					}
					f, err := NewFilter(p, 1<<30)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := f.Header().Links[0], first("s", args...); got != want {
						t.Fatalf("%+v: %+v, the module's %+v", p, got, want)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d reserves agree", n)

	const odd = 2.34375e-09
	want := first("s", odd, 1000, "NONSCALING")
	f, err := NewFilter(Params{Capacity: 1000, Error: odd, NonScaling: true}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	got := f.Header().Links[0]
	if got.BPE == want.BPE || math.Abs(got.BPE-want.BPE) > 2*math.Abs(math.Nextafter(want.BPE, 0)-want.BPE) {
		t.Fatalf("bpe %v, the module's %v: the test expects them one ULP apart", got.BPE, want.BPE)
	}
	got.BPE = want.BPE
	if got != want {
		t.Fatalf("%+v differs from the module's %+v past bpe", got, want)
	}
	server := func(e float64) float64 { return first("probe", e, 1, "NONSCALING").BPE }
	f, err = NewFilter(Params{Capacity: 1000, Error: odd, NonScaling: true, BPE: server}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Header().Links[0]; got != want {
		t.Fatalf("with the server's bpe: %+v, the module's %+v", got, want)
	}
}

func TestParamsCheck(t *testing.T) {
	for _, c := range []struct {
		p  Params
		ok bool
	}{
		{Params{Capacity: 1, Error: 0.5}, true},
		{Params{Capacity: math.MaxInt64, Error: 1e-300}, true},
		{Params{Capacity: 0, Error: 0.01}, false},
		{Params{Capacity: math.MaxInt64 + 1, Error: 0.01}, false},
		{Params{Capacity: 10, Error: 0}, false},
		{Params{Capacity: 10, Error: 1}, false},
		{Params{Capacity: 10, Error: math.NaN()}, false},
		{Params{Capacity: 10, Error: 0.01, NonScaling: true, Expansion: 2}, false},
	} {
		if err := c.p.Check(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.p, err)
		}
	}
	// Accepted parameters whose filter the module cannot make either:
	// half of the least double is 0 (BF.RESERVE: "could not create
	// filter"), and a sub-filter beyond the budget.
	if _, err := NewFilter(Params{Capacity: 1, Error: 5e-324}, 1<<20); err == nil {
		t.Error("a filter of error 5e-324/2 made")
	}
	if _, err := NewFilter(Params{Capacity: 1e6, Error: 0.01}, 1<<20); err == nil {
		t.Error("a 1.2 MB filter made in a budget of 1 MiB")
	}
}

// TestFPR: the rate FPR gives from the fill equals the rate measured on
// 400000 absent items within 5 standard deviations, for a chain of five
// sub-filters, one NONSCALING filter over its capacity, and one empty.
func TestFPR(t *testing.T) {
	for _, c := range []struct {
		p     Params
		items int
	}{
		{Params{Capacity: 1000, Error: 0.05}, 25000},
		{Params{Capacity: 5000, Error: 0.01, NonScaling: true}, 5000},
		{Params{Capacity: 100, Error: 0.01}, 0},
	} {
		f, err := NewFilter(c.p, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.items {
			f.Add(strconv.AppendInt([]byte("in:"), int64(i), 10))
		}
		want := f.Header().FPR(f.Fill())
		const n = 400000
		hits := 0
		for i := range n {
			if f.Exists(strconv.AppendInt([]byte("out:"), int64(i), 10)) {
				hits++
			}
		}
		got := float64(hits) / n
		if sd := math.Sqrt(want * (1 - want) / n); math.Abs(got-want) > 5*sd+1e-9 {
			t.Errorf("%+v, %d items: FPR %.5f, measured %.5f (sd %.5f)", c.p, c.items, want, got, sd)
		}
		t.Logf("%+v, %d items, %d sub-filters: FPR %.5f, measured %.5f, target %g", c.p, c.items, len(f.Header().Links), want, got, f.Header().TargetError())
	}
}

// TestSizingAgainstModule: Memory is BF.INFO's Size of the reserved
// filter; Room is how many new items the module adds before it appends a
// sub-filter, and Next is the one it appends; Need's filter holds its n
// items in one sub-filter within the rate.
func TestSizingAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	ctx := context.Background()
	for i, p := range []Params{
		{Capacity: 100, Error: 0.01, Expansion: 3},
		{Capacity: 1, Error: 0.5},
		{Capacity: 123456, Error: 1e-6},
		{Capacity: 777, Error: 0.02, NonScaling: true},
	} {
		key := "m" + strconv.Itoa(i)
		if err := c.Do(ctx, reserveArgs(key, p)...).Err(); err != nil {
			t.Fatal(err)
		}
		mem, err := p.Memory()
		if err != nil {
			t.Fatal(err)
		}
		if got := bfInfo(t, c, key)["Size"]; uint64(got) != mem {
			t.Errorf("%+v: Memory %d, BF.INFO Size %d", p, mem, got)
		}
	}

	const key = "room"
	if err := c.Do(ctx, "BF.RESERVE", key, 0.01, 30, "EXPANSION", 3).Err(); err != nil {
		t.Fatal(err)
	}
	header := func() *Header {
		h, err := ParseHeader(scandump(t, c, key)[0].data, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	item := 0
	for range 3 {
		h := header()
		room, next := h.Room(), must(h.Next())
		for added := uint64(0); added < room; item++ {
			if madd(t, c, key, [][]byte{strconv.AppendInt(nil, int64(item), 10)})[0] == 1 {
				added++
			}
		}
		if n := len(header().Links); n != len(h.Links) {
			t.Fatalf("%d sub-filters after %d new items, Room said %d fit", n, room, room)
		}
		for {
			item++
			if madd(t, c, key, [][]byte{strconv.AppendInt(nil, int64(item), 10)})[0] == 1 {
				break
			}
		}
		after := header()
		if len(after.Links) != len(h.Links)+1 {
			t.Fatalf("%d sub-filters after Room+1 new items, want %d", len(after.Links), len(h.Links)+1)
		}
		got := after.Links[len(h.Links)]
		got.Size = 0
		if got != next {
			t.Fatalf("appended %+v, Next said %+v", got, next)
		}
	}

	for _, scaling := range []bool{true, false} {
		const n, fpr = 20000, 0.01
		p, mem, err := Need(n, fpr, 0, !scaling)
		if err != nil {
			t.Fatal(err)
		}
		f, err := NewFilter(p, int64(mem))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			f.Add(strconv.AppendInt([]byte("in:"), int64(i), 10))
		}
		h := f.Header()
		l := h.Links[0]
		expect := l2bloom.Formula(n, float64(l.Modulus()), int(l.Hashes))
		rate := h.FPR(f.Fill())
		if len(h.Links) != 1 || expect > fpr || math.Abs(rate-expect) > expect/50 || h.Memory() != mem {
			t.Fatalf("Need(%d, %g, scaling %v): %+v, %d sub-filters, FPR %g (expected %g), memory %d (said %d)",
				n, fpr, scaling, p, len(h.Links), rate, expect, h.Memory(), mem)
		}
		if smaller, _ := SizeLink(p.Capacity-1, l.Error, h.Options, nil, MaxLinkBytes); p.Capacity > n &&
			l2bloom.Formula(n, float64(smaller.Modulus()), int(smaller.Hashes)) <= fpr {
			t.Fatalf("Need(%d, %g, scaling %v): capacity %d, one less is within the rate", n, fpr, scaling, p.Capacity)
		}
		t.Logf("Need(%d, %g, scaling %v): capacity %d, %d bytes, FPR %.5f", n, fpr, scaling, p.Capacity, mem, rate)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestMemoryFor: the memory MemoryFor gives for n items is that of the
// filter the adds of n distinct items build (bar false positives, which
// append nothing), for scaling filters of several expansions and a
// NONSCALING one, from one item to many sub-filters.
func TestMemoryFor(t *testing.T) {
	for _, p := range []Params{
		{Capacity: 100, Error: 0.01},
		{Capacity: 50, Error: 0.001, Expansion: 4},
		{Capacity: 1000, Error: 0.05, Expansion: 1},
		{Capacity: 3000, Error: 0.01, NonScaling: true},
	} {
		f, err := NewFilter(p, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(3000) {
			if _, err := f.Add(fmt.Appendf(nil, "item-%d", i)); err != nil {
				t.Fatal(err)
			}
			got, err := p.MemoryFor(i + 1)
			if err != nil {
				t.Fatal(err)
			}
			if want := f.Header().Memory(); got < want {
				t.Fatalf("%+v: %d items: MemoryFor %d, the filter holds %d", p, i+1, got, want)
			}
			// A bound, not an estimate: exact but when a false positive
			// delayed a growth.
			if links := len(f.Header().Links); got > f.Header().Memory() && f.Header().Size == i+1 {
				t.Fatalf("%+v: %d items, %d sub-filters: MemoryFor %d, the filter holds %d", p, i+1, links, got, f.Header().Memory())
			}
		}
	}
	if _, err := (Params{Capacity: 1 << 62, Error: 0.5, Expansion: 1000}).MemoryFor(math.MaxUint64); err == nil {
		t.Fatal("a capacity product that wraps: no error")
	}
}
