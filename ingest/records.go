package ingest

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/fpdedup/fpdedup/fpstore"
)

// Format is the container format of the records (--format). Its numeric
// value may be recorded in an index spec as provenance, so values are never
// reused.
type Format uint8

const (
	// FormatLines: a record is a line ('\n' or, with -z, NUL terminated) and
	// its key is all of its bytes but the terminator.
	FormatLines Format = iota
	// FormatCSV: a record is an RFC 4180 row, which may span lines.
	FormatCSV
	// FormatTSV: a record is a line split on TAB, with no quoting at all.
	FormatTSV
	// FormatJSONL: a record is a line holding one JSON object.
	FormatJSONL
	// FormatParquet: a record is a row of a Parquet file, its key the
	// text of typed columns (parquet.go); rows travel framed (frames.go).
	FormatParquet
)

var formatNames = [...]string{FormatLines: "lines", FormatCSV: "csv", FormatTSV: "tsv", FormatJSONL: "jsonl", FormatParquet: "parquet"}

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	for f, n := range formatNames {
		if n == s {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("unknown format %q (valid: lines, csv, tsv, jsonl, parquet)", s)
}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// BadRecord says why a record has no key: the caller adds the file, line
// and record number (RecordError) and applies --on-bad.
type BadRecord struct{ Reason string }

func (e *BadRecord) Error() string { return e.Reason }

func badf(format string, args ...any) error {
	return &BadRecord{Reason: fmt.Sprintf(format, args...)}
}

// bom is the UTF-8 byte order mark, skipped for parsing at the start of a
// csv, tsv or jsonl input (and kept in the output).
const bom = "\xef\xbb\xbf"

// Keyer extracts the key of each record: the bytes of its --key fields as
// read, joined by the separator, never normalised. It keeps scratch
// buffers, so each goroutine needs its own; NewKeyer is cheap, and a Keyer
// built from one input's header must not be used for an input whose header
// differs.
type Keyer struct {
	format Format
	term   byte
	sep    []byte
	items  []string // the --key items, for messages

	// cols[i] is the field that key i comes from: a 0-based column in csv
	// and tsv, i itself in jsonl. Scanning a record fills fields.
	cols   []int
	fields []field
	// csv and tsv: need[c] says column c is part of the key (len(need) is
	// len(fields)), and header holds the column names, if any.
	need   []bool
	header [][]byte
	// jsonl: the key paths as a tree.
	root *jsonNode
	json jsonScanner

	scratch []byte // unescaped field contents
	out     []byte // the joined key
	line    []byte // the record the fields locate, for Item

	// span: csv or tsv keyed on adjacent columns in order (1,2,3) with a
	// one-byte separator, so that a key is the record's bytes from its
	// first field to its last with the delimiters between them replaced.
	// plain: the record just scanned has each field between two
	// delimiters, unquoted (splitFields), which span needs.
	span      bool
	plain     bool
	delimiter byte
}

// field locates a key's bytes: rec[start:end], or scratch[start:end] when
// they had to be unescaped.
type field struct {
	start, end int
	scratch    bool
	set        bool
}

// NewKeyer makes a Keyer for spec, which must be valid (KeySpec.Validate).
// With spec.Header, header is that input's first record, raw, terminator
// included; header names in spec.Keys are resolved against it, and a name it
// lacks is an error that lists the names it has. Without spec.Header header
// is ignored.
func NewKeyer(spec KeySpec, header []byte) (*Keyer, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	k := &Keyer{format: spec.Format, term: spec.Term, sep: []byte(spec.Sep), items: spec.Keys}
	switch spec.Format {
	case FormatCSV, FormatTSV:
		if spec.Header {
			var err error
			if k.header, err = headerNames(spec.Format, header); err != nil {
				return nil, err
			}
		}
		cols, err := resolveColumns(spec.Keys, k.header, spec.Header)
		if err != nil {
			return nil, err
		}
		if err := spec.sameColumns("", cols, func(items []string) ([]int, error) { return resolveColumns(items, k.header, spec.Header) }); err != nil {
			return nil, err
		}
		k.cols = cols
		k.need = make([]bool, slices.Max(cols)+1)
		for _, c := range cols {
			k.need[c] = true
		}
		k.fields = make([]field, len(k.need))
		k.delimiter = ','
		if spec.Format == FormatTSV {
			k.delimiter = '\t'
		}
		k.span = len(cols) > 1 && len(k.sep) == 1
		for i := 1; i < len(cols); i++ {
			k.span = k.span && cols[i] == cols[i-1]+1
		}
	case FormatParquet:
		k.cols = make([]int, len(spec.Keys))
		for i := range k.cols {
			k.cols[i] = i
		}
		k.fields = make([]field, len(spec.Keys))
	case FormatJSONL:
		root, err := jsonTree(spec.Keys)
		if err != nil {
			return nil, err
		}
		k.root = root
		k.cols = make([]int, len(spec.Keys))
		for i := range k.cols {
			k.cols[i] = i
		}
		k.fields = make([]field, len(spec.Keys))
	}
	return k, nil
}

// Key returns the key of rec, one raw record as SplitFormat gives it,
// terminator included; first says it is the first record of its input, whose
// leading BOM is then skipped in csv, tsv and jsonl (in lines format a BOM is
// part of the key). The result may alias rec or the Keyer's scratch space and
// is valid until the next call. A record that has no key returns a
// *BadRecord.
func (k *Keyer) Key(rec []byte, first bool) ([]byte, error) {
	return k.key(rec, first, false)
}

// KeyShaped is Key for a record SplitShaped gave, with what it said of the
// record: a simple csv record is not searched for quotes again.
func (k *Keyer) KeyShaped(rec []byte, first, simple bool) ([]byte, error) {
	return k.key(rec, first, simple)
}

// Fingerprint is h.Sum of KeyShaped's key, computed without the key's
// copy where it can be: a key of adjacent csv or tsv columns joined by a
// one-byte separator, 17 to 128 bytes, hashed with XXH3, is hashed from
// the record with the delimiters patched as it is read (xxh3Patched says
// why). Item works after it as after Key.
func (k *Keyer) Fingerprint(rec []byte, first, simple bool, h Hash) (fpstore.Fingerprint, error) {
	line, key, err := k.locate(rec, first, simple)
	if err != nil {
		return fpstore.Fingerprint{}, err
	}
	if line != nil {
		if k.span && k.plain && h == XXH3 {
			start, end := k.fields[k.cols[0]].start, k.fields[k.cols[len(k.cols)-1]].end
			if n := end - start; n >= 17 && n <= 128 {
				return xxh3Patched(line[start:end], k.delimiter, k.sep[0]), nil
			}
		}
		key = k.join(line)
	}
	return h.Sum(key), nil
}

func (k *Keyer) key(rec []byte, first, simple bool) ([]byte, error) {
	line, key, err := k.locate(rec, first, simple)
	if err != nil || line == nil {
		return key, err
	}
	return k.join(line), nil
}

// locate finds rec's key: in csv and tsv it locates the fields and returns
// the record's line (the key is k.join of it); in lines and jsonl format
// it returns the key itself, and a nil line.
func (k *Keyer) locate(rec []byte, first, simple bool) (line, key []byte, err error) {
	if k.format == FormatLines {
		if n := len(rec); n > 0 && rec[n-1] == k.term {
			return nil, rec[:n-1], nil
		}
		return nil, rec, nil
	}
	if k.format == FormatParquet {
		k.line = nil
		if err := frameFields(rec, k.fields); err != nil {
			return nil, nil, err
		}
		k.line = rec
		return rec, nil, nil
	}
	line = trimNewline(rec)
	if first {
		line = bytes.TrimPrefix(line, []byte(bom))
	}
	k.line = nil // Item has nothing until a key is found
	if len(line) == 0 {
		return nil, nil, &BadRecord{Reason: "blank line"}
	}
	switch k.format {
	case FormatCSV:
		if simple {
			err = k.splitFields(line, k.delimiter)
		} else {
			err = k.csvFields(line)
		}
	case FormatTSV:
		err = k.splitFields(line, k.delimiter)
	case FormatJSONL:
		if key, err = k.jsonKey(line); err == nil {
			k.line = line
		}
		return nil, key, err
	}
	if err != nil {
		return nil, nil, err
	}
	k.line = line
	return line, nil, nil
}

// Item returns the bytes of key item i (KeySpec.Keys[i]) of the record the
// last Key call read: what a Keyer of that item alone would return, valid
// until the next call. It is nil when that call failed, and in lines
// format, which has no items. (Replay reads its time field this way, from
// the record already split for the key.)
func (k *Keyer) Item(i int) []byte {
	if k.line == nil || k.format == FormatLines || i < 0 || i >= len(k.cols) {
		return nil
	}
	return k.bytes(k.line, k.fields[k.cols[i]])
}

// join returns the key fields joined by the separator, without copying
// when there is only one.
func (k *Keyer) join(line []byte) []byte {
	if len(k.cols) == 1 {
		return k.bytes(line, k.fields[k.cols[0]])
	}
	if k.span && k.plain {
		// One copy instead of one per field and separator, or none when
		// the separator is the delimiter (BenchmarkKeyCSV/hand/plain and
		// BenchmarkKeyTSV/hand).
		start, end := k.fields[k.cols[0]].start, k.fields[k.cols[len(k.cols)-1]].end
		if k.sep[0] == k.delimiter {
			return line[start:end:end] // an append to the key must not write into the record
		}
		out := append(k.out[:0], line[start:end]...)
		for _, c := range k.cols[:len(k.cols)-1] {
			out[k.fields[c].end-start] = k.sep[0]
		}
		k.out = out
		return out
	}
	out := k.out[:0]
	for i, c := range k.cols {
		if i > 0 {
			out = append(out, k.sep...)
		}
		out = append(out, k.bytes(line, k.fields[c])...)
	}
	k.out = out
	return out
}

// bytes returns the bytes f locates.
func (k *Keyer) bytes(line []byte, f field) []byte {
	if f.scratch {
		return k.scratch[f.start:f.end:f.end]
	}
	return line[f.start:f.end:f.end]
}

// TrimEnd returns rec without its terminator: Term in the lines format,
// "\n" or "\r\n" in csv, tsv and jsonl. It is the record as count and
// query print it; a Parquet row, which has no text of its own, prints as
// its key (a new slice).
func (s KeySpec) TrimEnd(rec []byte) []byte {
	if s.Format == FormatParquet {
		key, _ := JoinFrame(make([]byte, 0, len(rec)+8*len(s.Sep)), rec, []byte(s.Sep))
		return key
	}
	if s.Format == FormatLines {
		if n := len(rec); n > 0 && rec[n-1] == s.Term {
			return rec[:n-1]
		}
		return rec
	}
	return trimNewline(rec)
}

// PrintedLine is rec as count and query print it on a line of text:
// TrimEnd's text, a Parquet row's key text escaped (appendEscaped) so
// that a row is one line whatever its values hold. A text record is its
// bytes unchanged.
func (s KeySpec) PrintedLine(rec []byte) []byte {
	t := s.TrimEnd(rec)
	if s.Format != FormatParquet {
		return t
	}
	for i, c := range t {
		if escapes[c] != 0 {
			return appendEscaped(append(make([]byte, 0, len(t)+8), t[:i]...), t[i:])
		}
	}
	return t
}

// escapes are the bytes a printed Parquet row escapes, and their
// letters: a backslash, so that the text reads back, and the bytes that
// end a line or a field of count's and query's output.
var escapes = [256]byte{'\\': '\\', '\t': 't', '\n': 'n', '\r': 'r', 0: '0'}

// appendEscaped appends key text t to b with a backslash, TAB, LF, CR
// and NUL written \\, \t, \n, \r and \0: the one escape of a Parquet
// row printed on a line (README "Parquet").
func appendEscaped(b, t []byte) []byte {
	for _, c := range t {
		if escapes[c] != 0 {
			b = append(b, '\\', escapes[c])
			continue
		}
		b = append(b, c)
	}
	return b
}

// SameHeader reports whether two header records name the same fields:
// their terminators and a leading UTF-8 BOM aside.
func SameHeader(a, b []byte) bool {
	return bytes.Equal(bytes.TrimPrefix(trimNewline(a), []byte(bom)), bytes.TrimPrefix(trimNewline(b), []byte(bom)))
}

// trimNewline strips a record's "\n" or "\r\n" terminator.
func trimNewline(rec []byte) []byte {
	n := len(rec)
	if n > 0 && rec[n-1] == '\n' {
		n--
		if n > 0 && rec[n-1] == '\r' {
			n--
		}
	}
	return rec[:n]
}

// SplitFormat calls fn for each raw record in data, terminator included,
// until fn returns false. In lines format records end with term; in csv,
// tsv and jsonl with '\n', and in csv only a '\n' outside quotes ends one.
// A final record without its terminator (which a ChunkReader never leaves)
// is passed as it is; so is, in csv, the rest of the data after a quote
// that is never closed, as one record that Key then reports.
func SplitFormat(data []byte, f Format, term byte, fn func(rec []byte) bool) {
	SplitShaped(data, f, term, func(rec []byte, _ bool) bool { return fn(rec) })
}

// SplitShaped is SplitFormat that also says of each record whether it is
// simple: it holds no line feed but its terminator, so it moves the line
// count on by one (CountLines is not needed; a final record without a
// terminator moves it on by none, but nothing follows it), and in csv it
// holds no '"', so that KeyShaped need not look for one. Every record of
// tsv, jsonl and '\n'-terminated lines is simple; a csv record is when the
// splitter's search for the next quote (which it makes anyway) ends beyond
// it. Not simple only means not known to be: a record of lines ended by
// another byte, or a csv record with a quote, on one line or more.
func SplitShaped(data []byte, f Format, term byte, fn func(rec []byte, simple bool) bool) {
	if f == FormatParquet {
		SplitFrames(data, func(rec []byte) bool { return fn(rec, true) })
		return
	}
	if f != FormatLines {
		term = '\n'
	}
	if f == FormatCSV {
		// Up to the line of the first quote, records are lines: split them
		// as lines are, without the quote cursor's calls per record.
		plain := len(data)
		if q := bytes.IndexByte(data, '"'); q >= 0 {
			plain = bytes.LastIndexByte(data[:q], '\n') + 1
		}
		if !splitLines(data[:plain], '\n', true, fn) {
			return
		}
		q := quoteCursor{}
		for p := plain; p < len(data); {
			end := q.recordEnd(data, p)
			if !fn(data[p:end], q.q >= end) {
				return
			}
			p = end
		}
		return
	}
	splitLines(data, term, term == '\n', fn)
}

// Split is SplitShaped of data, which is c.Data or a part of it, with what
// c's reader learned of it: the records of a csv chunk without quotes are
// lines, split without another search for a quote.
func (c *Chunk) Split(data []byte, f Format, term byte, fn func(rec []byte, simple bool) bool) {
	if f == FormatCSV && c.plainCSV {
		splitLines(data, '\n', true, fn)
		return
	}
	SplitShaped(data, f, term, fn)
}

// splitLines calls fn on each record of data ended by term (the last one
// may lack it), saying simple of each; false when fn stopped it.
func splitLines(data []byte, term byte, simple bool, fn func(rec []byte, simple bool) bool) bool {
	for len(data) > 0 {
		i := bytes.IndexByte(data, term) + 1
		if i == 0 {
			i = len(data)
		}
		if !fn(data[:i], simple) {
			return false
		}
		data = data[i:]
	}
	return true
}

// CountLines is how many physical lines rec, a record with its terminator,
// moves the line count on: its line feeds. A caller walking a Chunk adds it
// to Chunk.FirstLine record by record to know where each record starts.
func CountLines(rec []byte) int {
	return bytes.Count(rec, []byte{'\n'})
}
