package ingest

import (
	"bufio"
	"bytes"
	"io"
)

// LineReader reads records one at a time, for paths where a chunk pipeline
// is not worth it (query's keys on stdin, which may be a terminal). It follows
// the same rules as ChunkReader: bytes as read, a final record without its
// terminator is a record, a record over maxRecord bytes (0: unlimited) is a
// *RecordError wrapping ErrRecordTooLong after which reading goes on with
// the next record; any other error is returned by every later call.
type LineReader struct {
	br        *bufio.Reader
	name      string
	term      byte
	maxRecord int

	long     []byte // assembles a record longer than br's buffer
	record   int64  // number of the record last returned or reported
	line     int64  // physical line on which it starts
	nextLine int64
	skip     bool // the input continues a too-long record: discard up to its end
	err      error
}

// NewLineReader reads records terminated by term from in; name is used in
// record errors.
func NewLineReader(in io.Reader, name string, term byte, maxRecord int) *LineReader {
	return newLineReaderSize(in, name, term, maxRecord, 64<<10)
}

// newLineReaderSize lets tests make records longer than the buffer cheaply.
func newLineReaderSize(in io.Reader, name string, term byte, maxRecord, bufSize int) *LineReader {
	return &LineReader{
		br: bufio.NewReaderSize(in, bufSize), name: name, term: term,
		maxRecord: max(maxRecord, 0), nextLine: 1,
	}
}

// Next returns the next record without its terminator, valid until the next
// call, or io.EOF after the last one. It returns as soon as a record has
// arrived, without waiting for more input.
func (r *LineReader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.skip {
		if err := r.skipRecord(); err != nil {
			return nil, err
		}
	}
	r.long = r.long[:0]
	for {
		s, err := r.br.ReadSlice(r.term)
		if err == bufio.ErrBufferFull {
			r.long = append(r.long, s...)
			if r.maxRecord > 0 && len(r.long) > r.maxRecord {
				return nil, r.tooLong(r.long, true)
			}
			continue
		}
		if err != nil && err != io.EOF {
			r.err = err
			return nil, err
		}
		rec := s
		if len(r.long) > 0 {
			r.long = append(r.long, s...)
			rec = r.long
		}
		if err == io.EOF && len(rec) == 0 {
			r.err = io.EOF
			return nil, io.EOF
		}
		terminated := err == nil
		if terminated {
			rec = rec[:len(rec)-1]
		}
		if r.maxRecord > 0 && len(rec) > r.maxRecord {
			return nil, r.tooLong(rec, !terminated)
		}
		r.record++
		r.line = r.nextLine
		r.nextLine += r.lines(rec, terminated)
		return rec, nil
	}
}

// lines counts the line feeds in rec and, for '\n' records, its terminator
// (a NUL terminator is no line feed, so rec may include it or not).
func (r *LineReader) lines(rec []byte, terminated bool) int64 {
	if r.term == '\n' {
		if terminated {
			return 1
		}
		return 0
	}
	return int64(bytes.Count(rec, []byte{'\n'}))
}

// tooLong reports the record that starts with part; unfinished means its
// terminator has not been read yet, so the rest must be skipped.
func (r *LineReader) tooLong(part []byte, unfinished bool) error {
	r.record++
	r.line = r.nextLine
	err := tooLong(r.name, r.line, r.record, r.maxRecord)
	r.nextLine += r.lines(part, !unfinished)
	r.skip = unfinished
	r.long = r.long[:0]
	return err
}

// skipRecord discards the rest of a record reported as too long.
func (r *LineReader) skipRecord() error {
	for {
		s, err := r.br.ReadSlice(r.term)
		if err == bufio.ErrBufferFull {
			r.nextLine += r.lines(s, false)
			continue
		}
		if err != nil && err != io.EOF {
			r.err = err
			return err
		}
		r.nextLine += r.lines(s, err == nil)
		r.skip = false
		return nil
	}
}

// Record is the 1-based number of the record Next last returned or reported
// as too long.
func (r *LineReader) Record() int64 { return r.record }

// Line is the physical line on which that record starts.
func (r *LineReader) Line() int64 { return r.line }
