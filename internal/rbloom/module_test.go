package rbloom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// chunk is one BF.SCANDUMP answer.
type chunk struct {
	iter int64
	data []byte
}

// scandump reads key's whole dump as the module gives it: the header's
// answer first, then every chunk, the end (0, "") left out.
func scandump(t testing.TB, c *redis.Client, key string) []chunk {
	t.Helper()
	ctx := context.Background()
	var out []chunk
	for it := int64(0); ; {
		v, err := c.Do(ctx, "BF.SCANDUMP", key, it).Slice()
		if err != nil || len(v) != 2 {
			t.Fatalf("BF.SCANDUMP %s %d: %v %v", key, it, v, err)
		}
		next, data := v[0].(int64), []byte(v[1].(string))
		if next == 0 {
			if len(data) != 0 {
				t.Fatalf("BF.SCANDUMP %s %d: the end with %d bytes", key, it, len(data))
			}
			return out
		}
		out = append(out, chunk{next, data})
		it = next
	}
}

// bfInfo is BF.INFO key as field → value (expansion -1 for NONSCALING's nil).
func bfInfo(t testing.TB, c *redis.Client, key string) map[string]int64 {
	t.Helper()
	v, err := c.Do(context.Background(), "BF.INFO", key).Slice()
	if err != nil {
		t.Fatalf("BF.INFO %s: %v", key, err)
	}
	m := map[string]int64{}
	for i := 0; i+1 < len(v); i += 2 {
		n, ok := v[i+1].(int64)
		if !ok {
			n = -1
		}
		m[v[i].(string)] = n
	}
	return m
}

// headerInfo is what BF.INFO should say of a header.
func headerInfo(h *Header) map[string]int64 {
	exp := int64(h.Growth)
	if !h.Scaling() {
		exp = -1
	}
	return map[string]int64{"Capacity": int64(h.Capacity()), "Size": int64(h.Memory()),
		"Number of filters": int64(len(h.Links)), "Number of items inserted": int64(h.Size), "Expansion rate": exp}
}

// reserveArgs is the BF.RESERVE command for p.
func reserveArgs(key string, p Params) []any {
	a := []any{"BF.RESERVE", key, strconv.FormatFloat(p.Error, 'g', -1, 64), p.Capacity}
	if p.NonScaling {
		a = append(a, "NONSCALING")
	} else if p.Expansion != 0 {
		a = append(a, "EXPANSION", p.Expansion)
	}
	return a
}

// madd adds items one by one with BF.ADD in one pipeline and returns each
// answer: 1, 0, or -2 for "non scaling filter is full".
func madd(t testing.TB, c *redis.Client, key string, items [][]byte) []int {
	t.Helper()
	ctx := context.Background()
	out := make([]int, 0, len(items))
	for len(items) > 0 {
		batch := items[:min(len(items), 2000)]
		items = items[len(batch):]
		cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, it := range batch {
				p.Do(ctx, "BF.ADD", key, it)
			}
			return nil
		})
		for i, cmd := range cmds {
			n, err := cmd.(*redis.Cmd).Int()
			switch {
			case err != nil && err.Error() == "ERR non scaling filter is full":
				n = -2
			case err != nil:
				t.Fatalf("BF.ADD %s %q: %v", key, batch[i], err)
			}
			out = append(out, n)
		}
	}
	return out
}

// mexists asks BF.MEXISTS for items, in batches.
func mexists(t testing.TB, c *redis.Client, key string, items [][]byte) []bool {
	t.Helper()
	ctx := context.Background()
	var out []bool
	for len(items) > 0 {
		batch := items[:min(len(items), 5000)]
		items = items[len(batch):]
		args := []any{"BF.MEXISTS", key}
		for _, it := range batch {
			args = append(args, it)
		}
		v, err := c.Do(ctx, args...).Slice()
		if err != nil {
			t.Fatalf("BF.MEXISTS: %v", err)
		}
		for _, x := range v {
			out = append(out, x.(int64) == 1)
		}
	}
	return out
}

// loadchunks writes a dump into key with BF.LOADCHUNK.
func loadchunks(t testing.TB, c *redis.Client, key string, chunks []chunk) {
	t.Helper()
	for _, ch := range chunks {
		if err := c.Do(context.Background(), "BF.LOADCHUNK", key, ch.iter, ch.data).Err(); err != nil {
			t.Fatalf("BF.LOADCHUNK %s %d (%d bytes): %v", key, ch.iter, len(ch.data), err)
		}
	}
}

func filterChunks(f *Filter) []chunk {
	var out []chunk
	for it, b := range f.Chunks() {
		out = append(out, chunk{it, slices.Clone(b)})
	}
	return out
}

// testItems are n items of every length from 0 to 40 bytes, text and
// binary, a fifth of them repeats of earlier ones.
func testItems(r *rand.Rand, n int) [][]byte {
	items := make([][]byte, 0, n)
	for i := range n {
		switch {
		case i > 10 && r.IntN(5) == 0:
			items = append(items, items[r.IntN(len(items))])
		case r.IntN(3) == 0:
			b := make([]byte, r.IntN(41))
			for j := range b {
				b[j] = byte(r.Uint32())
			}
			items = append(items, b)
		default:
			items = append(items, []byte(fmt.Sprintf("key:%d:%x", i, r.Uint64()>>uint(r.IntN(64)))))
		}
	}
	return items
}

func sameChunks(t *testing.T, what string, got, want []chunk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d chunks, the module's dump has %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].iter != want[i].iter || !bytes.Equal(got[i].data, want[i].data) {
			t.Fatalf("%s: chunk %d differs: iterator %d (%d bytes), the module's %d (%d bytes)",
				what, i, got[i].iter, len(got[i].data), want[i].iter, len(want[i].data))
		}
	}
}

// TestBuilderAgainstModule: for each set of BF.RESERVE parameters, the
// same items added in the same order to the module (BF.ADD) and to a
// Filter: every answer equal (1, 0, or full), BF.INFO equal to the
// header's, BF.SCANDUMP byte for byte our Chunks; our chunks loaded with
// BF.LOADCHUNK into another key give the same BF.INFO and dump; and
// BF.MEXISTS of present and absent items equals Exists.
func TestBuilderAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	for i, p := range []Params{
		{Capacity: 100, Error: 0.01},
		{Capacity: 10, Error: 0.01, Expansion: 3},
		{Capacity: 7, Error: 0.05, Expansion: 1},
		{Capacity: 1, Error: 0.5, Expansion: 2},
		{Capacity: 3, Error: 0.2, Expansion: 5},
		{Capacity: 64, Error: 0.001, Expansion: 2},
		{Capacity: 200, Error: 0.01, NonScaling: true},
		{Capacity: 500, Error: 1e-4, Expansion: 2},
		{Capacity: 33, Error: 0.3333, Expansion: 7},
	} {
		t.Run(fmt.Sprintf("%d:cap=%d,err=%g,exp=%d,nonscaling=%v", i, p.Capacity, p.Error, p.Expansion, p.NonScaling), func(t *testing.T) {
			key, loaded := fmt.Sprintf("b%d", i), fmt.Sprintf("b%d:loaded", i)
			if err := c.Do(context.Background(), reserveArgs(key, p)...).Err(); err != nil {
				t.Fatal(err)
			}
			f, err := NewFilter(p, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(i), 44))
			items := testItems(r, 3000)
			answers := madd(t, c, key, items)
			grew := 0
			for j, it := range items {
				a, err := f.Add(it)
				want := answers[j]
				switch {
				case want == -2:
					if !errors.Is(err, ErrFull) {
						t.Fatalf("add %d (%q): the module is full, Add says %+v, %v", j, it, a, err)
					}
				case err != nil:
					t.Fatalf("add %d (%q): %v, the module answered %d", j, it, err, want)
				case a.New != (want == 1):
					t.Fatalf("add %d (%q): new=%v, the module answered %d", j, it, a.New, want)
				}
				if a.Grew {
					grew++
				}
			}
			h := f.Header()
			t.Logf("%d sub-filters, %d items; answers: %d new, %d present, %d full", len(h.Links), h.Size,
				count(answers, 1), count(answers, 0), count(answers, -2))
			if !p.NonScaling && (len(h.Links) < 3 || grew != len(h.Links)-1) {
				t.Fatalf("%d sub-filters, %d adds said they grew one: the test wants at least 3", len(h.Links), grew)
			}
			if got, want := headerInfo(h), bfInfo(t, c, key); !maps(got, want) {
				t.Fatalf("BF.INFO %v, the header says %v", want, got)
			}
			mod := scandump(t, c, key)
			ours := filterChunks(f)
			sameChunks(t, "our chunks", ours, mod)

			loadchunks(t, c, loaded, ours)
			if got, want := headerInfo(h), bfInfo(t, c, loaded); !maps(got, want) {
				t.Fatalf("BF.INFO of our chunks loaded %v, the header says %v", want, got)
			}
			sameChunks(t, "our chunks loaded", scandump(t, c, loaded), mod)

			probe := append(slices.Clone(items[:1000]), testItems(rand.New(rand.NewPCG(uint64(i), 45)), 3000)...)
			ex := mexists(t, c, key, probe)
			for j, it := range probe {
				if f.Exists(it) != ex[j] {
					t.Fatalf("Exists(%q) = %v, BF.MEXISTS %v", it, f.Exists(it), ex[j])
				}
			}
		})
	}
}

func maps(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func count(v []int, x int) (n int) {
	for _, y := range v {
		if y == x {
			n++
		}
	}
	return n
}

// TestOptionsAgainstModule: chains whose header the module loads but
// BF.RESERVE never makes (no OptForce64: the 32-bit MurmurHash2; no
// OptNoRound: power-of-two sizes, whose modulus is 2^n2 below their bits;
// OptEntsIsBits), loaded empty with BF.LOADCHUNK, then grown by the same
// adds on both sides: answers, dumps and BF.MEXISTS agree.
func TestOptionsAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	for i, tc := range []struct {
		options uint32
		entries uint64
		err     float64
		items   int
	}{
		{0, 20, 0.01, 3000},
		{OptForce64, 20, 0.01, 3000},
		{OptNoRound, 20, 0.01, 3000},
		{OptForce64, 3, 0.9, 500},  // n2 = 0 by rounding: the modulus is the 64 bits
		{OptForce64, 3, 0.3, 2000}, // n2 below 6: a 64-bit word, 2^n2 of it used
		{OptEntsIsBits | OptForce64, 10, 0.01, 60},
		{OptEntsIsBits, 12, 0.001, 200},
	} {
		t.Run(fmt.Sprintf("%d:options=%d", i, tc.options), func(t *testing.T) {
			l, err := SizeLink(tc.entries, tc.err, tc.options, nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			h := &Header{Options: tc.options, Growth: 2, Links: []Link{l}}
			hdr, _ := h.AppendBinary(nil)
			key := fmt.Sprintf("o%d", i)
			loadchunks(t, c, key, []chunk{{1, hdr}})
			ld, err := NewLoader(h, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			f := ld.Filter()
			items := testItems(rand.New(rand.NewPCG(uint64(i), 46)), tc.items)
			answers := madd(t, c, key, items)
			for j, it := range items {
				a, err := f.Add(it)
				if err != nil || a.New != (answers[j] == 1) {
					t.Fatalf("add %d (%q): %+v, %v; the module answered %d", j, it, a, err, answers[j])
				}
			}
			t.Logf("%d sub-filters, n2 %d, %d items", len(f.Header().Links), l.N2, f.Header().Size)
			if got, want := headerInfo(f.Header()), bfInfo(t, c, key); !maps(got, want) {
				t.Fatalf("BF.INFO %v, the header says %v", want, got)
			}
			sameChunks(t, "our chunks", filterChunks(f), scandump(t, c, key))
			probe := testItems(rand.New(rand.NewPCG(uint64(i), 47)), 3000)
			ex := mexists(t, c, key, probe)
			for j, it := range probe {
				if f.Exists(it) != ex[j] {
					t.Fatalf("Exists(%q) = %v, BF.MEXISTS %v", it, f.Exists(it), ex[j])
				}
			}
		})
	}
}

// TestLargeBuilderAgainstModule: a filter of more than 16 MiB comes in two
// chunks, the first of exactly MaxChunk, byte-identical to the module's;
// loaded from ours, the module's dump is ours again.
func TestLargeBuilderAgainstModule(t *testing.T) {
	srv := rbloomtest.Start(t)
	c := srv.Client
	p := Params{Capacity: 14_000_000, Error: 0.01}
	if err := c.Do(context.Background(), reserveArgs("large", p)...).Err(); err != nil {
		t.Fatal(err)
	}
	f, err := NewFilter(p, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	items := testItems(rand.New(rand.NewPCG(9, 51)), 20000)
	answers := madd(t, c, "large", items)
	for j, it := range items {
		if a, err := f.Add(it); err != nil || a.New != (answers[j] == 1) {
			t.Fatalf("add %q: %+v %v, the module %d", it, a, err, answers[j])
		}
	}
	ours := filterChunks(f)
	if len(ours) != 3 || len(ours[1].data) != MaxChunk {
		t.Fatalf("%d chunks of a %d-byte filter, the first of %d bytes", len(ours)-1, f.Header().Bytes(), len(ours[1].data))
	}
	sameChunks(t, "our chunks", ours, scandump(t, c, "large"))
	loadchunks(t, c, "large:loaded", ours)
	sameChunks(t, "our chunks loaded", scandump(t, c, "large:loaded"), ours)
}
