package join

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fpdedup/fpdedup/fpstore"
)

// Reader gives sorted fingerprints in batches; a batch is valid until
// the next call, and nil means the end.
type Reader interface {
	Next() ([]fpstore.Fingerprint, error)
}

// cursorReader reads an index in ascending order (NewCursorReader).
type cursorReader struct {
	c   *fpstore.Cursor
	buf []fpstore.Fingerprint
}

// NewCursorReader reads x in ascending order.
func NewCursorReader(x *fpstore.Index) Reader {
	return &cursorReader{c: x.Cursor(), buf: make([]fpstore.Fingerprint, 8192)}
}

func (r *cursorReader) Next() ([]fpstore.Fingerprint, error) {
	n, err := r.c.Read(r.buf)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.buf[:n], nil
}

// chanReader runs a producer in its own goroutine and hands its batches
// over a channel, so reading the online side (network, parsing, sorting)
// overlaps with the join.
type chanReader struct {
	ch     chan []fpstore.Fingerprint
	free   chan []fpstore.Fingerprint
	errc   chan error
	cancel context.CancelFunc
	prev   []fpstore.Fingerprint
	done   bool
}

func startProducer(ctx context.Context, produce func(ctx context.Context, emit func([]fpstore.Fingerprint) error) error) *chanReader {
	ctx, cancel := context.WithCancel(ctx)
	r := &chanReader{
		ch:     make(chan []fpstore.Fingerprint, 4),
		free:   make(chan []fpstore.Fingerprint, 6),
		errc:   make(chan error, 1),
		cancel: cancel,
	}
	go func() {
		defer close(r.ch)
		r.errc <- produce(ctx, func(b []fpstore.Fingerprint) error {
			var c []fpstore.Fingerprint
			select {
			case c = <-r.free:
			default:
			}
			c = append(c[:0], b...)
			select {
			case r.ch <- c:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	}()
	return r
}

func (r *chanReader) Next() ([]fpstore.Fingerprint, error) {
	if r.prev != nil {
		select {
		case r.free <- r.prev:
		default:
		}
		r.prev = nil
	}
	if r.done {
		return nil, nil
	}
	b, ok := <-r.ch
	if !ok {
		r.done = true
		return nil, <-r.errc
	}
	r.prev = b
	return b, nil
}

// stop ends the producer (after an error of the consumer) and waits for it.
func (r *chanReader) stop() {
	r.cancel()
	if !r.done {
		for range r.ch {
		}
		r.done = true
		<-r.errc
	}
}

// checker filters a sorted online stream: fingerprints outside the index's
// covered range are counted and dropped (the index says nothing of them),
// repeats are counted and dropped (a BINARY(32) column may hold digests
// that share their first 128 bits), and an order violation is an error.
type checker struct {
	rng        fpstore.Range
	what       string
	prev       fpstore.Fingerprint
	started    bool
	outside    int64
	repeats    int64
	distinct   int64
	downstream func([]fpstore.Fingerprint) error
	scratch    []fpstore.Fingerprint
}

func (c *checker) emit(b []fpstore.Fingerprint) error {
	out := c.scratch[:0]
	for _, fp := range b {
		if !c.rng.Contains(fp) {
			c.outside++
			continue
		}
		if c.started {
			switch fp.Compare(c.prev) {
			case 0:
				c.repeats++
				continue
			case -1:
				return fmt.Errorf("%w: %s came after %s in %s; for a CHAR column, is the hex mixed-case under a binary collation? (lowercase hex, or a BINARY column, sorts as fingerprints do)", ErrUnsorted, fp, c.prev, c.what)
			}
		}
		c.prev, c.started = fp, true
		out = append(out, fp)
	}
	c.scratch = out
	c.distinct += int64(len(out))
	if len(out) == 0 {
		return nil
	}
	return c.downstream(out)
}

// adder takes fingerprints in ascending order: an index writer, a spool.
type adder interface {
	Add(fps ...fpstore.Fingerprint) error
}

// sink collects one side's fingerprints: a count, the first samples, and
// an optional adder (nil: none), in batches.
type sink struct {
	n       int64
	samples []string
	max     int
	w       adder
	buf     []fpstore.Fingerprint
}

func newSink(max int, w adder) *sink {
	return &sink{max: max, w: w, buf: make([]fpstore.Fingerprint, 0, 4096), samples: []string{}}
}

func (s *sink) add(fp fpstore.Fingerprint) error {
	s.n++
	if len(s.samples) < s.max {
		s.samples = append(s.samples, fp.String())
	}
	if s.w == nil {
		return nil
	}
	if s.buf = append(s.buf, fp); len(s.buf) == cap(s.buf) {
		return s.flush()
	}
	return nil
}

func (s *sink) flush() error {
	if s.w == nil || len(s.buf) == 0 {
		return nil
	}
	err := s.w.Add(s.buf...)
	s.buf = s.buf[:0]
	return err
}

// mergeJoin walks two sorted unique streams in step.
func mergeJoin(ctx context.Context, off, on Reader, both *int64, missing, extra *sink) error {
	var a, b []fpstore.Fingerprint
	aEOF, bEOF := false, false
	var err error
	for {
		if len(a) == 0 && !aEOF {
			if a, err = off.Next(); err != nil {
				return err
			}
			aEOF = a == nil
		}
		if len(b) == 0 && !bEOF {
			if b, err = on.Next(); err != nil {
				return err
			}
			bEOF = b == nil
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
		}
		switch {
		case aEOF && bEOF:
			return nil
		case bEOF:
			for _, fp := range a {
				if err := missing.add(fp); err != nil {
					return err
				}
			}
			a = a[:0]
			continue
		case aEOF:
			for _, fp := range b {
				if err := extra.add(fp); err != nil {
					return err
				}
			}
			b = b[:0]
			continue
		}
		i, j := 0, 0
		for i < len(a) && j < len(b) {
			x, y := a[i], b[j]
			switch {
			case x.Hi < y.Hi || x.Hi == y.Hi && x.Lo < y.Lo:
				if err := missing.add(x); err != nil {
					return err
				}
				i++
			case x == y:
				*both++
				i++
				j++
			default:
				if err := extra.add(y); err != nil {
					return err
				}
				j++
			}
		}
		a, b = a[i:], b[j:]
	}
}
