package fpstore

import "io"

// extentSize is the unit an index file is written in: the x86-64 and
// arm64 (4 KiB pages) huge page size.
const extentSize = 2 << 20

// extentWriter buffers an index's bytes and hands them to the file in
// writes that start and end at multiples of extentSize from the file's
// start (all but the last). Why: a page cache with large folios (XFS;
// ext4 from Linux 6.16) sizes a folio by the write that creates it, and a
// 2 MiB folio at a 2 MiB offset is mapped by a reader's mapping (which the
// kernel aligns for files this large) with one page-table entry and one
// TLB entry instead of 512. Through bufio's 1 MiB writes only the large
// writes that bypass the buffer make 2 MiB folios; in extents the whole
// index is cached in them, which makes single lookups faster
// (BenchmarkLookup/warm's huge-mapped-%; bench/results/ab-2026-12-03-s15.md).
// Elsewhere the writes are only larger.
type extentWriter struct {
	w   io.Writer
	buf []byte // what is buffered; cap extentSize
	err error
}

func newExtentWriter(w io.Writer) *extentWriter {
	return &extentWriter{w: w, buf: make([]byte, 0, extentSize)}
}

func (e *extentWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 && e.err == nil {
		if len(e.buf) == 0 && len(p) >= extentSize {
			// Nothing buffered, so the file is at an extent boundary:
			// whole extents go straight from p.
			k := len(p) - len(p)%extentSize
			m, err := e.w.Write(p[:k])
			if err == nil && m < k {
				err = io.ErrShortWrite // and the extents would be misaligned
			}
			n += m
			p = p[m:]
			e.err = err
			continue
		}
		c := copy(e.buf[len(e.buf):extentSize], p)
		e.buf = e.buf[:len(e.buf)+c]
		n += c
		p = p[c:]
		if len(e.buf) == extentSize {
			e.flush()
		}
	}
	return n, e.err
}

func (e *extentWriter) flush() {
	if e.err != nil || len(e.buf) == 0 {
		return
	}
	m, err := e.w.Write(e.buf)
	if err == nil && m < len(e.buf) {
		err = io.ErrShortWrite
	}
	e.err = err
	e.buf = e.buf[:0]
}

// Flush writes what is buffered (the file's last, partial extent).
func (e *extentWriter) Flush() error {
	e.flush()
	return e.err
}
