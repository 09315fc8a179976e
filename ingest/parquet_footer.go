package ingest

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"

	"github.com/fpdedup/fpdedup/internal/thriftscan"
	"github.com/fpdedup/fpdedup/internal/units"
)

// A Parquet file's memory is counted before it is spent: its footer
// parsed, the buffers a copy holds for each of its columns, a row group's
// key values and a page are each known from the footer's bytes and counts
// and refused, naming what they need, when they would pass the reader's
// limit (ParquetMemError).

// ParquetMemError is a Parquet input that needs more memory than the
// reader's limit allows: What takes Need bytes (at least, when AtLeast:
// a footer larger than the limit is not read to be counted) where Limit
// are allowed. Remedy is what else than more memory would do, if
// anything. It is an ErrParquetTooLarge.
type ParquetMemError struct {
	Name    string
	Column  string // the column, when one is at fault
	What    string
	Need    int64
	AtLeast bool
	Limit   int64
	Remedy  string
}

func (e *ParquetMemError) Error() string {
	col, least := "", ""
	if e.Column != "" {
		col = "column " + e.Column + ": "
	}
	if e.AtLeast {
		least = "at least "
	}
	return fmt.Sprintf("%s: %s%v: %s takes %s%s, %s allowed", e.Name, col, ErrParquetTooLarge, e.What, least, units.FormatBytes(e.Need), units.FormatBytes(e.Limit))
}

func (e *ParquetMemError) Unwrap() error { return ErrParquetTooLarge }

// What the library's parse of a footer holds, per element of its lists:
// measured as the heap a parse added (DuckDB's and parquet-go's files: a
// column chunk with its statistics and the library's own object for it
// ~735 bytes, a schema element ~715, beside twice the footer's bytes for
// its strings), rounded up.
const (
	footerChunkBytes   = 768  // a row group's column chunk: lists at [4 1]
	footerElementBytes = 1024 // a schema element: the list at [2]
	footerGroupBytes   = 256  // a row group: the list at [4]
	footerOtherBytes   = 16   // any other list's element (encodings, paths, key-value pairs)
)

// footerShape is what the walk of a footer found: its encoded length, the
// memory its parse will take, and its schema's elements (leaves and
// groups).
type footerShape struct {
	length   int
	bytes    int
	cost     int64
	elements int64
	groups   int64
}

// scanFooter walks a footer's bytes (thriftscan) and counts what parsing
// it will allocate: a footer of 1-byte empty column chunks, each 560 bytes
// parsed, costs what it will take, not what it weighs.
func scanFooter(fb []byte) (footerShape, error) {
	var chunks, other int64
	f := footerShape{bytes: len(fb), cost: 2 * int64(len(fb))}
	n, err := thriftscan.Lists(fb, func(path []int16, k uint64) {
		switch {
		case len(path) == 1 && path[0] == 2:
			f.elements += int64(k)
		case len(path) == 1 && path[0] == 4:
			f.groups += int64(k)
		case len(path) == 2 && path[0] == 4 && path[1] == 1:
			chunks += int64(k)
		default:
			other += int64(k)
		}
	})
	f.length = n
	f.cost += chunks*footerChunkBytes + f.elements*footerElementBytes + f.groups*footerGroupBytes + other*footerOtherBytes
	return f, err
}

// readBufferSize is the buffer the library reads each column's pages
// through while a row group is copied (4 KiB by default), smaller for a
// wide schema: an eighth of the file's share of the limit a column, at
// least 1 KiB. 20,000 columns read through 4 KiB each took 80 MB more.
func readBufferSize(limit, elements int64) int {
	return int(min(max(limit/16/max(elements, 1), 1<<10), 4<<10))
}

// parquetCopyColumnBytes is what a copy of a row group holds for each leaf
// column whatever its rows: the library's page reader and decoder, its
// column writer and buffers (pools of 4 KiB and more). Measured by peak
// RSS of dedup -o out.parquet on parquet-go files of 5,000 to 20,000
// columns of 200 rows: 43-47 KiB a column for one row group, 72 KiB with
// two in flight.
const parquetCopyColumnBytes = 48 << 10

// OpenParquetRows is OpenParquet of a file whose rows will be copied
// (dedup's output, a backfill, a quarantine): what the copy holds for its
// columns is counted with its footer, before either is allocated.
func OpenParquetRows(name string, r io.ReaderAt, size, limit int64) (*ParquetFile, error) {
	return openParquet(name, r, size, limit, true)
}

// copyCost is what a copy of the rows of a file of cols leaf columns and
// groups row groups holds beside its footer: the buffers of its columns
// for the row groups in flight (two at most, RowWriter.Write) and the
// values of a batch of rows (copyBatch).
func copyCost(cols, groups int64) int64 {
	return min(groups, 2) * cols * (parquetCopyColumnBytes + copyBatch(cols)*parquetValueBytes)
}

// check refuses a footer whose parse, and with rows the copy of its rows,
// would pass the limit, naming what it needs. Its schema's elements less
// the root bound its leaves.
func (f footerShape) check(name string, limit int64, rows bool) error {
	need, what := f.cost, fmt.Sprintf("a footer of %d bytes, parsed,", f.bytes)
	if rows {
		cols := max(f.elements-1, 0)
		need += copyCost(cols, f.groups)
		what = fmt.Sprintf("copying the rows of %d columns (their buffers, and a footer of %d bytes parsed)", cols, f.bytes)
	}
	if need > limit {
		e := &ParquetMemError{Name: name, What: what, Need: need, Limit: limit}
		switch {
		case f.groups > 1 && f.cost > need/2:
			e.Remedy = "or write the file in fewer row groups"
		case rows:
			e.Remedy = "or write its rows as fewer columns"
		}
		return e
	}
	return nil
}

// checkCopyCost refuses, before any row is copied, a copy of p whose
// footer and column buffers would pass the limit (as OpenParquetRows
// does from the footer's bytes, for a reader opened otherwise).
func (p *ParquetFile) checkCopyCost() error {
	if need := p.footerCost + copyCost(int64(len(p.columns)), int64(p.RowGroups())); need > p.limit {
		return &ParquetMemError{Name: p.name, Need: need, Limit: p.limit,
			What:   fmt.Sprintf("copying the rows of %d columns (their buffers, and its footer parsed)", len(p.columns)),
			Remedy: "or write its rows as fewer columns"}
	}
	return nil
}

// rowGroupStarts is the first row of each row group, 1-based in the file:
// computed once, as summing the groups before each one for each took 148 s
// for 100,000 one-row groups. Row groups that do not sum to the rows the
// footer declares, or say fewer than none, are damage.
func rowGroupStarts(f *parquet.File) ([]int64, error) {
	rgs := f.RowGroups()
	starts := make([]int64, len(rgs))
	next := int64(1)
	for g, rg := range rgs {
		n := rg.NumRows()
		if n < 0 || n > math.MaxInt64/2-next {
			return nil, fmt.Errorf("row group %d has %d rows", g, n)
		}
		starts[g] = next
		next += n
	}
	if next-1 != f.NumRows() {
		return nil, fmt.Errorf("the footer says %d rows, its row groups hold %d", f.NumRows(), next-1)
	}
	return starts, nil
}

// ParquetRows is the rows the footer of the Parquet file r of size bytes
// declares, read from its bytes without parsing it: a job sizes its tables
// from it before reading the file.
func ParquetRows(r io.ReaderAt, size, limit int64) (int64, error) {
	var tail [8]byte
	if size < 12 {
		return 0, ErrNotParquet
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return 0, err
	}
	footer := int64(binary.LittleEndian.Uint32(tail[:4]))
	if string(tail[4:]) != "PAR1" || footer < 1 || footer > size-12 || footer > limit {
		return 0, ErrNotParquet
	}
	fb := make([]byte, footer)
	if _, err := r.ReadAt(fb, size-8-footer); err != nil {
		return 0, err
	}
	rows, found := int64(0), false
	if _, err := thriftscan.Struct(fb, func(outer, id int16, v int64) {
		if outer == 0 && id == 3 {
			rows, found = v, true
		}
	}); err != nil || !found {
		return 0, ErrParquetDamaged
	}
	return rows, nil
}
