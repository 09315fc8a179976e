package ingest

import (
	"bytes"
	"io"
)

// Chunk is a run of whole records cut from an input. Data always ends with
// the record terminator: when the input's last record lacks one, the reader
// appends it, so downstream code sees terminated records only and output
// records end with their terminator.
type Chunk struct {
	Data        []byte
	FirstRecord int64 // 1-based number, in its input, of the first record in Data
	FirstLine   int64 // 1-based physical line on which that record starts
	Records     int   // records in Data (terminators, since Data ends with one)
	// Stalled: the input had nothing more to read when this chunk was cut
	// (ChunkReader.Idle), so what the chunk decides should go out now, not
	// wait in a buffer for input that may be long in coming.
	Stalled bool
	// RowGroup is a Parquet chunk's row group + 1 (its rows are one row
	// group's); 0 in other formats.
	RowGroup int
	Parquet  *ParquetFile // a Parquet chunk's file

	buf []byte // the whole buffer, as Data may be resliced by its user
	// plainCSV: a csv chunk whose Data holds no '"', so that its records
	// are lines (Chunk.Split need not look for quotes again).
	plainCSV bool
}

// freeChunks bounds the released chunks kept for reuse: more than a pipeline
// of a few workers holds in flight, few enough that an idle reader pins
// little memory.
const freeChunks = 32

// maxEmptyReads ends a read loop on a reader that keeps returning (0, nil),
// as bufio does.
const maxEmptyReads = 100

// MaxRecordLimit is the longest record any reader accepts, whatever the
// caller asks: records are addressed within their chunk by 32-bit offsets
// and lengths (a chunk holds at most a record and the chunk size before
// it), so every length stays far from 2^31.
const MaxRecordLimit = 1 << 30

// ChunkReader cuts a byte stream into chunks that end exactly after a record
// terminator (term: '\n' or 0), so that workers can split and hash chunks in
// parallel and an ordered writer can still emit records in input order. It
// reads about chunkSize bytes per chunk; a record longer than that makes a
// bigger chunk, and a record longer than maxRecord bytes (0, or more than
// MaxRecordLimit: MaxRecordLimit) is a *RecordError wrapping
// ErrRecordTooLong, never truncated.
//
// After a too-long record error the reader stays usable: the next call to
// Next discards the rest of that record (without buffering it) and goes on,
// record and line numbers still counting it, so that --on-bad skip can count
// it and continue. Any other error is returned again by every later call.
// Errors from in are returned as they are (an *Input already names its file).
// Overlong, when set, gets the bytes of every too-long record, in pieces
// and in order as the reader passes over them (terminator included; end
// true with the last piece), so that --on-bad quarantine can keep the
// record verbatim without holding it.
//
// Next is for one goroutine; Release may be called from any.
type ChunkReader struct {
	Overlong func(part []byte, end bool)
	// Idle, when set, is asked after a read that left the chunk short:
	// true (the input has paused) cuts the chunk at its last whole record
	// rather than waiting to fill it, and marks it Stalled.
	Idle func() bool

	in        io.Reader
	name      string
	term      byte
	chunkSize int
	maxRecord int
	free      chan *Chunk

	next    *Chunk // buffer being filled: next.buf[:held] starts with a record
	held    int
	clean   int   // next.buf[:clean] is known to hold no terminator
	record  int64 // number of the next record
	line    int64 // physical line on which the next record starts
	eof     bool
	err     error // sticky read error
	pending error // a too-long record error, due after the chunk before it
	skip    bool  // the input continues a too-long record: discard up to its end
	stalled bool  // the last fill stopped short because the input was idle

	// csv: only a '\n' outside quotes ends a record. scan is the search for
	// the last record end in next.buf[:held]; skipQuoted says the part of a
	// too-long record skipped so far leaves a quote open.
	csv        bool
	scan       csvScan
	skipQuoted bool
}

// NewChunkReader reads records terminated by term from in; name is used in
// record errors. chunkSize is the target chunk size in bytes (1 MiB is a
// good size: large enough to amortise hand-offs, small enough to stay in L2).
func NewChunkReader(in io.Reader, name string, term byte, chunkSize int, maxRecord int) *ChunkReader {
	if chunkSize < 1 {
		chunkSize = 1 << 20
	}
	if maxRecord <= 0 || maxRecord > MaxRecordLimit {
		maxRecord = MaxRecordLimit
	}
	return &ChunkReader{
		in: in, name: name, term: term,
		chunkSize: chunkSize, maxRecord: maxRecord,
		free:   make(chan *Chunk, freeChunks),
		record: 1, line: 1,
	}
}

// NewFormatChunkReader reads the records of format f: as NewChunkReader
// does for lines (terminated by term) and for tsv and jsonl (by '\n'); for
// csv it cuts only at a '\n' outside quotes, so a record with line feeds in
// a quoted field stays whole. A quote that is never closed makes the rest of
// the input one record (which Key reports as bad), or a too-long record
// error once it passes maxRecord. Chunk.Records counts records, header
// included; Chunk.FirstLine is the physical line on which the first one
// starts (CountLines moves it on record by record).
func NewFormatChunkReader(in io.Reader, name string, f Format, term byte, chunkSize, maxRecord int) *ChunkReader {
	if f != FormatLines {
		term = '\n'
	}
	r := NewChunkReader(in, name, term, chunkSize, maxRecord)
	r.csv = f == FormatCSV
	return r
}

// Next returns the next chunk, or io.EOF after the last one. The chunk is the
// caller's until it passes it to Release; the reader never touches it again.
func (r *ChunkReader) Next() (*Chunk, error) {
	if err := r.pending; err != nil {
		r.pending = nil
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.next == nil {
		r.next = r.get(0)
	}
	if r.skip {
		if err := r.skipRecord(); err != nil {
			return nil, err
		}
	}
	c := r.next
	scanned := r.clean
	var end int
	for {
		if err := r.fill(c); err != nil {
			return nil, err
		}
		if r.eof && r.held > 0 && c.buf[r.held-1] != r.term {
			// The final record lacks its terminator: it is still a record.
			c.buf = append(c.buf[:r.held], r.term)
			c.buf = c.buf[:cap(c.buf)]
			r.held++
		}
		if r.csv {
			end = r.scan.lastEnd(c.buf[:r.held])
			if r.eof {
				end = r.held // the rest is the last record, even with a quote open
			}
			if end > 0 {
				break
			}
		} else if unread := c.buf[scanned:r.held]; bytes.IndexByte(unread, r.term) >= 0 {
			// IndexByte is vectorised, LastIndexByte is not: check that there
			// is a terminator before walking back to the last one, so that a
			// long record costs a fast scan, and a usual chunk a walk of one
			// record.
			end = scanned + bytes.LastIndexByte(unread, r.term) + 1
			break
		}
		if r.eof {
			return nil, io.EOF // held is 0 here: a final record got its terminator above
		}
		scanned = r.held
		if r.maxRecord > 0 && r.held-r.openEnd(c) > r.maxRecord {
			return nil, r.tooLongInBuffer(c)
		}
		if r.held == len(c.buf) {
			r.grow(c)
		}
	}

	if r.maxRecord > 0 {
		off := -1
		if r.csv {
			off = csvFirstLong(c.buf[:end], r.maxRecord, r.scan.quoteBefore(c.buf, end))
		} else {
			off = firstLong(c.buf[:end], r.term, r.maxRecord)
		}
		if off >= 0 {
			return r.cutBefore(c, off, end)
		}
	}
	return r.emit(c, end, end), nil
}

// fill reads into c.buf[held:] until it is full, the input ends or, with
// Idle, the input pauses after a read.
func (r *ChunkReader) fill(c *Chunk) error {
	r.stalled = false
	for empty := 0; r.held < len(c.buf) && !r.eof; {
		n, err := r.in.Read(c.buf[r.held:])
		r.held += n
		switch {
		case err == io.EOF:
			r.eof = true
		case err != nil:
			r.err = err
			return err
		case n == 0:
			if empty++; empty >= maxEmptyReads {
				r.err = io.ErrNoProgress
				return r.err
			}
		case r.held < len(c.buf) && r.Idle != nil && r.Idle():
			r.stalled = true
			return nil
		}
	}
	return nil
}

// openEnd is 1 when c.buf[:held], the start of one record, may be all of
// it: a csv record with a quote open ends with the input, and a final '\n'
// would then be its terminator, not counted in its length.
func (r *ChunkReader) openEnd(c *Chunk) int {
	if r.csv && r.held > 0 && c.buf[r.held-1] == '\n' {
		return 1
	}
	return 0
}

// grow makes room in a full buffer holding the start of one record: doubling
// keeps the copying linear in the record's length, and maxRecord+1 bytes
// (+2 in csv, see openEnd) are all it takes to tell that a record is too long.
func (r *ChunkReader) grow(c *Chunk) {
	n := 2 * len(c.buf)
	if r.maxRecord > 0 {
		n = min(n, r.maxRecord+1+r.openEnd(c)) // > held, as held-openEnd <= maxRecord here
	}
	nb := make([]byte, n)
	copy(nb, c.buf[:r.held])
	c.buf = nb
}

// emit hands out c.buf[:end] and carries c.buf[rest:held], the start of the
// next record, into a fresh buffer.
func (r *ChunkReader) emit(c *Chunk, end, rest int) *Chunk {
	c.Data = c.buf[:end]
	c.FirstRecord, c.FirstLine = r.record, r.line
	c.Stalled = r.stalled && rest == end
	c.plainCSV = false
	if r.csv {
		c.Records = r.scan.records(c.buf, end)
		c.plainCSV = r.scan.quoteBefore(c.buf, end) < 0
	} else {
		c.Records = bytes.Count(c.Data, []byte{r.term})
	}
	r.record += int64(c.Records)
	if c.plainCSV {
		r.line += int64(c.Records) // a record without quotes is a line
	} else {
		r.line += r.lines(c.Data, c.Records)
	}
	tail := c.buf[rest:r.held]
	r.next = r.get(len(tail))
	r.held = copy(r.next.buf, tail)
	r.clean = 0
	scan := r.scan
	r.scan = csvScan{}
	if rest == end {
		// The rest of a record cut after the last terminator, scanned to
		// its end; a record end is outside quotes, so the parity carries,
		// and so does where the first quote is if the tail has it (if an
		// earlier quote hides the tail's, the tail is scanned again).
		r.clean = r.held
		switch {
		case scan.quote == 0:
			r.scan = csvScan{pos: r.held, inQuotes: scan.inQuotes}
		case scan.quote-1 >= end:
			r.scan = csvScan{pos: r.held, inQuotes: scan.inQuotes, quote: scan.quote - end}
		}
	}
	return c
}

// lines counts the line feeds in data, which holds that many terminated
// records (or 0 and no terminator: part of a record).
func (r *ChunkReader) lines(data []byte, records int) int64 {
	if r.term == '\n' && !r.csv {
		return int64(records)
	}
	return int64(bytes.Count(data, []byte{'\n'}))
}

// firstLong returns the offset of the first record in data (which ends with
// term) longer than maxRecord bytes, or -1. A record of at most maxRecord
// bytes that starts at p ends within data[p:p+maxRecord+1], so each window
// is searched backwards from its end, which finds a terminator after about
// one record and skips the rest of the window unread.
func firstLong(data []byte, term byte, maxRecord int) int {
	for p := 0; len(data)-p > maxRecord+1; {
		i := bytes.LastIndexByte(data[p:p+maxRecord+1], term)
		if i < 0 {
			return p
		}
		p += i + 1
	}
	return -1
}

// cutBefore handles a too-long record at off in c.buf[:end] whose end is
// known: the records before it go out first, the error after them.
func (r *ChunkReader) cutBefore(c *Chunk, off, end int) (*Chunk, error) {
	var t int // the long record's terminator
	if r.csv {
		var q quoteCursor
		t = q.recordEnd(c.buf[:end], off) - 1
	} else {
		t = off + bytes.IndexByte(c.buf[off:end], r.term)
	}
	long := c.buf[off : t+1]
	r.overlong(long, true)
	if off == 0 {
		err := tooLong(r.name, r.line, r.record, r.maxRecord)
		r.record++
		r.line += r.lines(long, 1)
		r.held = copy(c.buf, c.buf[t+1:r.held]) // c stays the buffer being filled
		r.clean, r.scan = 0, csvScan{}
		return nil, err
	}
	out := r.emit(c, off, t+1)
	r.pending = tooLong(r.name, r.line, r.record, r.maxRecord)
	r.record++
	r.line += r.lines(long, 1)
	return out, nil
}

// tooLongInBuffer reports the record that fills c.buf[:held] without a
// terminator, and arranges for the rest of it to be skipped.
func (r *ChunkReader) tooLongInBuffer(c *Chunk) error {
	err := tooLong(r.name, r.line, r.record, r.maxRecord)
	r.overlong(c.buf[:r.held], false)
	r.line += r.lines(c.buf[:r.held], 0)
	r.skipQuoted = r.scan.inQuotes // scanned to held, from the record's start
	r.held, r.clean, r.scan = 0, 0, csvScan{}
	r.skip = true
	return err
}

func (r *ChunkReader) overlong(part []byte, end bool) {
	if r.Overlong != nil {
		r.Overlong(part, end)
	}
}

// skipRecord discards input up to and including the terminator of a record
// already reported as too long, using the next buffer as scratch space.
func (r *ChunkReader) skipRecord() error {
	c := r.next
	for {
		if r.held == 0 {
			if err := r.fill(c); err != nil {
				return err
			}
			if r.held == 0 { // the too-long record was the last one
				r.overlong(nil, true)
				r.skip = false
				r.record++
				return nil
			}
		}
		var end int // just past the record's terminator, or <= 0
		if r.csv {
			var q quoteCursor
			end, r.skipQuoted = q.end(c.buf[:r.held], 0, r.skipQuoted)
		} else {
			end = bytes.IndexByte(c.buf[:r.held], r.term) + 1
		}
		if end <= 0 {
			r.overlong(c.buf[:r.held], false)
			r.line += r.lines(c.buf[:r.held], 0)
			r.held = 0
			continue
		}
		r.overlong(c.buf[:end], true)
		r.line += r.lines(c.buf[:end], 1)
		r.record++
		r.held = copy(c.buf, c.buf[end:r.held])
		r.clean, r.scan = 0, csvScan{}
		r.skip = false
		return nil
	}
}

// get returns a buffer of at least max(chunkSize, n) bytes, reusing a
// released one when it is big enough.
func (r *ChunkReader) get(n int) *Chunk {
	if n <= r.chunkSize {
		select {
		case c := <-r.free:
			return c
		default:
		}
		n = r.chunkSize
	} else {
		n *= 2 // the record continues past the carried bytes
	}
	return &Chunk{buf: make([]byte, n)}
}

// Release gives c back for reuse; c must not be used afterwards. Chunks that
// grew around a long record are left to the garbage collector rather than
// kept, so one 10 MB line does not pin 10 MB per pooled chunk.
func (r *ChunkReader) Release(c *Chunk) {
	if r == nil || c == nil || len(c.buf) != r.chunkSize { // a Parquet chunk has no reader
		return
	}
	*c = Chunk{buf: c.buf}
	select {
	case r.free <- c:
	default:
	}
}

// SplitRecords calls fn for each record in data, without its terminator,
// until fn returns false. A final record without a terminator is still a
// record; an empty data holds none, and "a\n" holds one ("a"), not two.
func SplitRecords(data []byte, term byte, fn func(rec []byte) bool) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, term)
		if i < 0 {
			fn(data)
			return
		}
		if !fn(data[:i]) {
			return
		}
		data = data[i+1:]
	}
}
