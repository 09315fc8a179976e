package ingest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/rle"
	pformat "github.com/parquet-go/parquet-go/format"
)

// keyText is one key column of a row group as key text (appendText): row
// r's text is buf[at[r].start:at[r].end], and a NULL's span is nullSpan.
// The rows of a dictionary-encoded chunk share their entry's text, which
// is rendered once.
type keyText struct {
	buf []byte
	at  []textSpan
}

type textSpan struct{ start, end uint32 }

var nullSpan = textSpan{1, 0}

// text is row r's key text, and whether the row's value is NULL.
func (k *keyText) text(r int64) ([]byte, bool) {
	s := k.at[r]
	if s == nullSpan {
		return nil, true
	}
	return k.buf[s.start:s.end:s.end], false
}

// reset empties k for a row group of rows rows and about guess bytes of
// text, keeping its buffers where they are large enough.
func (k *keyText) reset(rows, guess int64) {
	if int64(cap(k.at)) < rows {
		k.at = make([]textSpan, 0, rows)
	}
	if int64(cap(k.buf)) < guess {
		k.buf = make([]byte, 0, guess)
	}
	k.at, k.buf = k.at[:0], k.buf[:0]
}

// add appends v's text (v not NULL) as the next row's.
func (k *keyText) add(c *ParquetColumn, v parquet.Value) {
	start := len(k.buf)
	k.buf = c.appendText(k.buf, v)
	k.at = append(k.at, k.since(start))
}

// since is the span of the text appended to buf from start on.
func (k *keyText) since(start int) textSpan {
	return textSpan{uint32(start), uint32(len(k.buf))}
}

// tooLarge is an error once the texts pass what a span can address or the
// file's limit.
func (k *keyText) tooLarge(limit int64) bool {
	return int64(len(k.buf)) > min(limit, math.MaxUint32)
}

// tooLargeError says that a row group's key texts of column c passed the
// limit (tooLarge): more memory would do, up to the 4 GiB a row group's
// texts can span, and smaller row groups always.
func (k *keyText) tooLargeError(name, column string, limit int64) error {
	if int64(len(k.buf)) > math.MaxUint32 {
		return &ParquetError{Name: name, Column: column, Err: ErrParquetTooLarge,
			Detail: fmt.Sprintf("key texts of more than %d bytes in one row group: write the file in smaller row groups", int64(math.MaxUint32))}
	}
	return &ParquetMemError{Name: name, Column: column, What: "a row group's key texts", Need: int64(len(k.buf)), AtLeast: true,
		Limit: limit, Remedy: "or write the file in smaller row groups"}
}

// chunkText renders the pages of a key column's chunk as checkPages
// proves them, from the bytes it has already expanded: the library's page
// reader would read and expand every page a second time and make a
// parquet.Value of every value, which was half of a key pass's CPU (zstd
// twice) in the profile of count and build from DuckDB's files. It decodes
// what key columns hold in the files met in practice: PLAIN and dictionary
// encoded values under RLE definition levels. A page in any other encoding
// sets fallback, and the chunk is read by the library instead. Each value
// still becomes text through appendText, the one definition of key text.
type chunkText struct {
	name     string
	col      *ParquetColumn
	rows     int64 // the row group's
	limit    int64
	out      keyText
	dict     []textSpan // the dictionary's entries, rendered into out.buf
	fallback bool

	defs []uint8
	idx  []int32
	vals []textSpan // a page's present values, when it has NULLs
}

// page decodes one checked page: levels is a v2 page's level bytes, values
// the rest, expanded.
func (d *chunkText) page(h *pageHeader, levels, values []byte) error {
	if d.fallback {
		return nil
	}
	c := d.col
	switch h.typ {
	case pageDictionary:
		if d.dict != nil || (h.encoding != int64(pformat.Plain) && h.encoding != 2) {
			d.fallback = true // a second dictionary, or an encoding of one never written
			return nil
		}
		d.dict = make([]textSpan, 0, h.numValues)
		_, err := d.plain(values, int(h.numValues), func(s textSpan) { d.dict = append(d.dict, s) })
		if err != nil {
			return fmt.Errorf("the dictionary: %w", err)
		}
		return d.check()
	case pageData, pageDataV2:
	default:
		return nil // an index page
	}
	n := h.numValues
	if c.maxRep > 0 || (h.typ == pageData && c.maxDef > 0 && h.defEncoding != int64(pformat.RLE)) {
		d.fallback = true
		return nil
	}
	switch pformat.Encoding(h.encoding) {
	case pformat.Plain, 2, pformat.RLEDictionary:
	default:
		d.fallback = true
		return nil
	}
	// The definition levels: a v1 page's lead its values, with their
	// length; a v2 page's are apart (checkPageData proved both framings).
	present := n
	d.defs = d.defs[:0]
	if c.maxDef > 0 {
		var lv []byte
		if h.typ == pageDataV2 {
			lv = levels[h.repLen:]
		} else {
			lv = values[4 : 4+binary.LittleEndian.Uint32(values)]
			values = values[4+len(lv):]
		}
		width := bits.Len(uint(c.maxDef))
		var err error
		if d.defs, err = (&rle.Encoding{BitWidth: width}).DecodeLevels(d.defs, lv); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		if int64(len(d.defs)) < n {
			return fmt.Errorf("definition levels for %d values of %d", len(d.defs), n)
		}
		d.defs = d.defs[:n]
		present = 0
		for _, l := range d.defs {
			if int(l) == c.maxDef {
				present++
			}
		}
	}
	// Then the present values, in the page's order, spread among the
	// NULLs after.
	direct := present == n
	d.vals = d.vals[:0]
	emit := func(s textSpan) {
		if direct {
			d.out.at = append(d.out.at, s)
		} else {
			d.vals = append(d.vals, s)
		}
	}
	switch pformat.Encoding(h.encoding) {
	case pformat.Plain:
		if _, err := d.plain(values, int(present), emit); err != nil {
			return err
		}
	default:
		if present == 0 {
			break
		}
		if d.dict == nil {
			return fmt.Errorf("dictionary indexes without a dictionary")
		}
		if len(values) == 0 {
			return fmt.Errorf("no dictionary indexes for %d values", present)
		}
		var err error
		if d.idx, err = (&rle.Encoding{BitWidth: int(values[0])}).DecodeInt32(d.idx[:0], values[1:]); err != nil {
			return fmt.Errorf("dictionary indexes: %w", err)
		}
		if int64(len(d.idx)) < present {
			return fmt.Errorf("dictionary indexes for %d values of %d", len(d.idx), present)
		}
		for _, x := range d.idx[:present] {
			if x < 0 || int(x) >= len(d.dict) {
				return fmt.Errorf("dictionary index %d in a dictionary of %d", x, len(d.dict))
			}
			emit(d.dict[x])
		}
	}
	if !direct {
		j := 0
		for _, l := range d.defs {
			if int(l) == c.maxDef {
				d.out.at = append(d.out.at, d.vals[j])
				j++
			} else {
				d.out.at = append(d.out.at, nullSpan)
			}
		}
	}
	return d.check()
}

// check bounds the texts by the limit, and the rows by the row group's.
func (d *chunkText) check() error {
	if d.out.tooLarge(d.limit) {
		return d.out.tooLargeError(d.name, d.col.Path, d.limit)
	}
	if int64(len(d.out.at)) > d.rows {
		return fmt.Errorf("more values than the row group's %d rows", d.rows)
	}
	return nil
}

// plain renders n PLAIN values of the column's type from b, calling fn
// with each one's span, and returns the bytes they took.
func (d *chunkText) plain(b []byte, n int, fn func(textSpan)) (int, error) {
	c := d.col
	add := func(v parquet.Value) {
		start := len(d.out.buf)
		d.out.buf = c.appendText(d.out.buf, v)
		fn(d.out.since(start))
	}
	short := func(need int) error {
		return fmt.Errorf("%d %s values need %d bytes, the page has %d", n, c.phys, need, len(b))
	}
	fixed := func(size int) (int, error) {
		if n > len(b)/size {
			return 0, short(n * size)
		}
		return n * size, nil
	}
	switch c.phys {
	case pformat.Boolean:
		if n > len(b)*8 {
			return 0, short((n + 7) / 8)
		}
		for i := range n {
			add(parquet.BooleanValue(b[i/8]>>(i%8)&1 != 0))
		}
		return (n + 7) / 8, nil
	case pformat.Int32, pformat.Float:
		size, err := fixed(4)
		if err != nil {
			return 0, err
		}
		for i := range n {
			u := binary.LittleEndian.Uint32(b[4*i:])
			if c.phys == pformat.Int32 {
				start := len(d.out.buf)
				d.out.buf = c.appendInt32(d.out.buf, int32(u)) // no parquet.Value: the hot path
				fn(d.out.since(start))
			} else {
				add(parquet.FloatValue(math.Float32frombits(u)))
			}
		}
		return size, nil
	case pformat.Int64, pformat.Double:
		size, err := fixed(8)
		if err != nil {
			return 0, err
		}
		for i := range n {
			u := binary.LittleEndian.Uint64(b[8*i:])
			if c.phys == pformat.Int64 {
				start := len(d.out.buf)
				d.out.buf = c.appendInt64(d.out.buf, int64(u)) // no parquet.Value: the hot path
				fn(d.out.since(start))
			} else {
				add(parquet.DoubleValue(math.Float64frombits(u)))
			}
		}
		return size, nil
	case pformat.FixedLenByteArray:
		w := int(c.typeLength)
		if w <= 0 {
			return 0, fmt.Errorf("a FIXED_LEN_BYTE_ARRAY of length %d", w)
		}
		size, err := fixed(w)
		if err != nil {
			return 0, err
		}
		for i := range n {
			add(parquet.FixedLenByteArrayValue(b[w*i : w*i+w]))
		}
		return size, nil
	case pformat.ByteArray:
		at := 0
		for i := range n {
			if len(b)-at < 4 {
				return 0, fmt.Errorf("value %d of %d: no length", i+1, n)
			}
			l := binary.LittleEndian.Uint32(b[at:])
			at += 4
			if uint64(l) > uint64(len(b)-at) {
				return 0, fmt.Errorf("value %d of %d: a length of %d in %d bytes", i+1, n, l, len(b)-at)
			}
			if c.render == renderBytes {
				// A string's text is its bytes: no parquet.Value (its
				// making and appendText's switches were a tenth of a Parquet
				// count's CPU, pprof).
				start := len(d.out.buf)
				d.out.buf = append(d.out.buf, b[at:at+int(l)]...)
				fn(d.out.since(start))
			} else {
				add(parquet.ByteArrayValue(b[at : at+int(l)]))
			}
			at += int(l)
			if d.out.tooLarge(d.limit) {
				return 0, d.check()
			}
		}
		return at, nil
	}
	return 0, fmt.Errorf("%s values have no key text", c.phys) // INT96: never a key column
}

// done is the chunk's texts once every page is decoded: exactly the row
// group's rows.
func (d *chunkText) done() (keyText, error) {
	if int64(len(d.out.at)) != d.rows {
		return keyText{}, fmt.Errorf("%d values for the row group's %d rows", len(d.out.at), d.rows)
	}
	return d.out, nil
}
