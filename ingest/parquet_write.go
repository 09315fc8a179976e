package ingest

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	pzstd "github.com/parquet-go/parquet-go/compress/zstd"
	pformat "github.com/parquet-go/parquet-go/format"
)

// RowWriter writes rows of Parquet inputs, unchanged and in the order
// given: the output of a Parquet input's dedup, or a backfill. As Parquet
// (RowsParquet, RowsAsRead), it is one file with the first input's schema,
// key-value metadata and codec; each input row group that gives rows
// becomes one output row group, written as its last rows are decided, so
// memory holds two row groups' pages at most (Write), never the file. As
// text (RowsCSV, RowsTSV, RowsJSONL: textRows), each row is a line. Inputs
// whose schema differs from the first's are an error naming both and the
// first column that differs. A run that fails before Close calls Abort.
type RowWriter struct {
	out    io.Writer
	format RowFormat
	w      *parquet.GenericWriter[any] // Parquet
	text   *textRows                   // text
	// first is the first input: the schema, metadata and codec, set by
	// Schema (which the reader calls as it opens each file) or by the
	// first rows written.
	mu    sync.Mutex
	first *ParquetFile

	// The row group being copied: as text, read and written here (cur);
	// as Parquet, by its own goroutine (copying), after which it is
	// committed in order (see Write).
	cur     *groupRows
	copying *groupCopy
	wrote   int64          // rows written
	groups  []int64        // the rows of each row group committed to the output
	free    []*pageScratch // the scratch of row groups done with
	aborted bool
	err     error // the first failure: the output is not written after it
}

// NewRowWriter writes to out as format says.
func NewRowWriter(out io.Writer, format RowFormat) *RowWriter {
	return &RowWriter{out: out, format: format}
}

// Schema tells the writer of an input, in input order, before its rows
// come: the first one's schema is the output's; another schema is an
// error, and so is an input whose copy would hold more than its limit
// (checkCopyCost). It may be called from another goroutine than the writes.
func (pw *RowWriter) Schema(p *ParquetFile) error {
	if err := p.checkCopyCost(); err != nil {
		return err
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.first == nil {
		pw.first = p
		if pw.format.text() {
			// Refused before a row is read: a column text cannot hold.
			return textColumns(pw.format, p)
		}
		return nil
	}
	return sameSchema(pw.first, p)
}

// same reports whether two columns hold the same values the same way.
func (c *ParquetColumn) same(d *ParquetColumn) bool {
	// A type length means something for FIXED_LEN_BYTE_ARRAY only
	// (parquet-go writes one on every column).
	if c.phys == pformat.FixedLenByteArray && c.typeLength != d.typeLength {
		return false
	}
	return c.Path == d.Path && c.phys == d.phys && c.render == d.render &&
		c.scale == d.scale && c.maxDef == d.maxDef && c.maxRep == d.maxRep
}

// The ZSTD codec the library hands every writer (the columns of a file
// read with it name it) writes at klauspost/compress's fastest level, not
// its default: compressing the output is the largest share of a Parquet
// dedup's CPU, and at the library's page sizes the fastest level writes
// files no larger (measured in commit e87d763).
func init() { parquet.Zstd.Level = pzstd.SpeedFastest }

// start makes the writer from the first input.
func (pw *RowWriter) start(p *ParquetFile) error {
	pw.mu.Lock()
	if pw.first == nil {
		pw.first = p
	}
	first := pw.first
	pw.mu.Unlock()
	if pw.format.text() {
		t, err := newTextRows(pw.out, pw.format, first)
		pw.text = t
		return err
	}
	md := first.file.Metadata()
	opts := []parquet.WriterOption{writableSchema(first.file.Schema())}
	// The library buffers each column's pages of a row group until it is
	// committed, in chunks of 32 KiB a column, and flushes a page at 256
	// KiB: 20,000 columns took 640 MiB a row group before a byte of data.
	// A wide schema gets chunks and pages that fit the limit.
	chunk, page := first.copyBuffers()
	opts = append(opts, parquet.ColumnPageBuffers(parquet.NewChunkBufferPool(int(chunk))), parquet.PageBufferSize(int(page)))
	for _, kv := range md.KeyValueMetadata {
		opts = append(opts, parquet.KeyValueMetadata(kv.Key, kv.Value))
	}
	// The first column's codec for all: parquet-go takes one a writer.
	if len(md.RowGroups) > 0 && len(md.RowGroups[0].Columns) > 0 {
		if c := md.RowGroups[0].Columns[0].MetaData.Codec; c != pformat.Uncompressed {
			opts = append(opts, parquet.Compression(parquet.LookupCompressionCodec(c)))
		}
	}
	pw.w = parquet.NewGenericWriter[any](pw.out, opts...)
	return nil
}

// Write writes the rows of p numbered rows (1-based in the file, as
// Chunk.FirstRecord numbers them), all in row group g, ascending; rows
// after earlier calls' rows of the same group.
//
// As Parquet, a row group is copied by a goroutine of its own, into a row
// group of the output that is committed when the group after the next one
// starts (or at Commit and Close), once its copy is done: decoding and
// encoding (zstd, most of a copy's time) overlap with deciding the next
// row group's rows and with its copy. Two row groups' pages are held at
// most. A failure of the copy is returned by a later Write, Commit or
// Close, and every call after a failure returns it.
func (pw *RowWriter) Write(p *ParquetFile, g int, rows []int64) (err error) {
	if pw.err != nil {
		return pw.err
	}
	defer pw.stick(&err)
	defer recoverParquet(p.name, &err)
	if !pw.started() {
		if err := pw.start(p); err != nil {
			return err
		}
	}
	if len(rows) == 0 {
		return nil
	}
	if pw.text != nil {
		if pw.cur == nil || pw.cur.p != p || pw.cur.g != g {
			if err := pw.endText(); err != nil {
				return err
			}
			if pw.cur, err = pw.openGroup(p, g); err != nil {
				return err
			}
		}
		n := int64(len(rows))
		if err := pw.cur.take(rows, func(kept []parquet.Row, nums []int64) error {
			return pw.text.write(p, g, kept, nums)
		}); err != nil {
			return err
		}
		pw.wrote += n
		return nil
	}
	c := pw.copying
	if c == nil || c.p != p || c.g != g {
		if err := pw.endCopy(); err != nil {
			return err
		}
		c = pw.startCopy(p, g)
	}
	if rows[0] <= c.asked {
		return fmt.Errorf("%s: row %d is not ahead in row group %d", p.name, rows[0], g)
	}
	c.asked = rows[len(rows)-1]
	select {
	case c.jobs <- slices.Clone(rows):
		pw.wrote += int64(len(rows))
		c.rows += int64(len(rows))
		return nil
	case err := <-c.done: // it failed (its rows are not all here yet), and reads no more
		c.done <- err
		return err
	}
}

// groupRows reads the rows of row group g of p in order, every one (the
// library's seek reads a column's pages again from the group's start),
// in batches, and hands on those asked for.
type groupRows struct {
	p          *ParquetFile
	g          int
	rows       parquet.Rows
	base       int64 // the group's first row, 1-based in the file
	total      int64
	next       int64 // the row of the group rows reads next
	buf, kept  []parquet.Row
	scratch    *pageScratch
	returnedTo *RowWriter
}

// openGroup checks every page of row group g of p (checkGroup) before
// its rows are decoded, and starts reading them.
func (pw *RowWriter) openGroup(p *ParquetFile, g int) (*groupRows, error) {
	pw.mu.Lock()
	sc := &pageScratch{}
	if n := len(pw.free); n > 0 {
		sc, pw.free = pw.free[n-1], pw.free[:n-1]
	}
	pw.mu.Unlock()
	gr := &groupRows{p: p, g: g, scratch: sc, returnedTo: pw, base: p.groupStart(g), total: p.file.RowGroups()[g].NumRows()}
	if err := p.checkGroup(g, sc); err != nil {
		gr.close()
		return nil, err
	}
	gr.rows = p.file.RowGroups()[g].Rows()
	return gr, nil
}

// take hands fn the rows numbered rows, ascending and ahead of those
// taken before, a batch at a time, with their numbers.
func (gr *groupRows) take(rows []int64, fn func(kept []parquet.Row, nums []int64) error) error {
	for len(rows) > 0 {
		at := rows[0] - gr.base
		if at < gr.next || at >= gr.total || rows[len(rows)-1]-gr.base >= gr.total {
			return fmt.Errorf("%s: row %d is not ahead in row group %d", gr.p.name, rows[0], gr.g)
		}
		// Read rows [next, last): up to the last row asked for, which a
		// later call must find still ahead.
		batch := gr.p.copyBatch()
		last := min(gr.next+batch, rows[len(rows)-1]-gr.base+1, gr.total)
		if int64(cap(gr.buf)) < batch {
			gr.buf = make([]parquet.Row, batch)
		}
		buf := gr.buf[:last-gr.next]
		got, err := gr.rows.ReadRows(buf)
		if int64(got) < last-gr.next {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%d rows where the footer says %d", gr.next+int64(got), gr.total)
			}
			return &ParquetError{Name: gr.p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d: %v", gr.g, err)}
		}
		kept, nums := gr.kept[:0], rows
		for len(rows) > 0 && rows[0]-gr.base < last {
			kept = append(kept, buf[rows[0]-gr.base-gr.next])
			rows = rows[1:]
		}
		gr.kept = kept
		if err := fn(kept, nums); err != nil {
			return err
		}
		gr.next = last
	}
	return nil
}

// close gives the scratch back for the next row group.
func (gr *groupRows) close() {
	if gr.rows != nil {
		gr.rows.Close()
		gr.rows = nil
	}
	pw := gr.returnedTo
	pw.mu.Lock()
	pw.free = append(pw.free, gr.scratch)
	pw.mu.Unlock()
}

// parquetCopyBatch is how many rows a copy reads at once, at most.
const parquetCopyBatch = 1024

// copyBuffers is the size of the chunks in which an output of p's schema
// buffers each column's pages, and the size at which it flushes a page:
// the library's (32 KiB and 256 KiB) unless their sum over p's columns
// would pass an eighth of the limit, down to 1 KiB and 4 KiB.
func (p *ParquetFile) copyBuffers() (chunk, page int64) {
	per := p.limit / 8 / int64(max(len(p.columns), 1))
	return min(max(per, 1<<10), 32<<10), min(max(per*4, 4<<10), 256<<10)
}

// copyBatch is how many rows a copy of p reads at once: fewer than
// parquetCopyBatch when their values (a value of parquetValueBytes a leaf
// column at least) would take more than 4 MiB. A batch of 1024 rows of
// 20,000 columns held 470 MiB.
func (p *ParquetFile) copyBatch() int64 { return copyBatch(int64(len(p.columns))) }

func copyBatch(cols int64) int64 {
	return max(1, min(parquetCopyBatch, 4<<20/(parquetValueBytes*max(cols, 1))))
}

// groupCopy is a row group being copied by its own goroutine.
type groupCopy struct {
	p     *ParquetFile
	g     int
	asked int64        // the last row asked for
	jobs  chan []int64 // the rows to copy, closed when the group ends
	done  chan error   // the copy's end (buffered: whoever reads it puts it back)
	rg    *parquet.ConcurrentRowGroupWriter
	prev  *groupCopy // the group before, not yet committed
	rows  int64      // the rows handed to the copy
}

// startCopy starts the copy of row group g of p.
func (pw *RowWriter) startCopy(p *ParquetFile, g int) *groupCopy {
	c := &groupCopy{p: p, g: g, jobs: make(chan []int64, 4), done: make(chan error, 1), rg: pw.w.BeginRowGroup(), prev: pw.copying}
	pw.copying = c
	jobs := c.jobs // c.jobs is the sender's: it sets it to nil as it closes it
	go func() {
		var err error
		defer func() { c.done <- err }()
		// The library's writer faulted at a wild address copying the rows
		// of a damaged file that every check here passes (FuzzParquet's
		// 7bfdd117…): a fault is then a panic, the file an error, and the
		// output is not published.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer recoverParquet(p.name, &err)
		gr, err := pw.openGroup(p, g)
		if err != nil {
			return
		}
		defer gr.close()
		for rows := range jobs {
			err = gr.take(rows, func(kept []parquet.Row, _ []int64) error {
				_, err := c.rg.WriteRows(kept)
				return err
			})
			if err != nil {
				return
			}
		}
	}()
	return c
}

// endCopy ends the rows of the group being copied and commits the group
// before it, which must be done first: the output's row groups are in
// input order, and at most two are held. The group ended is committed by
// the next endCopy, or by finishCopies.
func (pw *RowWriter) endCopy() error {
	c := pw.copying
	if c == nil {
		return nil
	}
	if c.jobs != nil {
		close(c.jobs)
		c.jobs = nil
	}
	if c.prev == nil {
		return nil
	}
	prev := c.prev
	c.prev = nil
	return pw.commit(prev)
}

// commit waits for c's copy and writes its row group to the output.
func (pw *RowWriter) commit(c *groupCopy) (err error) {
	if err := <-c.done; err != nil {
		c.done <- err // said again, if asked again
		return err
	}
	c.done <- nil
	defer recoverParquet(c.p.name, &err)
	if _, err = c.rg.Commit(); err == nil {
		pw.groups = append(pw.groups, c.rows)
	}
	return err
}

// finishCopies ends and commits every group being copied, in order.
func (pw *RowWriter) finishCopies() error {
	if err := pw.endCopy(); err != nil {
		pw.Abort()
		return err
	}
	c := pw.copying
	pw.copying = nil
	if c == nil {
		return nil
	}
	return pw.commit(c)
}

// Commit waits for the row groups being copied and writes them to the
// output: the inputs they are copied from may be closed after it.
func (pw *RowWriter) Commit() (err error) {
	if pw.err != nil {
		return pw.err
	}
	defer pw.stick(&err)
	if pw.text != nil {
		return pw.endText()
	}
	return pw.finishCopies()
}

// Abort stops the copies under way and waits for them, writing nothing
// more: for a run that failed before Close. Close after it fails.
func (pw *RowWriter) Abort() {
	for c := pw.copying; c != nil; c = c.prev {
		if c.jobs != nil {
			close(c.jobs)
			c.jobs = nil
		}
		err := <-c.done
		c.done <- err
	}
	pw.copying = nil
	pw.aborted = true
	if pw.cur != nil {
		pw.cur.close()
		pw.cur = nil
	}
	pw.closeScratch()
}

// endText ends the row group read for text output.
func (pw *RowWriter) endText() error {
	if pw.cur != nil {
		pw.cur.close()
		pw.cur = nil
	}
	return pw.text.flush()
}

// closeScratch frees the zstd decoders of the scratch kept.
func (pw *RowWriter) closeScratch() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	for _, sc := range pw.free {
		if sc.expand.zstd != nil {
			sc.expand.zstd.Close()
			sc.expand.zstd = nil
		}
	}
}

// started reports whether the output's writer is made.
func (pw *RowWriter) started() bool { return pw.w != nil || pw.text != nil }

// Close writes the last row group and the footer; with no rows written it
// writes a file of the first input's schema and no rows (as text: the
// header alone, or nothing). It does not close the writer it writes to.
func (pw *RowWriter) Close() (err error) {
	if pw.err != nil {
		return pw.err
	}
	if pw.aborted {
		return errors.New("the Parquet output was aborted")
	}
	defer pw.stick(&err)
	if !pw.started() {
		pw.mu.Lock()
		first := pw.first
		pw.mu.Unlock()
		if first == nil {
			return fmt.Errorf("no Parquet input to take a schema from")
		}
		if err := pw.start(first); err != nil {
			return err
		}
	}
	defer recoverParquet("the output", &err)
	defer pw.closeScratch()
	if pw.text != nil {
		return pw.endText()
	}
	if err := pw.finishCopies(); err != nil {
		return err
	}
	if err := pw.w.Close(); err != nil {
		return err
	}
	if rb, ok := pw.out.(ReadBacker); ok {
		rb.ReadBack(pw.readBack(rb.Path()))
	}
	return nil
}

// ErrParquetOutput is a Parquet output that, read back as written, is not
// what was written to it.
var ErrParquetOutput = errors.New("the Parquet output does not read back as written")

// ReadBacker is an output that has its bytes checked as written before it
// is published (atomicfile.File): a Parquet output is then read back as
// fpdedup reads its inputs.
type ReadBacker interface {
	Path() string
	ReadBack(check func(r io.ReaderAt, size int64) error)
}

// ReadBackWriter is a buffer over an output that can be read back: the
// RowWriter writing into the buffer asks the output beneath it.
type ReadBackWriter struct {
	io.Writer
	Output ReadBacker
}

func (w ReadBackWriter) Path() string { return w.Output.Path() }

// Flush flushes the buffer, as what a stalled input decided is flushed
// (pipeline's flushAll): the output stays a buffered writer to its users.
func (w ReadBackWriter) Flush() error {
	if f, ok := w.Writer.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

func (w ReadBackWriter) ReadBack(check func(r io.ReaderAt, size int64) error) {
	w.Output.ReadBack(check)
}

// readBack is the check of a Parquet output as written to name: its
// footer parses within the first input's limit, its schema is the first
// input's, and its row groups hold the rows committed to each, in order.
func (pw *RowWriter) readBack(name string) func(r io.ReaderAt, size int64) error {
	return func(r io.ReaderAt, size int64) error {
		bad := func(format string, a ...any) error {
			return &ParquetError{Name: name, Err: ErrParquetOutput, Detail: fmt.Sprintf(format, a...)}
		}
		p, err := OpenParquet(name, r, size, pw.first.limit)
		if err != nil {
			return bad("%s", strings.TrimPrefix(err.Error(), name+": "))
		}
		defer p.Close()
		if err := sameSchema(pw.first, p); err != nil {
			return bad("%v", err)
		}
		rgs := p.file.Metadata().RowGroups
		if len(rgs) != len(pw.groups) || p.Rows() != pw.wrote {
			return bad("%d rows in %d row groups, where %d rows were written in %d", p.Rows(), len(rgs), pw.wrote, len(pw.groups))
		}
		for g, rg := range rgs {
			if rg.NumRows != pw.groups[g] {
				return bad("row group %d has %d rows, where %d were written to it", g, rg.NumRows, pw.groups[g])
			}
			for c, cc := range rg.Columns {
				if c < len(p.columns) && p.columns[c].maxRep == 0 && cc.MetaData.NumValues != rg.NumRows {
					return bad("row group %d: column %s has %d values for %d rows", g, p.columns[c].Path, cc.MetaData.NumValues, rg.NumRows)
				}
			}
		}
		return nil
	}
}

// stick keeps the first failure: a Write, Commit or Close after it
// returns it again, so no output is finished from part of its rows.
func (pw *RowWriter) stick(err *error) {
	if *err != nil && pw.err == nil {
		pw.err = *err
	}
}

// Rows is how many rows were written.
func (pw *RowWriter) Rows() int64 { return pw.wrote }

// groupStart is the first row of row group g, 1-based in the file.
func (p *ParquetFile) groupStart(g int) int64 { return p.starts[g] }

// checkGroup walks every page of every column of row group g (checkPages)
// before a copy of its rows decodes all of them, but for the columns the
// key pass has already checked.
func (p *ParquetFile) checkGroup(g int, sc *pageScratch) error {
	for c := range p.columns {
		if p.wasChecked(g, c) {
			continue
		}
		if err := p.checkPages(g, c, sc, nil); err != nil {
			return err
		}
	}
	return nil
}
