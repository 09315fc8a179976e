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
// recover catches. So each page of a key column is decoded here first as
// far as those counts go (run and block headers only, nothing allocated)
// and must hold no more values than its header declares, and the headers
// no more values than the row group has rows.

// pageHeader is what checkPages reads of a page header.
type pageHeader struct {
	typ                      int64 // 0 data, 2 dictionary, 3 data v2
	uncompressed, compressed int64
	numValues                int64
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

// checkPageData proves the decoded counts of a page of column c: levels
// is a v2 page's level bytes, values its values expanded (a v1 page's
// levels are inside values). rows is what the chunk has left of its row
// group's rows, and comes back less this page's values.
func checkPageData(c *ParquetColumn, h *pageHeader, levels, values []byte, rows *int64, limit int64) error {
	n := h.numValues
	if n < 0 {
		return fmt.Errorf("%d values", n)
	}
	if h.typ == pageDictionary {
		if per := c.minValueBits(); per > 0 && n > int64(len(values))*8/per {
			return fmt.Errorf("a dictionary of %d values in %d bytes", n, len(values))
		}
		return nil
	}
	if h.typ != pageData && h.typ != pageDataV2 {
		return nil // an index page: the library skips it
	}
	if c.maxRep == 0 {
		// One value a row, NULLs included.
		if n > *rows {
			return fmt.Errorf("%d values where the row group has %d rows left", n, *rows)
		}
		*rows -= n
	} else if n > limit/parquetValueBytes {
		return fmt.Errorf("%d values in a page", n) // a repeated column's: any number a row
	}
	defWidth := uint(bits.Len(uint(c.maxDef)))
	repWidth := uint(bits.Len(uint(c.maxRep)))
	switch {
	case h.typ == pageDataV2:
		if h.repLen < 0 || h.defLen < 0 || h.repLen+h.defLen != int64(len(levels)) {
			return fmt.Errorf("levels of %d and %d bytes", h.repLen, h.defLen)
		}
		if h.repLen != 0 && c.maxRep == 0 {
			return fmt.Errorf("%d bytes of repetition levels in a column that repeats nothing", h.repLen)
		}
		if err := hybridRuns(levels[:h.repLen], repWidth, n); err != nil {
			return fmt.Errorf("repetition levels: %w", err)
		}
		if err := hybridRuns(levels[h.repLen:], defWidth, n); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
	case c.maxRep > 0 && h.repEncoding != int64(pformat.RLE):
		return fmt.Errorf("repetition levels in encoding %d", h.repEncoding)
	case c.maxRep > 0:
		v, err := lengthPrefixed(values)
		if err != nil {
			return fmt.Errorf("repetition levels: %w", err)
		}
		if err := hybridRuns(v, repWidth, n); err != nil {
			return fmt.Errorf("repetition levels: %w", err)
		}
		values = values[4+len(v):]
		if c.maxDef > 0 {
			if v, err = lengthPrefixed(values); err != nil {
				return fmt.Errorf("definition levels: %w", err)
			}
			if err := hybridRuns(v, defWidth, n); err != nil {
				return fmt.Errorf("definition levels: %w", err)
			}
			values = values[4+len(v):]
		}
	case c.maxDef > 0 && h.defEncoding == int64(pformat.RLE):
		v, err := lengthPrefixed(values)
		if err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		if err := hybridRuns(v, defWidth, n); err != nil {
			return fmt.Errorf("definition levels: %w", err)
		}
		values = values[4+len(v):]
	case c.maxDef > 0 && h.defEncoding == int64(pformat.BitPacked):
		skip := (n*int64(defWidth) + 7) / 8
		if skip > int64(len(values)) {
			return fmt.Errorf("%d bytes of bit-packed levels in %d", skip, len(values))
		}
		values = values[skip:]
	}
	switch pformat.Encoding(h.encoding) {
	case 2, pformat.RLEDictionary: // 2: PLAIN_DICTIONARY, as older writers name it
		if len(values) == 0 {
			return nil // every value null
		}
		if values[0] > 32 {
			return fmt.Errorf("dictionary indexes of %d bits", values[0])
		}
		if err := hybridRuns(values[1:], uint(values[0]), n); err != nil {
			return fmt.Errorf("dictionary indexes: %w", err)
		}
		return nil
	case pformat.RLE:
		if len(values) == 4 {
			return nil
		}
		v, err := lengthPrefixed(values)
		if err != nil {
			return err
		}
		if err := hybridRuns(v, 1, n); err != nil {
			return fmt.Errorf("booleans: %w", err)
		}
		return nil
	case pformat.DeltaBinaryPacked, pformat.DeltaLengthByteArray:
		_, first, err := deltaBlocks(values, n)
		if err != nil {
			return err
		}
		if c.phys == pformat.Int32 && pformat.Encoding(h.encoding) == pformat.DeltaBinaryPacked {
			if first < math.MinInt32 || first > math.MaxInt32 {
				return fmt.Errorf("%w (from %d: DuckDB's v2 pages store a UINTEGER so); write the file with v1 pages (DuckDB's default)", errDeltaInt32, first)
			}
		}
		return nil
	case pformat.DeltaByteArray:
		end, _, err := deltaBlocks(values, n) // the prefix lengths
		if err != nil {
			return fmt.Errorf("prefix lengths: %w", err)
		}
		if _, _, err := deltaBlocks(values[end:], n); err != nil {
			return fmt.Errorf("suffix lengths: %w", err)
		}
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

// hybridRuns walks the runs of RLE/bit-packed hybrid data of width bits a
// value, as the library decodes it (to the end of b), and proves them
// inside b and not many more than n values. Not exactly n: DuckDB writes
// bit-packed runs of 256 values and more runs than a page's values need.
// The slack still bounds what the library allocates by the page's rows.
func hybridRuns(b []byte, width uint, n int64) error {
	var total int64
	for i := 0; i < len(b); {
		h, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return fmt.Errorf("a run header at %d does not parse", i)
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
			return fmt.Errorf("a run of %d values (%d bytes) at %d, in %d bytes for %d values", count, size, i, len(b), n)
		}
		total += int64(count)
		if total > hybridSlack(n) {
			return fmt.Errorf("runs of %d values or more for %d", total, n)
		}
		i += int(size)
	}
	return nil
}

func hybridSlack(n int64) int64 { return 2*n + 4096 }

// errDeltaInt32 is an INT32 column's DELTA_BINARY_PACKED page whose
// first value lies outside INT32, which the library refuses ("first value
// out of range") where the writer meant the 32 bits as unsigned.
var errDeltaInt32 = errors.New("DELTA_BINARY_PACKED INT32 values outside INT32")

// deltaBlocks walks DELTA_BINARY_PACKED data: a header whose value count
// must be at most n, then blocks of miniblocks whose widths must keep them
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
	case total > uint64(n):
		return 0, 0, fmt.Errorf("%d values in a page of %d", total, n)
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
