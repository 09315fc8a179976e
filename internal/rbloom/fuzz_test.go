package rbloom

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpdedup/fpdedup/internal/rbloom/rbloomtest"
)

// encodeStream is chunks as FuzzDump takes them: iterator (int64), length
// (uint16; the fuzzer's chunks stay small) and data, one after the other.
func encodeStream(chunks []chunk) []byte {
	var b []byte
	for _, c := range chunks {
		b = binary.LittleEndian.AppendUint64(b, uint64(c.iter))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(c.data)))
		b = append(b, c.data...)
	}
	return b
}

func decodeStream(b []byte) []chunk {
	var out []chunk
	for len(b) >= 10 {
		it := int64(binary.LittleEndian.Uint64(b))
		n := min(int(binary.LittleEndian.Uint16(b[8:])), len(b)-10)
		out = append(out, chunk{it, b[10 : 10+n]})
		b = b[10+n:]
	}
	return out
}

// fuzzBudget is the memory FuzzDump's parsing and loading may take.
const fuzzBudget = 1 << 16

// FuzzDump: any header and any chunks after it. ParseHeader refuses with
// an ErrBadHeader or gives a header that encodes back to the same bytes;
// chunks are refused with an ErrBadDump or loaded (whole, when the
// sub-filters fit the budget, and in passes of 4 KiB), and what is loaded
// is what was sent; items are then evaluated without a panic, and the
// passes answer as the whole filter does.
func FuzzDump(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, hdr, stream []byte) {
		h, err := ParseHeader(hdr, fuzzBudget)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("ParseHeader: %v is not an ErrBadHeader", err)
			}
			return
		}
		if b, _ := h.AppendBinary(nil); !bytes.Equal(b, hdr) {
			t.Fatal("the header does not encode back to its bytes")
		}
		chunks := decodeStream(stream)
		items := [][]byte{nil, []byte("a"), []byte("item1"), []byte("item77"), hdr}

		var whole *Filter
		if h.Bytes() <= fuzzBudget {
			ld, err := NewLoader(h, fuzzBudget)
			if err != nil {
				t.Fatal(err)
			}
			sent := make([]byte, 0, h.Bytes())
			for _, c := range chunks {
				if ld.Done() {
					break
				}
				if err := ld.Load(c.iter, c.data); err != nil {
					if !errors.Is(err, ErrBadDump) {
						t.Fatalf("Load: %v is not an ErrBadDump", err)
					}
					break
				}
				sent = append(sent, c.data...)
			}
			if ld.Done() {
				whole = ld.Filter()
				var got []byte
				for it, b := range whole.Chunks() {
					if it != 1 {
						got = append(got, b...)
					}
				}
				if !bytes.Equal(got, sent[:len(got)]) {
					t.Fatal("the loaded filter is not the chunks sent")
				}
			}
		} else if _, err := NewLoader(h, fuzzBudget); !errors.Is(err, ErrBudget) {
			t.Fatalf("a loader for %d bytes in %d: %v", h.Bytes(), fuzzBudget, err)
		}

		// Passes of 4 KiB: the chunks are fed to each pass from where it
		// starts, as a reader asking from the pass's iterator would get them.
		m := NewMarks(len(items))
		buf := make([]byte, 4096)
		passes := 0
		for p := range h.Plan(int64(len(buf))) {
			if passes++; passes > 64 {
				return
			}
			w, err := h.Window(p, buf)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range chunks {
				if w.Done() {
					break
				}
				if c.iter != 0 && c.iter-1-int64(len(c.data)) < int64(p.From) {
					continue
				}
				if err := w.Load(c.iter, c.data); err != nil {
					if !errors.Is(err, ErrBadDump) {
						t.Fatalf("Load: %v is not an ErrBadDump", err)
					}
					return
				}
			}
			if !w.Done() {
				return
			}
			w.Fill(make([]uint64, len(h.Links)))
			for i, it := range items {
				w.Mark(m, i, it)
			}
		}
		if whole != nil {
			for i, it := range items {
				if m.Present(i) != whole.Exists(it) {
					t.Fatalf("item %q: %v in passes, %v whole", it, m.Present(i), whole.Exists(it))
				}
			}
		}
	})
}

var writeSeeds = flag.Bool("rbloom.seeds", false, "write FuzzDump's seed corpus from the real module's dumps")

// TestWriteFuzzSeeds writes testdata/fuzz/FuzzDump from real dumps of the
// module (three and more sub-filters, NONSCALING, the 32-bit hash), whole,
// cut and with bytes flipped:
//
//	go test -run TestWriteFuzzSeeds -rbloom.seeds ./internal/rbloom/
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("writes the seed corpus only with -rbloom.seeds")
	}
	srv := rbloomtest.Start(t)
	c := srv.Client
	ctx := context.Background()
	dir := filepath.Join("testdata", "fuzz", "FuzzDump")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, hdr, stream []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\n", hdr, stream)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []Params{
		{Capacity: 20, Error: 0.05, Expansion: 2},
		{Capacity: 10, Error: 0.1, Expansion: 3},
		{Capacity: 100, Error: 0.01, NonScaling: true},
	} {
		key := fmt.Sprintf("seed%d", i)
		if err := c.Do(ctx, reserveArgs(key, p)...).Err(); err != nil {
			t.Fatal(err)
		}
		var items [][]byte
		for j := range 150 {
			items = append(items, fmt.Appendf(nil, "item%d", j))
		}
		madd(t, c, key, items)
		d := scandump(t, c, key)
		hdr, body := d[0].data, append(d[1:], chunk{0, nil})
		stream := encodeStream(body)
		write(fmt.Sprintf("module-%d-whole", i), hdr, stream)
		write(fmt.Sprintf("module-%d-cut-stream", i), hdr, stream[:len(stream)*2/3])
		write(fmt.Sprintf("module-%d-cut-header", i), hdr[:len(hdr)-LinkSize/2], stream)
		write(fmt.Sprintf("module-%d-chunks-swapped", i), hdr, encodeStream(append([]chunk{body[1], body[0]}, body[2:]...)))
		for _, at := range []int{0, offNFilters, offOptions, 16, offLinks + lBytes, offLinks + lBits + 1, offLinks + lError + 7, offLinks + lBPE + 6, offLinks + lHashes, offLinks + lN2} {
			if at >= len(hdr) {
				continue
			}
			flipped := bytes.Clone(hdr)
			flipped[at] ^= 0x41
			write(fmt.Sprintf("module-%d-flip-%d", i, at), flipped, stream)
		}
		st := bytes.Clone(stream)
		st[3] ^= 0x80 // an iterator's third byte
		write(fmt.Sprintf("module-%d-flip-iterator", i), hdr, st)
	}
	// The 32-bit hash: a header of options 0, loaded, then grown by adds.
	l, err := SizeLink(20, 0.01, 0, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	h := &Header{Growth: 2, Links: []Link{l}}
	hb, _ := h.AppendBinary(nil)
	loadchunks(t, c, "seed32", []chunk{{1, hb}})
	var items [][]byte
	for j := range 100 {
		items = append(items, fmt.Appendf(nil, "item%d", j))
	}
	madd(t, c, "seed32", items)
	d := scandump(t, c, "seed32")
	write("module-32bit-whole", d[0].data, encodeStream(append(d[1:], chunk{0, nil})))
}
