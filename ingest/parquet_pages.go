package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	pformat "github.com/parquet-go/parquet-go/format"
)

// The library decodes a page's levels, dictionary indexes and delta
// blocks into buffers sized by the counts written inside the page, not by
// the header's value count: two flipped bytes in a dictionary index run
// made it allocate 7.5 GB, one cut made it 45 GB, a fatal out-of-memory no
// recover catches. So each page of a column is decoded here first as far
// as those counts go (run and block headers, levels, nothing allocated)
// and must hold the values its header declares, and a chunk's pages
// exactly the rows of its row group, before anything reads its values:
// the key pass of every command, and the copy of a row group's every
// column (checkGroup).

// pageHeader is what checkPages reads of a page header.
type pageHeader struct {
	typ                      int64 // 0 data, 2 dictionary, 3 data v2
	uncompressed, compressed int64
	numValues                int64
	numNulls, numRows        int64 // a v2 data page's
	encoding                 int64
	defEncoding, repEncoding int64 // a v1 data page's
	defLen, repLen           int64 // a v2 data page's level bytes
	compressedData           bool  // a v2 data page may say its values are not
	crc                      int64
	hasCRC                   bool
}

const (
	pageData       = 0
	pageDictionary = 2
	pageDataV2     = 3
)

// field records field id of the struct nested at outer (0: the header
// itself; 5 DataPageHeader, 7 DictionaryPageHeader, 8 DataPageHeaderV2).
func (h *pageHeader) field(outer, id int16, v int64) {
	switch [2]int16{outer, id} {
	case [2]int16{8, 7}:
		h.compressedData = v != 0
		return
	case [2]int16{0, 4}:
		h.crc, h.hasCRC = v, true
		return
	}
	if p := h.slot(outer, id); p != nil {
		*p = v
	}
}

// slot is where field id of the struct at outer goes, nil for a field not
// read.
func (h *pageHeader) slot(outer, id int16) *int64 {
	switch [2]int16{outer, id} {
	case [2]int16{0, 1}:
		return &h.typ
	case [2]int16{0, 2}:
		return &h.uncompressed
	case [2]int16{0, 3}:
		return &h.compressed
	case [2]int16{5, 1}, [2]int16{7, 1}, [2]int16{8, 1}:
		return &h.numValues
	case [2]int16{5, 2}, [2]int16{7, 2}, [2]int16{8, 4}:
		return &h.encoding
	case [2]int16{5, 3}:
		return &h.defEncoding
	case [2]int16{5, 4}:
		return &h.repEncoding
	case [2]int16{8, 2}:
		return &h.numNulls
	case [2]int16{8, 3}:
		return &h.numRows
	case [2]int16{8, 5}:
		return &h.defLen
	case [2]int16{8, 6}:
		return &h.repLen
	}
	return nil
}

// levels is the bytes of a v2 page's levels, stored before its values
// and never compressed.
func (h *pageHeader) levels() int64 {
	if h.typ != pageDataV2 {
		return 0
	}
	return max(h.defLen, 0) + max(h.repLen, 0)
}

// pageCounts is what the pages of one column chunk have said so far,
// against its row group (checkPageData): every command that reads a
// chunk, for its keys or to copy its rows, checks its pages with it.
type pageCounts struct {
	rows  int64 // the row group's rows no data page has held yet
	dict  int64 // the dictionary's entries, -1 before the dictionary page
	pages int   // the data pages so far
}

func newPageCounts(rows int64) pageCounts { return pageCounts{rows: rows, dict: -1} }

// end is an error unless the chunk's data pages held exactly its row
// group's rows: a page that says one value less than it holds leaves a
// row out of every column read after it, and a copy would write a file
// whose columns disagree.
func (pc *pageCounts) end(rows int64) error {
	if pc.rows != 0 {
		return fmt.Errorf("its pages hold %d rows, its row group %d", rows-pc.rows, rows)
	}
	return nil
}

// checkPageData proves the decoded counts of a page of column c: levels
// is a v2 page's level bytes, values its values expanded (a v1 page's
// levels are inside values). A data page's levels must give its header's
// value count, its present values (those at the top definition level)
// must be what its values hold, exactly where their size is fixed, and
// its rows (its values, or its repetition levels that start a row) what
// pc says the row group has left; pc comes back less them.
func checkPageData(c *ParquetColumn, h *pageHeader, levels, values []byte, pc *pageCounts, limit int64) error {
	n := h.numValues
	if n < 0 {
		return fmt.Errorf("%d values", n)
	}
	if h.typ == pageDictionary {
		switch {
		case pc.dict >= 0:
			return fmt.Errorf("a second dictionary page")
		case pc.pages > 0:
			return fmt.Errorf("a dictionary page after data pages")
		}
		if h.encoding == int64(pformat.Plain) || h.encoding == 2 {
			if err := plainValues(c, values, n); err != nil {
				return fmt.Errorf("the dictionary: %w", err)
			}
		}
		pc.dict = n
		return nil
	}
	if h.typ != pageData && h.typ != pageDataV2 {
		return nil // an index page: the library skips it
	}
	pc.pages++
	switch {
	case c.maxRep > 0 && n > limit/parquetValueBytes:
		return fmt.Errorf("%d values in a page", n) // a repeated column's: any number a row
	case c.maxRep == 0 && n > pc.rows:
		return fmt.Errorf("%d values where the row group has %d rows left", n, pc.rows)
	}
	defWidth := uint(bits.Len(uint(c.maxDef)))
	repWidth := uint(bits.Len(uint(c.maxRep)))
	// The levels' runs, and the values after them.
	var reps, defs []byte
	legacyDefs := false // BIT_PACKED definition levels, not counted
	switch {
	case h.typ == pageDataV2:
		if h.repLen < 0 || h.defLen < 0 || h.repLen+h.defLen != int64(len(levels)) {
			return fmt.Errorf("levels of %d and %d bytes", h.repLen, h.defLen)
		}
		if h.repLen != 0 && c.maxRep == 0 {
			return fmt.Errorf("%d bytes of repetition levels in a column that repeats nothing", h.repLen)
		}
		if h.defLen != 0 && c.maxDef == 0 {
			return fmt.Errorf("%d bytes of definition levels in a column that is never null (the schema says REQUIRED)", h.defLen)
		}
		reps, defs = levels[:h.repLen], levels[h.repLen:]
	default:
		if c.maxRep > 0 {
			if h.repEncoding != int64(pformat.RLE) {
				return fmt.Errorf("repetition levels in encoding %s", encodingName(h.repEncoding))
			}
			v, err := lengthPrefixed(values)
			if err != nil {
				return fmt.Errorf("repetition levels: %w", err)
			}
			reps, values = v, values[4+len(v):]
		}
		switch {
		case c.maxDef == 0:
		case h.defEncoding == int64(pformat.RLE):
			v, err := lengthPrefixed(values)
			if err != nil {
				return fmt.Errorf("definition levels: %w", err)
			}
			defs, values = v, values[4+len(v):]
		case h.defEncoding == int64(pformat.BitPacked):
			skip := (n*int64(defWidth) + 7) / 8
			if skip > int64(len(values)) {
				return fmt.Errorf("%d bytes of bit-packed levels in %d", skip, len(values))
			}
			values, legacyDefs = values[skip:], true
		default:
			return fmt.Errorf("definition levels in encoding %s", encodingName(h.defEncoding))
		}
	}
	rows, present := n, n
	if c.maxRep > 0 {
		r, err := hybridScan(reps, repWidth, n, uint64(c.maxRep))
		if err != nil {
			return fmt.Errorf("repetition levels: %w", err)
		}
		if pc.pages == 1 && n > 0 && r.first != 0 {
			return fmt.Errorf("the column chunk starts inside a row (repetition level %d)", r.first)
		}
		rows = r.zeros
	} else if h.typ == pageDataV2 && h.repLen != 0 {
		return fmt.Errorf("repetition levels in a column that repeats nothing")
	}
	if c.maxDef > 0 && !legacyDefs {
		d, err := hybridScan(defs, defWidth, n, uint64(c.maxDef))
		if err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		present = d.top
	}
	if rows > pc.rows {
		return fmt.Errorf("%d rows where the row group has %d rows left", rows, pc.rows)
	}
	pc.rows -= rows
	if h.typ == pageDataV2 {
		switch {
		case h.numRows != rows:
			return fmt.Errorf("its header says %d rows, its levels %d", h.numRows, rows)
		case !legacyDefs && h.numNulls != n-present:
			return fmt.Errorf("its header says %d nulls, its levels %d", h.numNulls, n-present)
		}
	}
	if legacyDefs {
		return nil // the present values are not counted
	}
	switch enc := pformat.Encoding(h.encoding); enc {
	case pformat.Plain:
		return plainValues(c, values, present)
	case 2, pformat.RLEDictionary: // 2: PLAIN_DICTIONARY, as older writers name it
		if present == 0 {
			return nil // every value null: no indexes, or a width alone
		}
		switch {
		case pc.dict < 0:
			return fmt.Errorf("dictionary indexes without a dictionary")
		case len(values) == 0:
			return fmt.Errorf("no dictionary indexes for %d values", present)
		case values[0] > 32:
			return fmt.Errorf("dictionary indexes of %d bits", values[0])
		}
		x, err := hybridScan(values[1:], uint(values[0]), present, math.MaxUint32)
		if err != nil {
			return fmt.Errorf("dictionary indexes: %w", err)
		}
		if int64(x.max) >= pc.dict {
			return fmt.Errorf("dictionary index %d in a dictionary of %d", x.max, pc.dict)
		}
		return nil
	case pformat.RLE:
		if present == 0 {
			return nil
		}
		v, err := lengthPrefixed(values)
		if err != nil {
			return err
		}
		if _, err := hybridScan(v, 1, present, 1); err != nil {
			return fmt.Errorf("booleans: %w", err)
		}
		return nil
	case pformat.DeltaBinaryPacked, pformat.DeltaLengthByteArray:
		_, first, err := deltaBlocks(values, present)
		if err != nil {
			return err
		}
		if c.phys == pformat.Int32 && enc == pformat.DeltaBinaryPacked {
			if first < math.MinInt32 || first > math.MaxInt32 {
				return fmt.Errorf("%w (from %d: DuckDB's v2 pages store a UINTEGER so); write the file with v1 pages (DuckDB's default)", errDeltaInt32, first)
			}
		}
		return nil
	case pformat.DeltaByteArray:
		end, _, err := deltaBlocks(values, present) // the prefix lengths
		if err != nil {
			return fmt.Errorf("prefix lengths: %w", err)
		}
		if _, _, err := deltaBlocks(values[end:], present); err != nil {
			return fmt.Errorf("suffix lengths: %w", err)
		}
	case pformat.ByteStreamSplit:
		if per := c.minValueBits(); c.phys != pformat.ByteArray && per%8 == 0 && int64(len(values)) != present*(per/8) {
			return fmt.Errorf("%d values of %d bytes in %d bytes", present, per/8, len(values))
		}
	}
	return nil
}

// plainValues proves that b holds exactly n PLAIN values of c's type: a
// fixed size times n, or n lengths each followed by its bytes. A column
// whose footer says INT32 where its pages hold INT64, or REQUIRED where
// they hold levels, fails here instead of keying on their bytes.
func plainValues(c *ParquetColumn, b []byte, n int64) error {
	if c.phys == pformat.ByteArray {
		at := 0
		for i := range n {
			if len(b)-at < 4 {
				return fmt.Errorf("value %d of %d: no length, %d bytes left", i+1, n, len(b)-at)
			}
			l := binary.LittleEndian.Uint32(b[at:])
			at += 4
			if uint64(l) > uint64(len(b)-at) {
				return fmt.Errorf("value %d of %d: a length of %d in %d bytes", i+1, n, l, len(b)-at)
			}
			at += int(l)
		}
		if at != len(b) {
			return fmt.Errorf("%d byte arrays in %d bytes of %d", n, at, len(b))
		}
		return nil
	}
	per := c.minValueBits()
	if per == 0 {
		return nil // a type never written: the library says
	}
	if n > math.MaxInt64/per {
		return fmt.Errorf("%d values", n)
	}
	if need := (n*per + 7) / 8; need != int64(len(b)) {
		return fmt.Errorf("%d %s values take %d bytes, the page has %d", n, c.phys, need, len(b))
	}
	return nil
}

// minValueBits is the fewest bits a PLAIN value of c's type takes.
func (c *ParquetColumn) minValueBits() int64 {
	switch c.phys {
	case pformat.Boolean:
		return 1
	case pformat.Int32, pformat.Float, pformat.ByteArray: // a byte array's length
		return 32
	case pformat.Int64, pformat.Double:
		return 64
	case pformat.Int96:
		return 96
	case pformat.FixedLenByteArray:
		return 8 * max(int64(c.typeLength), 1)
	}
	return 0
}

// lengthPrefixed is the bytes a 4-byte little-endian length says follow it.
func lengthPrefixed(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%d bytes, no length", len(b))
	}
	l := binary.LittleEndian.Uint32(b)
	if uint64(l) > uint64(len(b)-4) {
		return nil, fmt.Errorf("a length of %d in %d bytes", l, len(b)-4)
	}
	return b[4 : 4+l], nil
}

// runTally is what hybridScan counts of the first n values of RLE /
// bit-packed hybrid data.
type runTally struct {
	first      uint64 // the first value
	zeros, top int64  // how many are 0, and how many are the largest a level may be
	max        uint64 // the largest
}

// hybridScan walks the runs of RLE/bit-packed hybrid data of width bits a
// value, as the library decodes it (to the end of b): they must lie inside
// b, hold at least n values and not many more (DuckDB writes bit-packed
// runs of 256 values and more runs than a page's values need: the slack
// still bounds what the library allocates by the page's rows). Of the
// first n values it tallies the zeros (a repetition level's row starts)
// and those at top (a definition level's present values), and none may
// exceed top.
func hybridScan(b []byte, width uint, n int64, top uint64) (runTally, error) {
	var t runTally
	if width > 32 {
		return t, fmt.Errorf("values of %d bits", width)
	}
	var total int64
	tally := func(v uint64, k int64) error {
		if k <= 0 {
			return nil
		}
		if v > top {
			return fmt.Errorf("a value of %d where the most is %d", v, top)
		}
		if total == 0 {
			t.first = v
		}
		switch v {
		case 0:
			t.zeros += k
		case top:
			t.top += k
		}
		t.max = max(t.max, v)
		return nil
	}
	for i := 0; i < len(b); {
		h, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return t, fmt.Errorf("a run header at %d does not parse", i)
		}
		i += k
		count := h >> 1
		var size uint64
		if h&1 != 0 { // count groups of 8 values
			size = count * uint64(width)
			count *= 8
		} else if count > 0 {
			size = uint64(width+7) / 8
		}
		if count > uint64(hybridSlack(n)) || size > uint64(len(b)-i) {
			return t, fmt.Errorf("a run of %d values (%d bytes) at %d, in %d bytes for %d values", count, size, i, len(b), n)
		}
		// The values of the run among the first n.
		use := int64(min(count, uint64(max(n-total, 0))))
		if h&1 == 0 {
			var v uint64
			for j := range size {
				v |= uint64(b[i+int(j)]) << (8 * j)
			}
			if err := tally(v, use); err != nil {
				return t, err
			}
			total += use
		} else if width == 0 {
			if err := tally(0, use); err != nil {
				return t, err
			}
			total += use
		} else {
			packed, mask := b[i:i+int(size)], uint64(1)<<width-1
			for j := range use {
				bit := uint64(j) * uint64(width)
				var w uint64
				for at, sh := bit/8, uint(0); at < uint64(len(packed)) && sh < uint(bit%8)+width; at, sh = at+1, sh+8 {
					w |= uint64(packed[at]) << sh
				}
				if err := tally(w>>(bit%8)&mask, 1); err != nil {
					return t, err
				}
				total++
			}
		}
		total += int64(count) - use
		if total > hybridSlack(n) {
			return t, fmt.Errorf("runs of %d values or more for %d", total, n)
		}
		i += int(size)
	}
	if total < n {
		return t, fmt.Errorf("runs of %d values for %d", total, n)
	}
	return t, nil
}

func hybridSlack(n int64) int64 { return 2*n + 4096 }

// errDeltaInt32 is an INT32 column's DELTA_BINARY_PACKED page whose
// first value lies outside INT32, which the library refuses ("first value
// out of range") where the writer meant the 32 bits as unsigned.
var errDeltaInt32 = errors.New("DELTA_BINARY_PACKED INT32 values outside INT32")

// deltaBlocks walks DELTA_BINARY_PACKED data: a header whose value count
// must be n, then blocks of miniblocks whose widths must keep them
// inside b. It returns where the data ends and the header's first value.
func deltaBlocks(b []byte, n int64) (int, int64, error) {
	i := 0
	next := func(what string) (uint64, error) {
		v, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return 0, fmt.Errorf("the %s does not parse", what)
		}
		i += k
		return v, nil
	}
	blockSize, err := next("block size")
	if err != nil {
		return 0, 0, err
	}
	miniBlocks, err := next("miniblock count")
	if err != nil {
		return 0, 0, err
	}
	total, err := next("value count")
	if err != nil {
		return 0, 0, err
	}
	zigzag, err := next("first value")
	if err != nil {
		return 0, 0, err
	}
	first := int64(zigzag>>1) ^ -int64(zigzag&1)
	switch {
	case total != uint64(n):
		return 0, 0, fmt.Errorf("%d values where the page has %d", total, n)
	case blockSize == 0 || blockSize%128 != 0 || blockSize > 1<<20 || miniBlocks == 0 || blockSize%miniBlocks != 0 || (blockSize/miniBlocks)%32 != 0:
		return 0, 0, fmt.Errorf("blocks of %d values in %d miniblocks", blockSize, miniBlocks)
	}
	perMini := blockSize / miniBlocks
	// The first value is in the header; the rest are deltas in blocks.
	// The last block keeps every miniblock's width byte but only the
	// miniblocks its deltas need.
	left := uint64(0)
	if total > 0 {
		left = total - 1
	}
	for left > 0 {
		if _, err := next("block's minimum delta"); err != nil {
			return 0, 0, err
		}
		if uint64(len(b)-i) < miniBlocks {
			return 0, 0, fmt.Errorf("a block's widths past the end")
		}
		widths := b[i : i+int(miniBlocks)]
		i += int(miniBlocks)
		for _, w := range widths {
			if left == 0 {
				break
			}
			if w > 64 {
				return 0, 0, fmt.Errorf("a miniblock of %d-bit values", w)
			}
			size := perMini * uint64(w) / 8
			if size > uint64(len(b)-i) {
				return 0, 0, fmt.Errorf("a miniblock of %d bytes past the end", size)
			}
			i += int(size)
			left -= min(left, perMini)
		}
	}
	return i, first, nil
}
