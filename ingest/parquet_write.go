package ingest

import (
	"fmt"
	"io"
	"sync"

	"github.com/parquet-go/parquet-go"
	pformat "github.com/parquet-go/parquet-go/format"
)

// RowWriter writes rows of Parquet inputs, unchanged and in the order
// given: the output of a Parquet input's dedup, or a backfill. As Parquet
// (RowsParquet, RowsAsRead), it is one file with the first input's schema,
// key-value metadata and codec; each input row group that gives rows
// becomes one output row group, written as its last rows are decided, so
// memory holds one row group's pages, never the file. As text (RowsCSV,
// RowsTSV, RowsJSONL: textRows), each row is a line. Inputs whose schema
// differs from the first's are an error naming both and the first column
// that differs.
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

	src   *ParquetFile // the row group being copied from
	group int
	rows  parquet.Rows
	next  int64 // the row of the group rows reads next
	buf   []parquet.Row
	kept  []parquet.Row
	wrote int64 // rows written
	// scratch is the writer's own: the reader may be checking pages of
	// the same file meanwhile.
	scratch pageScratch
}

// NewRowWriter writes to out as format says.
func NewRowWriter(out io.Writer, format RowFormat) *RowWriter {
	return &RowWriter{out: out, format: format}
}

// Schema tells the writer of an input, in input order, before its rows
// come: the first one's schema is the output's; another schema is an
// error. It may be called from another goroutine than the writes.
func (pw *RowWriter) Schema(p *ParquetFile) error {
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

// sameSchema is an error naming a and b and the first leaf column in
// which their schemas differ: in path, physical type, how its values read
// (DECIMAL scale, signedness) or nesting. Annotations that say the same
// thing two ways (a converted type beside its logical type, as writers
// differ in) are the same schema.
func sameSchema(a, b *ParquetFile) error {
	ca, cb := a.columns, b.columns
	for i := range max(len(ca), len(cb)) {
		switch {
		case i >= len(ca):
			return fmt.Errorf("%s has column %s, which %s lacks: the inputs of one Parquet output share one schema", b.name, cb[i].Path, a.name)
		case i >= len(cb):
			return fmt.Errorf("%s lacks column %s of %s: the inputs of one Parquet output share one schema", b.name, ca[i].Path, a.name)
		case !ca[i].same(&cb[i]):
			return fmt.Errorf("%s and %s differ at column %d: %s %s vs %s %s: the inputs of one Parquet output share one schema", a.name, b.name, i+1, ca[i].Path, ca[i].Type, cb[i].Path, cb[i].Type)
		}
	}
	return nil
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
	opts := []parquet.WriterOption{first.file.Schema()}
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
func (pw *RowWriter) Write(p *ParquetFile, g int, rows []int64) (err error) {
	defer recoverParquet(p.name, &err)
	if !pw.started() {
		if err := pw.start(p); err != nil {
			return err
		}
	}
	if pw.src != p || pw.group != g {
		if err := pw.endGroup(); err != nil {
			return err
		}
		if err := p.checkGroup(g, &pw.scratch); err != nil {
			return err
		}
		pw.src, pw.group, pw.next = p, g, 0
		pw.rows = p.file.RowGroups()[g].Rows()
	}
	base := p.groupStart(g) // the group's first row, 1-based in the file
	total := p.file.RowGroups()[g].NumRows()
	// The rows are read in order, every one (the library's seek reads a
	// column's pages again from the group's start), in batches; the ones
	// asked for are written.
	for len(rows) > 0 {
		at := rows[0] - base
		if at < pw.next || at >= total || rows[len(rows)-1]-base >= total {
			return fmt.Errorf("%s: row %d is not ahead in row group %d", p.name, rows[0], g)
		}
		// Read rows [next, last): up to the last row asked for, which a
		// later call must find still ahead.
		last := min(pw.next+parquetCopyBatch, rows[len(rows)-1]-base+1, total)
		if cap(pw.buf) < parquetCopyBatch {
			pw.buf = make([]parquet.Row, parquetCopyBatch)
		}
		buf := pw.buf[:last-pw.next]
		got, err := pw.rows.ReadRows(buf)
		if int64(got) < last-pw.next {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%d rows where the footer says %d", pw.next+int64(got), total)
			}
			return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d: %v", g, err)}
		}
		kept, nums := pw.kept[:0], rows
		for len(rows) > 0 && rows[0]-base < last {
			kept = append(kept, buf[rows[0]-base-pw.next])
			rows = rows[1:]
		}
		pw.kept = kept
		if pw.text != nil {
			err = pw.text.write(p, g, kept, nums)
		} else {
			_, err = pw.w.WriteRows(kept)
		}
		if err != nil {
			return err
		}
		pw.wrote += int64(len(kept))
		pw.next = last
	}
	return nil
}

// parquetCopyBatch is how many rows a copy reads at once.
const parquetCopyBatch = 1024

// endGroup closes the output row group of the rows copied so far.
func (pw *RowWriter) endGroup() error {
	if pw.rows == nil {
		return nil
	}
	pw.rows.Close()
	pw.rows, pw.src = nil, nil
	if pw.text != nil {
		return pw.text.flush()
	}
	return pw.w.Flush()
}

// started reports whether the output's writer is made.
func (pw *RowWriter) started() bool { return pw.w != nil || pw.text != nil }

// Close writes the last row group and the footer; with no rows written it
// writes a file of the first input's schema and no rows (as text: the
// header alone, or nothing). It does not
// close the writer it writes to.
func (pw *RowWriter) Close() (err error) {
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
	if pw.scratch.expand.zstd != nil {
		pw.scratch.expand.zstd.Close()
	}
	if err := pw.endGroup(); err != nil {
		return err
	}
	if pw.text != nil {
		return pw.text.flush()
	}
	return pw.w.Close()
}

// Rows is how many rows were written.
func (pw *RowWriter) Rows() int64 { return pw.wrote }

// groupStart is the first row of row group g, 1-based in the file.
func (p *ParquetFile) groupStart(g int) int64 {
	var n int64
	for _, rg := range p.file.RowGroups()[:g] {
		n += rg.NumRows()
	}
	return n + 1
}

// checkGroup walks every page of every column of row group g (checkPages)
// before a copy of its rows decodes all of them.
func (p *ParquetFile) checkGroup(g int, sc *pageScratch) error {
	for c := range p.columns {
		if err := p.checkPages(g, c, sc); err != nil {
			return err
		}
	}
	return nil
}
