package ingest

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// CSV records follow RFC 4180 strictly, as encoding/csv does without
// LazyQuotes, but byte-exact where it is not: fields are separated by ',',
// a field that starts with '"' is quoted and ends at a '"' not doubled, ""
// inside it is one '"', and line feeds and CRs inside quotes are kept as
// they are (encoding/csv turns "\r\n" into "\n" even there). The record's
// "\n" or "\r\n" terminator is not part of its last field; any other CR is
// data, quoted or not, and so are spaces. A quote inside an unquoted field,
// or text after a closing quote, makes the record bad, and so does a blank
// line (encoding/csv skips it).
//
// The hand-written scanner is kept because it is both right and faster:
// BenchmarkKeyCSV (events split and keyed on 3 of their 5 columns, plain
// and all quoted) has encoding/csv take several times its CPU a plain
// record, more on quoted ones too, and allocate for every record where it
// allocates nothing; and encoding/csv breaks the byte rules besides (it
// drops the \r of "\r\n" inside quotes and skips blank lines).
//
// Where records end: a '\n' ends a record when it is outside quotes, which
// is when an even number of '"' precede it in the record, since every '"'
// opens or closes a quoted section ("" closes and reopens one). Splitting and
// chunking count quote parity this way, with vectorised searches, and leave
// the RFC 4180 checks to Key: a stray quote moves record boundaries (up to
// the next quote, or the end of the input), and the record it leaves is bad.

// csvFields locates the fields of line, a record without its terminator,
// for the key columns, checking the whole record's quoting.
func (k *Keyer) csvFields(line []byte) error {
	k.scratch = k.scratch[:0]
	nf := len(k.fields)
	if bytes.IndexByte(line, '"') < 0 {
		// The common case: no quote, so each field is the bytes between
		// commas, and the fields after the last key column need no check.
		return k.splitFields(line, k.delimiter)
	}
	k.plain = false // a quoted field's bytes are not all of the span between its commas
	c := 0
	for p := 0; ; c++ {
		start, end, next, esc, err := csvField(line, p, c)
		if err != nil {
			return err
		}
		if c < nf && k.need[c] {
			f := field{start: start, end: end}
			if esc {
				s := len(k.scratch)
				k.scratch = appendUnquoted(k.scratch, line[start:end])
				f = field{start: s, end: len(k.scratch), scratch: true}
			}
			k.fields[c] = f
		}
		if next == len(line) {
			break
		}
		p = next + 1
	}
	if c+1 < nf {
		return k.missing(c + 1)
	}
	return nil
}

// missing reports the first key column at or after have, the number of
// fields the record has.
func (k *Keyer) missing(have int) error {
	c := have
	for !k.need[c] {
		c++
	}
	fields := "fields"
	if have == 1 {
		fields = "field"
	}
	if c < len(k.header) {
		return badf("no column %d (%q): the record has %d %s", c+1, k.header[c], have, fields)
	}
	return badf("no column %d: the record has %d %s", c+1, have, fields)
}

// csvField scans the field of line (a record without its terminator) that
// starts at p, the c-th (0-based, for messages). Its content is
// line[start:end], with "" to undo when esc; next is the index of the comma
// after it, or len(line).
func csvField(line []byte, p, c int) (start, end, next int, esc bool, err error) {
	// Byte loops, not bytes.IndexByte: fields are short, shorter than what
	// a call and its setup cost (BenchmarkKeyCSV's quoted records).
	if p == len(line) || line[p] != '"' {
		q := p
		for q < len(line) && line[q] != ',' {
			if line[q] == '"' {
				return 0, 0, 0, false, badf("bare quote in unquoted field %d", c+1)
			}
			q++
		}
		return p, q, q, false, nil
	}
	start = p + 1
	q := start
	for {
		for q < len(line) && line[q] != '"' {
			q++
		}
		if q == len(line) {
			return 0, 0, 0, false, badf("unterminated quoted field %d", c+1)
		}
		if q++; q < len(line) && line[q] == '"' {
			esc = true
			q++
			continue
		}
		break
	}
	if q < len(line) && line[q] != ',' {
		return 0, 0, 0, false, badf("text after the closing quote of field %d", c+1)
	}
	return start, q - 1, q, esc, nil
}

// appendUnquoted appends the content of a quoted field, "" made '"'.
func appendUnquoted(dst, s []byte) []byte {
	for {
		i := bytes.Index(s, []byte(`""`))
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i+1]...)
		s = s[i+2:]
	}
}

// csvSplit returns all the fields of line, a record without its
// terminator, unquoted: for a header, and for tests.
func csvSplit(line []byte) ([][]byte, error) {
	var fields [][]byte
	for p, c := 0, 0; ; c++ {
		start, end, next, esc, err := csvField(line, p, c)
		if err != nil {
			return nil, err
		}
		f := line[start:end:end]
		if esc {
			f = appendUnquoted(nil, f)
		}
		fields = append(fields, f)
		if next == len(line) {
			return fields, nil
		}
		p = next + 1
	}
}

// quoteCursor remembers where the next '"' is, so that walking records one
// by one searches each byte for a quote once, not once per record.
type quoteCursor struct {
	q     int // the first '"' at or after the last search's start, or len(data)
	valid bool
}

func (c *quoteCursor) next(data []byte, p int) int {
	if !c.valid || c.q < p {
		c.valid = true
		c.q = len(data)
		if i := bytes.IndexByte(data[p:], '"'); i >= 0 {
			c.q = p + i
		}
	}
	return c.q
}

// recordEnd returns the end of the csv record that starts at data[p],
// just past its terminating '\n', or len(data) when no '\n' outside quotes
// follows.
func (c *quoteCursor) recordEnd(data []byte, p int) int {
	end, _ := c.end(data, p, false)
	if end < 0 {
		return len(data)
	}
	return end
}

// end returns the index just past the first '\n' outside quotes in data[p:],
// given whether p is inside quotes; or -1 and whether len(data) is. Up to
// the next quote it is one vectorised search; from there on, a word at a
// time (quotedEnd).
func (c *quoteCursor) end(data []byte, p int, inQuotes bool) (int, bool) {
	if !inQuotes {
		q := c.next(data, p)
		if i := bytes.IndexByte(data[p:q], '\n'); i >= 0 {
			return p + i + 1, false
		}
		if q == len(data) {
			return -1, false
		}
		p = q
	}
	return quotedEnd(data, p, inQuotes)
}

// Quote parity a word at a time: eqBytes flags (0x80) the bytes of a
// little-endian word equal to c, exactly; a prefix XOR of the quote flags
// (x ^= x<<8, <<16, <<32) flags each byte preceded, itself included, by an
// odd number of quotes in the word; XOR with the parity carried in from the
// words before, a flagged byte is inside quotes, and a '\n' flag outside
// them ends a record. On quoted csv this beats a vectorised search per
// quote, as fields are short and a search's setup costs more than the
// bytes it skips (splitting the quoted events of BenchmarkKeyCSV, and
// cutting them into chunks).
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
	low = 0x7f7f7f7f7f7f7f7f
)

func eqBytes(w uint64, c byte) uint64 {
	v := w ^ lsb*uint64(c)
	return ^((v&low + low) | v | low)
}

// insideQuotes flags the bytes of a word inside quotes, given the flag
// (msb or 0) carried in; its top byte's flag is the one to carry out.
func insideQuotes(quotes, carry uint64) uint64 {
	x := quotes ^ quotes<<8
	x ^= x << 16
	x ^= x << 32
	return x ^ carry
}

// quotedEnd is end without the quote cursor.
func quotedEnd(data []byte, p int, inQuotes bool) (int, bool) {
	carry := uint64(0)
	if inQuotes {
		carry = msb
	}
	for ; p+8 <= len(data); p += 8 {
		w := binary.LittleEndian.Uint64(data[p:])
		in := insideQuotes(eqBytes(w, '"'), carry)
		if out := eqBytes(w, '\n') &^ in; out != 0 {
			return p + bits.TrailingZeros64(out)/8 + 1, false
		}
		carry = msb * (in >> 63)
	}
	inQuotes = carry != 0
	for ; p < len(data); p++ {
		switch data[p] {
		case '"':
			inQuotes = !inQuotes
		case '\n':
			if !inQuotes {
				return p + 1, false
			}
		}
	}
	return -1, inQuotes
}

// scanRecords finds the record ends ('\n' outside quotes) in data, given
// whether it starts inside quotes: how many, the last (0: none), whether
// data ends inside quotes, and where its first quote is (-1: none).
// Stretches without a quote cost vectorised searches; from a quote on it
// goes a word at a time until a word without quotes ends outside them.
func scanRecords(data []byte, inQuotes bool) (count, last int, _ bool, firstQuote int) {
	firstQuote = -1
	for p := 0; p < len(data); {
		if !inQuotes {
			q := len(data)
			if i := bytes.IndexByte(data[p:], '"'); i >= 0 {
				q = p + i
				if firstQuote < 0 {
					firstQuote = q
				}
			}
			if c := bytes.Count(data[p:q], []byte{'\n'}); c > 0 {
				count += c
				last = p + bytes.LastIndexByte(data[p:q], '\n') + 1
			}
			if p = q; p == len(data) {
				break
			}
		}
		carry := uint64(0)
		if inQuotes {
			carry = msb
		}
		for p+8 <= len(data) {
			w := binary.LittleEndian.Uint64(data[p:])
			quotes := eqBytes(w, '"')
			if quotes != 0 && firstQuote < 0 {
				firstQuote = p + bits.TrailingZeros64(quotes)/8
			}
			in := insideQuotes(quotes, carry)
			if out := eqBytes(w, '\n') &^ in; out != 0 {
				count += bits.OnesCount64(out)
				last = p + (63-bits.LeadingZeros64(out))/8 + 1
			}
			carry = msb * (in >> 63)
			p += 8
			if quotes == 0 && carry == 0 {
				break // back to vectorised searches
			}
		}
		inQuotes = carry != 0
		if p+8 > len(data) {
			for ; p < len(data); p++ {
				switch data[p] {
				case '"':
					inQuotes = !inQuotes
					if firstQuote < 0 {
						firstQuote = p
					}
				case '\n':
					if !inQuotes {
						count++
						last = p + 1
					}
				}
			}
		}
	}
	return count, last, inQuotes, firstQuote
}

// csvCount counts the records in data, which starts at a record boundary:
// the '\n's outside quotes, plus one for any bytes after the last of them.
func csvCount(data []byte) int {
	n, last, _, _ := scanRecords(data, false)
	if last < len(data) {
		n++
	}
	return n
}

// csvFirstLong returns the offset of the first record in data (which
// starts at a record boundary; a ChunkReader's chunk, which ends with a
// record's '\n') longer than maxRecord bytes, its terminating '\n' not
// counted, or -1. Up to the line of the first quote, records are
// lines, searched a window at a time as firstLong does (often all of a
// chunk at once: a chunk shorter than maxRecord+1 holds no long record);
// from there on, a record at a time. (A walk over every record showed in
// pprof of dedup --format csv, for chunks that held no quote.)
// quote is the offset of data's first '"', or -1: the chunk reader's scan
// has found it already.
func csvFirstLong(data []byte, maxRecord, quote int) int {
	plain := len(data)
	if quote >= 0 {
		plain = bytes.LastIndexByte(data[:quote], '\n') + 1
	} else if len(data) > 0 && data[len(data)-1] != '\n' {
		plain = bytes.LastIndexByte(data, '\n') + 1 // firstLong needs data ending with one
	}
	if off := firstLong(data[:plain], '\n', maxRecord); off >= 0 || plain == len(data) {
		return off
	}
	var c quoteCursor
	for p := plain; p < len(data); {
		end := c.recordEnd(data, p)
		n := end - p
		if data[end-1] == '\n' {
			n--
		}
		if n > maxRecord {
			return p
		}
		p = end
	}
	return -1
}

// csvScan is the state of the search for the last record end in a chunk
// buffer being filled: buf[:pos] has been scanned, pos is inside quotes or
// not, count record ends were found, the last at last (0: none), and the
// first '"' is at quote-1 (0: none in buf[:pos]).
type csvScan struct {
	pos      int
	inQuotes bool
	count    int
	last     int
	quote    int
}

// lastEnd scans buf[s.pos:] for record ends and returns the last one found
// in buf, or 0.
func (s *csvScan) lastEnd(buf []byte) int {
	count, last, inQuotes, quote := scanRecords(buf[s.pos:], s.inQuotes)
	if last > 0 {
		s.count += count
		s.last = s.pos + last
	}
	if s.quote == 0 && quote >= 0 {
		s.quote = s.pos + quote + 1
	}
	s.pos, s.inQuotes = len(buf), inQuotes
	return s.last
}

// quoteBefore is the offset of the first '"' in buf[:end], or -1: what
// lastEnd found, or a search when it has not scanned that far. The chunk
// reader passes it on, so that a chunk without quotes is not searched for
// one again (each such search reads every byte of the chunk once more).
func (s *csvScan) quoteBefore(buf []byte, end int) int {
	switch {
	case s.pos < end:
		return bytes.IndexByte(buf[:end], '"')
	case s.quote == 0 || s.quote-1 >= end:
		return -1
	}
	return s.quote - 1
}

// records counts the records in buf[:end], which lastEnd has scanned:
// what it found, plus one for bytes after the last record end (the input's
// last record, a quote open); or, when end cuts the scanned records short,
// a count afresh.
func (s *csvScan) records(buf []byte, end int) int {
	if end < s.last {
		return csvCount(buf[:end])
	}
	if end > s.last {
		return s.count + 1
	}
	return s.count
}
