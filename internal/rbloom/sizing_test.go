package rbloom

import (
	"context"
	"math"
	"testing"

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
