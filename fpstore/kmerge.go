package fpstore

import (
	"container/heap"
	"io"
	"math/bits"
)

// mergeBatch is how many fingerprints a merge reads from each input at a
// time (64 KiB).
const mergeBatch = 4096

type mergeInput struct {
	c    *Cursor
	buf  []Fingerprint
	pos  int
	n    int
	idx  int // which input: subtract and intersect need to know
	done bool
}

func (m *mergeInput) cur() Fingerprint { return m.buf[m.pos] }

// advance moves to the next fingerprint, reading a batch when needed.
func (m *mergeInput) advance() error {
	m.pos++
	if m.pos < m.n {
		return nil
	}
	return m.refill()
}

// refill reads the next batch; done at the end.
func (m *mergeInput) refill() error {
	n, err := m.c.Read(m.buf)
	if err == io.EOF {
		m.done = true
		return nil
	}
	if err != nil {
		return err
	}
	m.n, m.pos = n, 0
	return nil
}

type mergeHeap []*mergeInput

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	a, b := h[i].cur(), h[j].cur()
	if a == b {
		return h[i].idx < h[j].idx
	}
	return a.Less(b)
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*mergeInput)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// SetOp is a set operation over sorted fingerprint streams.
type SetOp int

const (
	Union     SetOp = iota // in any input
	Subtract               // in the first input and in none of the others
	Intersect              // in every input
)

// MergeCursors runs op over the cursors' sorted unique streams and hands
// the result to fn in ascending batches (fn's slice is reused after it
// returns). Memory is one batch per input.
func MergeCursors(cursors []*Cursor, op SetOp, fn func([]Fingerprint) error) error {
	if len(cursors) == 2 {
		return merge2(cursors[0], cursors[1], op, make([]Fingerprint, mergeBatch), fn)
	}
	h := make(mergeHeap, 0, len(cursors))
	for i, c := range cursors {
		m := &mergeInput{c: c, buf: make([]Fingerprint, mergeBatch), pos: -1, idx: i}
		if err := m.advance(); err != nil {
			return err
		}
		if !m.done {
			h = append(h, m)
		}
	}
	out := make([]Fingerprint, 0, mergeBatch)
	if len(cursors) <= linearMergeMax {
		return mergeLinear(h, len(cursors), op, out, fn)
	}
	heap.Init(&h)
	emit := func(fp Fingerprint) error {
		out = append(out, fp)
		if len(out) == cap(out) {
			if err := fn(out); err != nil {
				return err
			}
			out = out[:0]
		}
		return nil
	}
	for h.Len() > 0 {
		fp := h[0].cur()
		// Pop every input holding fp; note which.
		holders, first := 0, false
		for h.Len() > 0 && h[0].cur() == fp {
			m := h[0]
			holders++
			if m.idx == 0 {
				first = true
			}
			if err := m.advance(); err != nil {
				return err
			}
			if m.done {
				heap.Pop(&h)
			} else {
				heap.Fix(&h, 0)
			}
		}
		keep := false
		switch op {
		case Union:
			keep = true
		case Subtract:
			keep = first && holders == 1
		case Intersect:
			keep = holders == len(cursors)
		}
		if keep {
			if err := emit(fp); err != nil {
				return err
			}
		}
	}
	if len(out) > 0 {
		return fn(out)
	}
	return nil
}

// linearMergeMax: up to this many inputs the smallest head is found by a
// scan, not a heap: container/heap's interface calls per fingerprint cost
// more than the merge itself.
const linearMergeMax = 8

func mergeLinear(ins []*mergeInput, total int, op SetOp, out []Fingerprint, fn func([]Fingerprint) error) error {
	for len(ins) > 0 {
		fp := ins[0].buf[ins[0].pos]
		for _, m := range ins[1:] {
			if c := m.buf[m.pos]; c.Less(fp) {
				fp = c
			}
		}
		holders, first := 0, false
		for k := 0; k < len(ins); {
			m := ins[k]
			if m.buf[m.pos] != fp {
				k++
				continue
			}
			holders++
			first = first || m.idx == 0
			if m.pos++; m.pos == m.n {
				if err := m.refill(); err != nil {
					return err
				}
				if m.done {
					ins = append(ins[:k], ins[k+1:]...)
					continue
				}
			}
			k++
		}
		if op == Union || op == Subtract && first && holders == 1 || op == Intersect && holders == total {
			out = append(out, fp)
			if len(out) == cap(out) {
				if err := fn(out); err != nil {
					return err
				}
				out = out[:0]
			}
		}
	}
	if len(out) > 0 {
		return fn(out)
	}
	return nil
}

// merge2 runs op over two cursors, the common case (a day into history, A
// minus B), merging from the cursors' chunks rather than copying batches
// out, with a branch-free step: on random fingerprints which input goes next is
// a coin toss, and a branchy loop pays a misprediction on every other
// fingerprint, which costs as much as building and writing the output.
func merge2(ca, cb *Cursor, op SetOp, out []Fingerprint, fn func([]Fingerprint) error) error {
	{
		k := 0
		flush := func() error {
			if k == 0 {
				return nil
			}
			err := fn(out[:k])
			k = 0
			return err
		}
		for {
			a, err := ca.span()
			if err != nil {
				return err
			}
			b, err := cb.span()
			if err != nil {
				return err
			}
			if len(a) == 0 || len(b) == 0 {
				// One side is done: the other's rest is the union's
				// tail, or the difference's, or nothing.
				rest, c := a, ca
				if len(a) == 0 {
					rest, c = b, cb
				}
				if op == Intersect || op == Subtract && c == cb {
					return flush()
				}
				for len(rest) > 0 {
					n := copy(out[k:], rest)
					k += n
					c.skip(n)
					if k == len(out) {
						if err := flush(); err != nil {
							return err
						}
					}
					if rest, err = c.span(); err != nil {
						return err
					}
				}
				return flush()
			}
			i, j, n := step2(a, b, out[k:], op)
			ca.skip(i)
			cb.skip(j)
			k += n
			if len(out)-k < 1 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
}

// step2 merges a and b into out until one of the three runs out and
// returns how many it took of each and wrote. Union writes the smaller
// head (both heads when equal are one), Subtract a's heads below b's,
// Intersect the equal ones; the comparison is two subtractions' borrows.
func step2(a, b, out []Fingerprint, op SetOp) (i, j, k int) {
	for i < len(a) && j < len(b) && k < len(out) {
		x, y := a[i], b[j]
		_, c := bits.Sub64(x.Lo, y.Lo, 0)
		_, lt := bits.Sub64(x.Hi, y.Hi, c) // x < y
		_, c = bits.Sub64(y.Lo, x.Lo, 0)
		_, gt := bits.Sub64(y.Hi, x.Hi, c) // x > y
		switch op {
		case Union:
			hi, lo := x.Hi, x.Lo
			if gt != 0 {
				hi, lo = y.Hi, y.Lo
			}
			out[k] = Fingerprint{Hi: hi, Lo: lo}
			k++
		case Subtract:
			out[k] = x
			k += int(lt)
		default:
			out[k] = x
			k += int(1 - lt - gt)
		}
		i += int(1 - gt)
		j += int(1 - lt)
	}
	return i, j, k
}
