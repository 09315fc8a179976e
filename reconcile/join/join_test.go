package join

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
)

type sliceReader struct {
	fps   []fpstore.Fingerprint
	batch int
}

func (r *sliceReader) Next() ([]fpstore.Fingerprint, error) {
	if len(r.fps) == 0 {
		return nil, nil
	}
	n := min(len(r.fps), r.batch)
	b := r.fps[:n]
	r.fps = r.fps[n:]
	return b, nil
}

// mergeJoin against a map, with batches of every size on both sides.
func TestMergeJoin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var off, on []fpstore.Fingerprint
	inOff := map[fpstore.Fingerprint]bool{}
	for i := 0; i < 5000; i++ {
		fp := fpstore.Fingerprint{Hi: rng.Uint64() >> 52, Lo: rng.Uint64()}
		switch rng.IntN(3) {
		case 0:
			off = append(off, fp)
			inOff[fp] = true
		case 1:
			on = append(on, fp)
		default:
			off = append(off, fp)
			on = append(on, fp)
			inOff[fp] = true
		}
	}
	less := func(a, b fpstore.Fingerprint) int { return a.Compare(b) }
	slices.SortFunc(off, less)
	slices.SortFunc(on, less)
	off, on = slices.Compact(off), slices.Compact(on)
	var wantBoth, wantMissing, wantExtra int64
	inOn := map[fpstore.Fingerprint]bool{}
	for _, fp := range on {
		inOn[fp] = true
		if inOff[fp] {
			wantBoth++
		} else {
			wantExtra++
		}
	}
	for _, fp := range off {
		if !inOn[fp] {
			wantMissing++
		}
	}
	for _, bs := range [][2]int{{1, 1}, {1, 7}, {100, 3}, {8192, 8192}, {5000, 1}} {
		var both int64
		missing, extra := newSink(3, nil), newSink(3, nil)
		err := mergeJoin(context.Background(), &sliceReader{off, bs[0]}, &sliceReader{on, bs[1]}, &both, missing, extra)
		if err != nil || both != wantBoth || missing.n != wantMissing || extra.n != wantExtra {
			t.Fatalf("batches %v: both %d missing %d extra %d (%v), want %d %d %d", bs, both, missing.n, extra.n, err, wantBoth, wantMissing, wantExtra)
		}
	}
}

// The checker drops repeats and what lies outside the range, and refuses
// a stream out of order.
func TestChecker(t *testing.T) {
	var got []fpstore.Fingerprint
	c := &checker{rng: fpstore.Range{Bits: 1, Index: 0}, what: "test", downstream: func(b []fpstore.Fingerprint) error {
		got = append(got, b...)
		return nil
	}}
	fp := func(hi uint64) fpstore.Fingerprint { return fpstore.Fingerprint{Hi: hi} }
	if err := c.emit([]fpstore.Fingerprint{fp(1), fp(1), fp(2), fp(1 << 63), fp(3)}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []fpstore.Fingerprint{fp(1), fp(2), fp(3)}) || c.repeats != 1 || c.outside != 1 || c.distinct != 3 {
		t.Fatalf("got %v, repeats %d, outside %d", got, c.repeats, c.outside)
	}
	if err := c.emit([]fpstore.Fingerprint{fp(2)}); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("out of order: %v", err)
	}
}
