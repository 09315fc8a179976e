package rbloom

import (
	"fmt"
	"strconv"
	"testing"
)

// BenchmarkHash: the hash pair of items of the sizes the items take (fp:
// 32 hex digits; sha256: 64).
func BenchmarkHash(b *testing.B) {
	for _, n := range []int{16, 32, 64} {
		item := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				item[0]++
				_ = HashItem(OptForce64, item)
			}
		})
	}
}

// benchFilter is a filter of capacity c at 1% grown by 7c items to three
// sub-filters (c, 2c, 4c), as a shard that scaled twice; probes are items
// it holds and items it does not, as 32 hex digits (item=fp).
func benchFilter(b *testing.B, c uint64) (*Filter, [][]byte, [][]byte) {
	b.Helper()
	f, err := NewFilter(Params{Capacity: c, Error: 0.01}, 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	in := make([][]byte, 0, 1<<16)
	step := max(7*c>>16, 1)
	for i := range 7 * c {
		it := AppendFP(nil, i*0x9e3779b97f4a7c15, i)
		f.Add(it)
		if i%step == 0 && len(in) < cap(in) {
			in = append(in, it)
		}
	}
	if len(in) != 1<<16 {
		b.Fatalf("%d present items, want %d", len(in), 1<<16)
	}
	out := make([][]byte, 1<<16)
	for i := range out {
		out[i] = AppendFP(nil, uint64(i)*0x9e3779b97f4a7c15, 1<<62|uint64(i))
	}
	return f, in, out
}

// BenchmarkEvaluate: hash and evaluate a key against a whole chain of
// three sub-filters, as an audit's pass that holds the shard: present
// keys (found in some sub-filter) and absent ones (tested against all).
// The small chain stays in cache, the large one (42 MiB) does not.
func BenchmarkEvaluate(b *testing.B) {
	for _, c := range []uint64{1 << 14, 1 << 22} {
		f, in, out := benchFilter(b, c)
		h := f.Header()
		w, err := h.Window(Pass{0, h.Bytes()}, make([]byte, h.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		for it, d := range f.Chunks() {
			if it != 1 {
				if err := w.Load(it, d); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, set := range []struct {
			name  string
			items [][]byte
		}{{"present", in}, {"absent", out}} {
			b.Run(fmt.Sprintf("%dMiB/%s/Exists", h.Bytes()>>20, set.name), func(b *testing.B) {
				i := 0
				for b.Loop() {
					f.Exists(set.items[i&(len(set.items)-1)])
					i++
				}
			})
			b.Run(fmt.Sprintf("%dMiB/%s/Mark", h.Bytes()>>20, set.name), func(b *testing.B) {
				m := NewMarks(len(set.items))
				i := 0
				for b.Loop() {
					k := i & (len(set.items) - 1)
					if k == 0 {
						m = NewMarks(len(set.items))
					}
					w.Mark(m, k, set.items[k])
					i++
				}
			})
		}
	}
}

// BenchmarkAdd: the builder's BF.ADD, per item, into a filter that grows.
func BenchmarkAdd(b *testing.B) {
	f, err := NewFilter(Params{Capacity: 1 << 20, Error: 0.01}, 1<<40)
	if err != nil {
		b.Fatal(err)
	}
	var it []byte
	i := uint64(0)
	for b.Loop() {
		it = AppendFP(it[:0], i*0x9e3779b97f4a7c15, i)
		f.Add(it)
		i++
	}
}
