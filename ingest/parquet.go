package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/big"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	pformat "github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"

	"github.com/fpdedup/fpdedup/internal/thriftscan"
)

// A Parquet file's records are its rows, and a row's key is made of typed
// columns, so its text is defined here once (DESIGN "Parquet keys"):
//
//   - integers in decimal, unsigned ones (UINT_8 … UINT_64, or an
//     unsigned INTEGER logical type) as unsigned;
//   - strings, enums, JSON and other byte arrays as their bytes;
//   - booleans as true or false;
//   - FLOAT and DOUBLE as Go's shortest text that reads back as the same
//     value (strconv.FormatFloat(v, 'g', -1, bits));
//   - DECIMAL as its plain decimal text with exactly its scale's digits
//     after the point ("-3952.71", "0.05", "12" at scale 0);
//   - DATE, TIME and TIMESTAMP as the integer the file stores, in the unit
//     it declares (days; ms, µs or ns): a timestamp_ms column keys exactly as
//     the online "user_id:device_id:timestamp_ms" text does.
//
// A NULL in a key column is a bad record. INT96 and repeated columns (a
// LIST's elements) cannot be key columns.

// The Parquet problems of a file.
var (
	ErrNotParquet         = errors.New("not a Parquet file")
	ErrParquetDamaged     = errors.New("a damaged Parquet file")
	ErrParquetUnsupported = errors.New("unsupported in a Parquet key")
	ErrParquetTooLarge    = errors.New("more than the memory allowed")
	ErrParquetNoText      = errors.New("has no text rendering")
	// ErrParquetUnreadable is a sound page the Parquet library cannot
	// decode (errDeltaInt32): refused as such, not as damage.
	ErrParquetUnreadable = errors.New("not readable by the Parquet library fpdedup uses")
)

// ParquetError is a Parquet file that cannot be read, or a column that
// cannot be a key: Err is one of the errors above.
type ParquetError struct {
	Name   string // the file
	Column string // the column, when one is at fault
	Detail string
	Err    error
}

func (e *ParquetError) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	b.WriteString(": ")
	if e.Column != "" {
		fmt.Fprintf(&b, "column %s: ", e.Column)
	}
	b.WriteString(e.Err.Error())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

func (e *ParquetError) Unwrap() error { return e.Err }

// render is how a column's values become key text.
type render uint8

const (
	renderInt render = iota + 1
	renderUint
	renderBool
	renderFloat
	renderDouble
	renderBytes
	renderDecimal
)

// ParquetColumn is a leaf column of a file's schema.
type ParquetColumn struct {
	Path     string   // its names from the root, joined by dots
	Leaf     int      // its 0-based place among the leaves
	Type     string   // physical type, and the logical one in brackets
	Repeated bool     // inside a LIST or repeated group: no key column
	names    []string // Path's names, one a level
	defs     []int    // the definition level at which each of names is present
	render   render
	scale    int
	bad      string // why it cannot be a key column, when it cannot

	phys           pformat.Type
	typeLength     int32 // a FIXED_LEN_BYTE_ARRAY's
	maxDef, maxRep int   // its levels' largest values
}

// ParquetFile is a Parquet file open for reading its rows' keys.
type ParquetFile struct {
	name    string
	r       io.ReaderAt
	size    int64
	limit   int64 // the most bytes a footer, a page or a row group's key values may take
	file    *parquet.File
	columns []ParquetColumn
	scratch []*pageScratch // one per column decoded at once
	ahead   *decodeAhead   // the next row group's key columns, decoding (Frames)
	spare   []keyText      // a framed row group's texts, for the next decoding's buffers
	// frameBytes is the bytes a framed row took in the last chunk (Frames).
	frameBytes int64
	// nodes are the schema's nodes, when file is not kept (schemaNodes).
	nodes []schemaNode

	starts     []int64 // each row group's first row, 1-based in the file
	footerCost int64   // what the footer's parse holds (scanFooter)

	stop      atomic.Bool // Close: a decoding ahead gives up at its next page
	checkedMu sync.Mutex
	checked   map[[2]int]bool // the row groups' columns whose pages are checked (checkPages)
}

// decodeAhead is a row group's key columns decoded in the background while
// the row group before it is framed.
type decodeAhead struct {
	g     int
	cols  []int
	done  chan struct{}
	vals  []keyText
	spare []keyText // buffers it may reuse
	err   error
}

// pageScratch is what checkPages of one column at a time reuses.
type pageScratch struct {
	expand expander
	page   []byte
}

// parquetValueBytes bounds what a decoded value takes in memory (a
// parquet.Value, where the library decodes a chunk; a keyText's span and
// the most text most types render to, where chunkText does).
const parquetValueBytes = 24

// OpenParquet reads the footer of a Parquet file of size bytes. limit
// bounds what its structures may make this process allocate: the footer,
// any page, and the key values of a row group (Keys). The library it reads
// with trusts the lengths a file declares and can panic on a crafted
// footer, so every structure is walked first (thriftscan) and a panic is a
// damaged file here, never a crash; what its parse will hold is counted
// from that walk, and refused past the limit before it is spent.
func OpenParquet(name string, r io.ReaderAt, size, limit int64) (p *ParquetFile, err error) {
	return openParquet(name, r, size, limit, false)
}

// openParquet is OpenParquet, and OpenParquetRows when rows is set.
func openParquet(name string, r io.ReaderAt, size, limit int64, rows bool) (p *ParquetFile, err error) {
	defer recoverParquet(name, &err)
	var head, tail [8]byte
	if size < 12 {
		return nil, &ParquetError{Name: name, Err: ErrNotParquet, Detail: fmt.Sprintf("%d bytes, too short", size)}
	}
	if _, err := r.ReadAt(head[:4], 0); err != nil {
		return nil, &ParquetError{Name: name, Err: ErrNotParquet, Detail: err.Error()}
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, &ParquetError{Name: name, Err: ErrNotParquet, Detail: err.Error()}
	}
	switch {
	case string(head[:4]) != "PAR1":
		return nil, &ParquetError{Name: name, Err: ErrNotParquet, Detail: "no PAR1 at its start"}
	case string(tail[4:]) == "PARE":
		return nil, &ParquetError{Name: name, Err: ErrParquetUnsupported, Detail: "an encrypted footer"}
	case string(tail[4:]) != "PAR1":
		return nil, &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: "no PAR1 at its end (cut short?)"}
	}
	footer := int64(binary.LittleEndian.Uint32(tail[:4]))
	switch {
	case footer < 1 || footer > size-12:
		return nil, &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("a footer of %d bytes in a file of %d", footer, size)}
	case footer > limit:
		return nil, &ParquetMemError{Name: name, What: fmt.Sprintf("a footer of %d bytes, parsed,", footer), Need: 2 * footer, Limit: limit, AtLeast: true}
	}
	fb := make([]byte, footer)
	if _, err := r.ReadAt(fb, size-8-footer); err != nil {
		return nil, &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: err.Error()}
	}
	shape, err := scanFooter(fb)
	if n := shape.length; err != nil || n != len(fb) {
		return nil, &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("the footer does not parse (%v, %d of %d bytes)", err, n, len(fb))}
	}
	if err := shape.check(name, limit, rows); err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.ReadBufferSize(readBufferSize(limit, shape.elements)))
	if err != nil {
		return nil, &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: err.Error()}
	}
	starts, err := rowGroupStarts(f)
	if err != nil {
		return nil, &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: err.Error()}
	}
	p = &ParquetFile{name: name, r: r, size: size, limit: limit, file: f, footerCost: shape.cost, starts: starts}
	if err := p.readSchema(); err != nil {
		return nil, err
	}
	return p, nil
}

// IsParquetFile reports whether path is a regular file that starts as
// every Parquet file does (parquetHead), which no text file does: a file
// cut short is one, for its reading to say it is damaged. A path that
// cannot be opened, and a directory, are the error their reading gives.
func IsParquetFile(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err // *fs.PathError names the file
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return false, fmt.Errorf("%s: is a directory", path)
	}
	return IsParquet(f)
}

// IsParquet is IsParquetFile of an open file, read where it says
// (pread) without moving its offset: standard input redirected from a
// file is looked into and then read from where it was. A file that is
// not regular (a pipe) is not looked into.
func IsParquet(f *os.File) (bool, error) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() < int64(len(parquetHead)) {
		return false, err
	}
	var head [len(parquetHead)]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return false, err
	}
	return string(head[:]) == parquetHead, nil
}

// parquetHead starts every Parquet file: the magic, then the first field
// header of a page header or of the footer (field 1, an i32).
const parquetHead = "PAR1\x15"

// recoverParquet turns a panic of the library into a damaged file.
func recoverParquet(name string, err *error) {
	if r := recover(); r != nil {
		*err = &ParquetError{Name: name, Err: ErrParquetDamaged, Detail: fmt.Sprint(r)}
	}
}

// readSchema lists the leaves from the flattened schema (depth first, as
// the footer stores it).
func (p *ParquetFile) readSchema() error {
	elems := p.file.Metadata().Schema
	if len(elems) == 0 {
		return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: "an empty schema"}
	}
	var walk func(at int, path []string, defs []int, def, rep int) (int, error)
	walk = func(at int, path []string, defs []int, def, rep int) (int, error) {
		if at >= len(elems) {
			return at, &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: "the schema ends inside a group"}
		}
		e := &elems[at]
		if r, ok := e.RepetitionType.Get(); ok && at > 0 { // the root's says nothing
			switch r {
			case pformat.Optional:
				def++
			case pformat.Repeated:
				def++
				rep++
			}
		}
		path, defs = append(path, e.Name), append(defs, def)
		n, group := e.NumChildren.Get()
		if !group || n == 0 && !hasType(e) {
			if !hasType(e) {
				return at, &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("schema element %d has neither a type nor children", at)}
			}
			c := leafColumn(e)
			c.Path, c.Leaf, c.Repeated = strings.Join(path[1:], "."), len(p.columns), rep > 0
			c.names, c.defs = slices.Clone(path[1:]), slices.Clone(defs[1:])
			c.maxDef, c.maxRep = def, rep
			p.columns = append(p.columns, c)
			return at + 1, nil
		}
		if n < 0 || int(n) > len(elems) {
			return at, &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("schema element %d claims %d children", at, n)}
		}
		next := at + 1
		for range n {
			var err error
			if next, err = walk(next, path, defs, def, rep); err != nil {
				return next, err
			}
		}
		return next, nil
	}
	end, err := walk(0, nil, nil, 0, 0)
	if err != nil {
		return err
	}
	if end != len(elems) {
		return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("the schema has %d elements, its tree %d", len(elems), end)}
	}
	if len(p.columns) != len(p.file.Schema().Columns()) {
		return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: "the schema's leaves and the library's differ"}
	}
	return nil
}

func hasType(e *pformat.SchemaElement) bool { _, ok := e.Type.Get(); return ok }

// leafColumn says how a leaf's values become key text.
func leafColumn(e *pformat.SchemaElement) ParquetColumn {
	t, _ := e.Type.Get()
	conv, hasConv := e.ConvertedType.Get()
	c := ParquetColumn{Type: typeName(t), phys: t}
	c.typeLength, _ = e.TypeLength.Get()
	lt := e.LogicalType.Value
	if s := e.LogicalType.String(); s != "" {
		c.Type += " (" + s + ")"
	} else if hasConv {
		c.Type += " (" + convertedName(conv) + ")"
	}
	decimal := func() bool {
		if d, ok := lt.(*pformat.DecimalType); ok {
			c.scale = int(d.Scale)
			return true
		}
		if hasConv && conv == deprecated.Decimal {
			s, _ := e.Scale.Get()
			c.scale = int(s)
			return true
		}
		return false
	}
	switch t {
	case pformat.Boolean:
		c.render = renderBool
	case pformat.Int32, pformat.Int64:
		switch {
		case decimal():
			c.render = renderDecimal
		case isUnsigned(lt, conv, hasConv):
			c.render = renderUint
		default:
			c.render = renderInt
		}
	case pformat.Float:
		c.render = renderFloat
	case pformat.Double:
		c.render = renderDouble
	case pformat.ByteArray, pformat.FixedLenByteArray:
		c.render = renderBytes
		if decimal() {
			c.render = renderDecimal
		}
	default: // INT96, and anything newer
		c.bad = fmt.Sprintf("%s values have no key text", typeName(t))
		if t == pformat.Int96 {
			c.bad += " (INT96 is a legacy timestamp: write it as TIMESTAMP)"
		}
	}
	if c.render == renderDecimal && (c.scale < 0 || c.scale > 76) {
		c.render, c.bad = 0, fmt.Sprintf("DECIMAL scale %d", c.scale)
	}
	return c
}

func isUnsigned(lt pformat.LogicalTypeValue, conv deprecated.ConvertedType, hasConv bool) bool {
	if it, ok := lt.(*pformat.IntType); ok {
		return !it.IsSigned
	}
	if !hasConv {
		return false
	}
	switch conv {
	case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32, deprecated.Uint64:
		return true
	}
	return false
}

// Close lets go of the decoder the page checks keep; the reader given to
// OpenParquet is the caller's to close.
func (p *ParquetFile) Close() {
	if a := p.ahead; a != nil {
		p.stop.Store(true) // after a cancel, no waiting for a row group nobody reads
		<-a.done           // it uses the scratch
		p.ahead = nil
	}
	for _, s := range p.scratch {
		if s.expand.zstd != nil {
			s.expand.zstd.Close()
		}
	}
	p.scratch = nil
}

// RowGroupBytes is the bytes row group g takes in the file, for progress.
func (p *ParquetFile) RowGroupBytes(g int) int64 {
	rgs := p.file.Metadata().RowGroups
	if g < 0 || g >= len(rgs) {
		return 0
	}
	var n int64
	for _, c := range rgs[g].Columns {
		n += c.MetaData.TotalCompressedSize
	}
	return n
}

// Columns lists the file's leaf columns in schema order.
func (p *ParquetFile) Columns() []ParquetColumn { return p.columns }

// RowGroups is the number of row groups.
func (p *ParquetFile) RowGroups() int { return len(p.file.RowGroups()) }

// Rows is the number of rows the footer declares.
func (p *ParquetFile) Rows() int64 { return p.file.NumRows() }

// ResolveKey finds the key's columns: each item a dotted path from the
// root (st.a) or a 1-based leaf column number. A name that is not a leaf,
// a repeated column and a column without key text are refused.
func (p *ParquetFile) ResolveKey(items []string) ([]int, error) {
	if len(items) == 0 {
		return nil, &KeyError{Problem: ParquetNeedsKey, Input: p.name}
	}
	var cols []int
	for _, it := range items {
		c, err := p.column(it)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// KeyColumns is ResolveKey of s.Keys and then of extra items (replay's
// time field), the key's columns checked against the indexes whose
// recorded key is spelled otherwise (KeySpec.Respelled).
func (p *ParquetFile) KeyColumns(s KeySpec, extra ...string) ([]int, error) {
	cols, err := p.ResolveKey(append(slices.Clip(s.Keys), extra...))
	if err != nil {
		return nil, err
	}
	if err := s.sameColumns(p.name, cols[:len(s.Keys)], p.ResolveKey); err != nil {
		return nil, err
	}
	return cols, nil
}

func (p *ParquetFile) column(item string) (int, error) {
	if item == "" {
		return 0, &KeyError{Problem: EmptyItem, Input: p.name}
	}
	leaf := -1
	if n, err := strconv.Atoi(item); err == nil {
		switch {
		case n == 0:
			return 0, &KeyError{Problem: ColumnZero, Item: item, Input: p.name}
		case n < 0 || n > len(p.columns):
			return 0, &KeyError{Problem: BeyondColumns, Item: item, N: len(p.columns), Input: p.name}
		}
		leaf = n - 1
	} else {
		var found []int
		for i, c := range p.columns {
			if c.Path == item {
				found = append(found, i)
			}
		}
		switch {
		case len(found) > 1:
			// Two leaves of one name, or a column named "a.b" beside
			// group a's leaf b: which one is the user's to say.
			return 0, &KeyError{Problem: AmbiguousLeaf, Item: item, N: len(found), Names: p.describeLeaves(found, false), Input: p.name}
		case len(found) == 1:
			leaf = found[0]
		default:
			if under := p.leavesUnder(item); len(under) > 0 {
				return 0, &KeyError{Problem: GroupNotLeaf, Item: item, Names: p.describeLeaves(under, true), Input: p.name}
			}
			var names []string
			for _, c := range p.columns {
				names = append(names, c.Path)
			}
			return 0, &KeyError{Problem: NoSuchLeaf, Item: item, Names: strings.Join(names, ", "), Input: p.name}
		}
	}
	c := p.columns[leaf]
	switch {
	case c.Repeated:
		return 0, &ParquetError{Name: p.name, Column: c.Path, Err: ErrParquetUnsupported, Detail: "a repeated column (a list's elements) holds many values a row"}
	case c.bad != "":
		return 0, &ParquetError{Name: p.name, Column: c.Path, Err: ErrParquetUnsupported, Detail: c.bad}
	}
	return leaf, nil
}

// Keys calls fn with the key of each row of row group g, in order: the
// text of columns cols (ResolveKey) joined by sep. A row with a NULL key
// column comes with a *RecordError (its key nil) for the caller's
// --on-bad; fn's error stops the reading. key is valid during the call
// only.
func (p *ParquetFile) Keys(g int, cols []int, sep []byte, fn func(row int64, key []byte, bad error) error) error {
	var key []byte
	return p.Frames(g, cols, 1<<20, func(first int64, n int, data []byte) error {
		row := first
		var err error
		SplitFrames(data, func(rec []byte) bool {
			var bad error
			key, bad = JoinFrame(key[:0], rec, sep)
			if bad != nil {
				err = fn(row, nil, &RecordError{Name: p.name, RowGroup: g + 1, Line: row, Record: row, Err: bad})
			} else {
				err = fn(row, key, nil)
			}
			row++
			return err == nil
		})
		return err
	})
}

// Chunks is Frames in Chunks, as the pipeline reads every format: records
// numbered by row in the file, which is also their "line".
func (p *ParquetFile) Chunks(g int, cols []int, size int, fn func(*Chunk) error) error {
	return p.Frames(g, cols, size, func(first int64, n int, data []byte) error {
		return fn(&Chunk{Data: data, FirstRecord: first, FirstLine: first, Records: n, RowGroup: g + 1, Parquet: p})
	})
}

// Frames reads the key columns cols (ResolveKey) of row group g and calls
// fn with its rows framed (AppendFrame) in order, about size bytes of them
// at a time: n rows from row first (1-based in the file). Each call's data
// is new, the caller's to keep. Only the key columns are read and decoded,
// a whole row group's at once, within the limit, and the next row group's
// while this one is framed (keyColumns): calls come from one goroutine at
// a time.
func (p *ParquetFile) Frames(g int, cols []int, size int, fn func(first int64, n int, data []byte) error) (err error) {
	defer recoverParquet(p.name, &err)
	rgs := p.file.RowGroups()
	if g < 0 || g >= len(rgs) {
		return fmt.Errorf("%s: no row group %d", p.name, g)
	}
	first := p.starts[g]
	n := rgs[g].NumRows()
	switch {
	case n < 0:
		return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d: %d rows", g, n)}
	case n > p.limit/parquetValueBytes/int64(len(cols)):
		return &ParquetMemError{Name: p.name, What: fmt.Sprintf("row group %d: %d rows of %d key columns, decoded,", g, n, len(cols)),
			Need: n * int64(len(cols)) * parquetValueBytes, Limit: p.limit, Remedy: "or write the file in smaller row groups"}
	}
	texts, err := p.keyColumns(g, cols, n)
	if err != nil {
		return err
	}
	// A chunk's buffer is sized from the bytes a row took so far (a
	// guess before the first chunk): the last chunk of a row group is
	// smaller than size, and one that grows by appends copies itself
	// each time and takes fresh memory.
	if p.frameBytes == 0 {
		p.frameBytes = 16 * int64(len(cols))
	}
	capacity := func(rows int64) int { return int(min(int64(size+size/8), rows*p.frameBytes*9/8+64)) }
	data := make([]byte, 0, capacity(n))
	row := make([][]byte, len(cols))
	at, rows := first, 0
	for r := range n {
		var bad string
		for i, c := range cols {
			t, null := texts[i].text(r)
			if null {
				bad = "column " + p.columns[c].Path + " is null"
				break
			}
			row[i] = t
		}
		if bad != "" {
			data = appendBadFrame(data, bad)
		} else {
			data = AppendFrame(data, row)
		}
		rows++
		if len(data) >= size || r == n-1 {
			p.frameBytes = max(int64(len(data))/int64(rows), 1)
			if err := fn(at, rows, data); err != nil {
				return err
			}
			at += int64(rows)
			data, rows = make([]byte, 0, capacity(n-r-1)), 0
		}
	}
	p.spare = texts
	return nil
}

// keyColumns decodes columns cols of row group g (n rows): the result of
// the decoding started ahead, when it is this one, else decoded now. Then
// the next row group's decoding starts in the background: the caller
// frames this one's rows meanwhile (one goroutine, most of a key pass's
// time otherwise left to the decoding's). Two row groups' key values are
// held at most.
func (p *ParquetFile) keyColumns(g int, cols []int, n int64) ([]keyText, error) {
	var vals []keyText
	var err error
	if a := p.ahead; a != nil {
		<-a.done
		p.ahead = nil
		if a.g == g && slices.Equal(a.cols, cols) {
			vals, err = a.vals, a.err
		}
	}
	if vals == nil && err == nil {
		vals, err = p.decodeColumns(g, p.file.RowGroups()[g].ColumnChunks(), cols, n, p.spare)
		p.spare = nil
	}
	if err != nil {
		return nil, err
	}
	if rgs := p.file.RowGroups(); g+1 < len(rgs) {
		next := rgs[g+1].NumRows()
		if next >= 0 && next <= p.limit/parquetValueBytes/int64(len(cols)) {
			a := &decodeAhead{g: g + 1, cols: slices.Clone(cols), done: make(chan struct{}), spare: p.spare}
			p.ahead, p.spare = a, nil
			go func() {
				defer close(a.done)
				defer recoverParquet(p.name, &a.err)
				a.vals, a.err = p.decodeColumns(a.g, rgs[a.g].ColumnChunks(), a.cols, next, a.spare)
			}()
		}
	}
	return vals, nil
}

// checkPages walks the page headers of row group g's chunk of column c
// before the library reads them: each must parse within the chunk, its
// page must end inside the chunk, and no page may be larger, compressed or
// not, than the limit; each page's counts must hold (checkPageData), and
// the pages exactly the row group's rows.
func (p *ParquetFile) checkPages(g, c int, sc *pageScratch, dec *chunkText) error {
	md := p.file.Metadata()
	if g >= len(md.RowGroups) || c >= len(md.RowGroups[g].Columns) {
		return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d has no column %d", g, c)}
	}
	m := md.RowGroups[g].Columns[c].MetaData
	bad := func(format string, a ...any) error {
		return &ParquetError{Name: p.name, Column: p.columns[c].Path, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d: ", g) + fmt.Sprintf(format, a...)}
	}
	start := m.DataPageOffset
	if d := m.DictionaryPageOffset; d > 0 && d < start {
		start = d
	}
	end := start + m.TotalCompressedSize
	if start < 4 || m.TotalCompressedSize < 0 || end > p.size-8 || end < start {
		return bad("a column chunk at %d of %d bytes in a file of %d", start, m.TotalCompressedSize, p.size)
	}
	if err := codecSupported(m.Codec); err != nil {
		return &ParquetError{Name: p.name, Column: p.columns[c].Path, Err: ErrParquetUnreadable, Detail: err.Error()}
	}
	rows := md.RowGroups[g].NumRows
	counts := newPageCounts(rows)
	col := &p.columns[c]
	buf := make([]byte, min(64<<10, end-start))
	for at := start; at < end; {
		if dec != nil && p.stop.Load() { // a key pass's; a copy's check goes on
			return errParquetClosed
		}
		want := min(int64(len(buf)), end-at)
		if _, err := p.r.ReadAt(buf[:want], at); err != nil {
			return bad("reading at %d: %v", at, err)
		}
		h := pageHeader{typ: -1, uncompressed: -1, compressed: -1, compressedData: true}
		n, err := thriftscan.Struct(buf[:want], h.field)
		if err != nil && want < end-at && len(buf) < 16<<20 {
			buf = make([]byte, min(int64(len(buf))*4, end-at)) // a header with large statistics
			continue
		}
		levels := h.levels()
		switch {
		case err != nil:
			return bad("a page header at %d does not parse: %v", at, err)
		case h.compressed < 0 || h.uncompressed < 0:
			return bad("a page header at %d without its sizes", at)
		case h.compressed > p.limit || h.uncompressed > p.limit:
			return &ParquetMemError{Name: p.name, Column: col.Path, What: fmt.Sprintf("row group %d: a page of %d bytes (%d compressed)", g, h.uncompressed, h.compressed),
				Need: max(h.compressed, h.uncompressed), Limit: p.limit, Remedy: "or write the file with smaller pages"}
		case h.compressed > end-at-int64(n):
			return bad("a page at %d of %d bytes runs past its column chunk", at, h.compressed)
		case levels > h.compressed || levels > h.uncompressed:
			return bad("a page at %d with %d bytes of levels in %d", at, levels, h.compressed)
		}
		// The library's decoders trust a page's own framing (a snappy
		// length, a zstd frame, a gzip stream, lz4's guesses) and expand
		// it as far as it says; each page is expanded here first, into at
		// most the size its header declares, and its counts checked.
		page := sc.page[:0]
		if cap(page) < int(h.compressed) {
			page = make([]byte, h.compressed)
		}
		page = page[:h.compressed]
		sc.page = page
		if _, err := p.r.ReadAt(page, at+int64(n)); err != nil {
			return bad("reading the page at %d: %v", at, err)
		}
		values := page[levels:]
		if m.Codec != pformat.Uncompressed && (h.typ != pageDataV2 || h.compressedData) {
			if values, err = sc.expand.expand(m.Codec, values, h.uncompressed-levels); err != nil {
				return bad("the page at %d does not expand to its %d bytes: %v", at, h.uncompressed, err)
			}
		}
		if h.hasCRC && uint32(h.crc) != crc32.ChecksumIEEE(page) {
			return bad("the page at %d fails its CRC", at)
		}
		if err := checkPageData(col, &h, page[:levels], values, &counts, p.limit); err != nil {
			if errors.Is(err, errDeltaInt32) {
				return &ParquetError{Name: p.name, Column: col.Path, Err: ErrParquetUnreadable, Detail: fmt.Sprintf("row group %d: the page at %d: %v", g, at, err)}
			}
			return bad("the page at %d: %v", at, err)
		}
		if dec != nil {
			if err := dec.page(&h, page[:levels], values); err != nil {
				if saysWhat(err) {
					return err
				}
				return bad("the page at %d: %v", at, err)
			}
		}
		at += int64(n) + h.compressed
	}
	if err := counts.end(rows); err != nil {
		return bad("%v", err)
	}
	return nil
}

// setChecked records that the pages of row group g's column c have been
// checked, so that a copy of the group need not expand them again (a
// tenth of a dedup's CPU, pprof).
func (p *ParquetFile) setChecked(g, c int) {
	p.checkedMu.Lock()
	defer p.checkedMu.Unlock()
	if p.checked == nil {
		p.checked = map[[2]int]bool{}
	}
	p.checked[[2]int{g, c}] = true
}

func (p *ParquetFile) wasChecked(g, c int) bool {
	p.checkedMu.Lock()
	defer p.checkedMu.Unlock()
	return p.checked[[2]int{g, c}]
}

// decodeColumns checks and decodes the chunks of columns cols of row
// group g (n rows), several columns at once on as many cores: the values
// are held whole either way, and the decoding is most of a key pass.
func (p *ParquetFile) decodeColumns(g int, chunks []parquet.ColumnChunk, cols []int, n int64, spare []keyText) ([]keyText, error) {
	vals := make([]keyText, len(cols))
	copy(vals, spare) // buffers to reuse: allocating them anew was most of the memory clearing in a key pass's profile
	errs := make([]error, len(cols))
	workers := min(len(cols), runtime.GOMAXPROCS(0))
	for len(p.scratch) < workers {
		p.scratch = append(p.scratch, &pageScratch{})
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(sc *pageScratch) {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(cols); i = int(next.Add(1) - 1) {
				errs[i] = p.decodeColumn(g, chunks, cols[i], n, sc, &vals[i])
			}
		}(p.scratch[w])
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first column's, as one at a time would say
		}
	}
	return vals, nil
}

// decodeColumn is decodeColumns' work for one column, in its own goroutine
// (so with its own recover): the pages decoded as they are checked
// (chunkText), or by the library where chunkText does not decode them.
func (p *ParquetFile) decodeColumn(g int, chunks []parquet.ColumnChunk, c int, n int64, sc *pageScratch, out *keyText) (err error) {
	defer recoverParquet(p.name, &err)
	dec := &chunkText{name: p.name, col: &p.columns[c], rows: n, limit: p.limit, out: *out} // out: the spare buffers decodeColumns passes
	dec.out.reset(n, p.textGuess(g, c, n))
	if err := p.checkPages(g, c, sc, dec); err != nil {
		return err
	}
	p.setChecked(g, c)
	damaged := func(err error) error {
		return &ParquetError{Name: p.name, Column: p.columns[c].Path, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d: %v", g, err)}
	}
	if !dec.fallback {
		if *out, err = dec.done(); err != nil {
			if saysWhat(err) {
				return err
			}
			return damaged(err)
		}
		return nil
	}
	if c >= len(chunks) {
		return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d has no column %d", g, c)}
	}
	if err := p.readColumn(chunks[c], n, &p.columns[c], out); err != nil {
		if saysWhat(err) {
			return err
		}
		return damaged(err)
	}
	return nil
}

// saysWhat tells an error that already says what is wrong with the file
// (a *ParquetError, a *ParquetMemError) from one a decoder returned, which
// is damage.
func saysWhat(err error) bool {
	var pe *ParquetError
	var me *ParquetMemError
	return errors.As(err, &pe) || errors.As(err, &me)
}

// textGuess is about the bytes of key text row group g's chunk of column
// c renders to (n rows): the most digits its numbers take, the expanded
// size of its byte arrays. Growing the texts by appending was a fifth of a
// count's CPU (pprof: growslice).
func (p *ParquetFile) textGuess(g, c int, n int64) int64 {
	per := int64(24)
	switch col := &p.columns[c]; {
	case col.render == renderInt || col.render == renderUint:
		per = 20
		if col.phys == pformat.Int32 {
			per = 11
		}
	case col.render == renderBool:
		per = 5
	case col.render == renderBytes:
		md := p.file.Metadata()
		if g < len(md.RowGroups) && c < len(md.RowGroups[g].Columns) {
			return min(max(md.RowGroups[g].Columns[c].MetaData.TotalUncompressedSize, 0), p.limit)
		}
	}
	return min(n*per, p.limit)
}

// readColumn reads the n values of a column chunk of column c, which is
// not repeated (one value a row, NULLs included), through the library,
// into their key texts.
func (p *ParquetFile) readColumn(cc parquet.ColumnChunk, n int64, c *ParquetColumn, out *keyText) error {
	pages := cc.Pages()
	defer pages.Close()
	vals := make([]parquet.Value, 0, min(n, 64<<10))
	out.reset(n, 0)
	for {
		if p.stop.Load() {
			return errParquetClosed
		}
		pg, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if int64(len(out.at))+pg.NumValues() > n {
			parquet.Release(pg)
			return fmt.Errorf("more values than the row group's %d rows", n)
		}
		r := pg.Values()
		for {
			got, err := r.ReadValues(vals[:cap(vals)])
			for _, v := range vals[:got] {
				if v.IsNull() {
					out.at = append(out.at, nullSpan)
				} else {
					out.add(c, v)
				}
			}
			if out.tooLarge(p.limit) {
				parquet.Release(pg)
				return out.tooLargeError(p.name, c.Path, p.limit)
			}
			if err == io.EOF || (err == nil && got == 0) {
				break
			}
			if err != nil {
				parquet.Release(pg)
				return err
			}
		}
		parquet.Release(pg)
	}
	if int64(len(out.at)) != n {
		return fmt.Errorf("%d values for the row group's %d rows", len(out.at), n)
	}
	return nil
}

// appendText appends the key text of v (not NULL) to b.
func (c *ParquetColumn) appendText(b []byte, v parquet.Value) []byte {
	switch v.Kind() {
	case parquet.Int32:
		return c.appendInt32(b, v.Int32())
	case parquet.Int64:
		return c.appendInt64(b, v.Int64())
	}
	switch c.render {
	case renderBool:
		return strconv.AppendBool(b, v.Boolean())
	case renderFloat:
		return strconv.AppendFloat(b, float64(v.Float()), 'g', -1, 32)
	case renderDouble:
		return strconv.AppendFloat(b, v.Double(), 'g', -1, 64)
	case renderBytes:
		return append(b, v.ByteArray()...)
	case renderDecimal:
		return appendDecimal(b, twosComplement(v.ByteArray()), c.scale)
	}
	return b
}

// appendInt32 and appendInt64 are appendText of an INT32 and an INT64
// value, which chunkText calls without making a parquet.Value.
func (c *ParquetColumn) appendInt32(b []byte, x int32) []byte {
	switch c.render {
	case renderUint:
		return appendUint(b, uint64(uint32(x)))
	case renderDecimal:
		return appendDecimal(b, big.NewInt(int64(x)), c.scale)
	}
	return appendInt(b, int64(x))
}

func (c *ParquetColumn) appendInt64(b []byte, x int64) []byte {
	switch c.render {
	case renderUint:
		return appendUint(b, uint64(x))
	case renderDecimal:
		return appendDecimal(b, big.NewInt(x), c.scale)
	}
	return appendInt(b, x)
}

// twosComplement is the big-endian two's complement integer in p, as a
// DECIMAL stored in a byte array holds its unscaled value.
func twosComplement(p []byte) *big.Int {
	u := new(big.Int).SetBytes(p)
	if len(p) > 0 && p[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*len(p))))
	}
	return u
}

// appendDecimal appends unscaled / 10^scale as plain decimal text with
// scale digits after the point.
func appendDecimal(b []byte, unscaled *big.Int, scale int) []byte {
	digits := unscaled.Text(10)
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	if neg {
		b = append(b, '-')
	}
	if scale == 0 {
		return append(b, digits...)
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	b = append(b, digits[:len(digits)-scale]...)
	b = append(b, '.')
	return append(b, digits[len(digits)-scale:]...)
}

// codecSupported refuses the codecs the library does not read: LZO, and
// the Hadoop-framed LZ4 that LZ4_RAW replaced.
func codecSupported(c pformat.CompressionCodec) error {
	switch c {
	case pformat.Uncompressed, pformat.Snappy, pformat.Gzip, pformat.Zstd, pformat.Lz4Raw, pformat.Brotli:
		return nil
	}
	return fmt.Errorf("the %s codec (fpdedup reads UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4_RAW and BROTLI)", c)
}

// expander expands a compressed page into at most a given size, to prove
// it expands to that size before the library does.
type expander struct {
	zstd *zstd.Decoder
	buf  []byte
}

var errPageBomb = errors.New("it expands past its declared size")

// errParquetClosed ends a decoding ahead that Close gave up on: nothing
// reads its result.
var errParquetClosed = errors.New("the Parquet file was closed")

func (x *expander) expand(codec pformat.CompressionCodec, src []byte, size int64) ([]byte, error) {
	if cap(x.buf) < int(size) {
		x.buf = make([]byte, size)
	}
	dst := x.buf[:size]
	switch codec {
	case pformat.Snappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if int64(n) != size {
			return nil, fmt.Errorf("a snappy block of %d bytes", n)
		}
		if _, err := snappy.Decode(dst, src); err != nil {
			return nil, err
		}
	case pformat.Lz4Raw:
		n, err := lz4.UncompressBlock(src, dst)
		if err != nil {
			return nil, err
		}
		if int64(n) != size {
			return nil, fmt.Errorf("an lz4 block of %d bytes", n)
		}
	case pformat.Zstd:
		if x.zstd == nil {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true))
			if err != nil {
				return nil, err
			}
			x.zstd = d
		}
		out, err := x.zstd.DecodeAll(src, dst[:0])
		if err != nil {
			return nil, err
		}
		if int64(len(out)) != size {
			return nil, fmt.Errorf("zstd data of %d bytes", len(out))
		}
	case pformat.Gzip:
		z, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		if err := readExactly(z, dst, "gzip"); err != nil {
			return nil, err
		}
	case pformat.Brotli:
		if err := readExactly(brotli.NewReader(bytes.NewReader(src)), dst, "brotli"); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// readExactly reads a stream's expansion into dst, which it must fill and
// not pass: the stream's own framing is not trusted with a size.
func readExactly(r io.Reader, dst []byte, codec string) error {
	n, err := io.ReadFull(r, dst)
	if err != nil {
		return fmt.Errorf("%s data of %d bytes: %w", codec, n, err)
	}
	var one [1]byte
	if k, _ := r.Read(one[:]); k > 0 {
		return errPageBomb
	}
	return nil
}
