package pipeline

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
)

// parquetChunk is how many bytes of framed keys a chunk of Parquet rows
// holds, as a chunk of text holds about 1 MiB of records.
const parquetChunk = 1 << 20

// readParquet reads input i, a Parquet file, row group by row group: its
// key columns only, framed into chunks (ingest.Frames). A file is read
// from its footer, so standard input and other streams are spooled to the
// temporary directory first (and the spool unlinked at once).
func readParquet(ctx context.Context, opts readOptions, i int, name string, jobs chan<- chunkJob, before *int64) error {
	f, size, err := opts.openParquet(name)
	if err != nil {
		return err
	}
	// A page and a row group's key values are held decoded (two row
	// groups': the next is decoded ahead): each within the bound a record
	// has in the text formats, four times (the default --max-record, 64
	// MiB, gives 256 MiB).
	limit := memplan.ReaderLimit(int64(opts.Records.MaxRecord))
	open := ingest.OpenParquet
	if opts.Rows != nil || opts.Records.OnBad.Quarantines() {
		open = ingest.OpenParquetRows // its rows are copied: counted up front
	}
	p, err := open(name, f, size, limit)
	if err != nil {
		f.Close()
		return err
	}
	if err := opts.Records.OnBad.ParquetSource(i, p, f, size, limit); err != nil {
		p.Close()
		f.Close()
		return err
	}
	if opts.Rows != nil {
		// The rows are copied after their keys are decided: the file
		// stays open until the copy is done (parquetRows.close).
		if err := opts.Rows.opened(i, p, f); err != nil {
			return err
		}
	} else {
		defer f.Close()
		defer p.Close()
	}
	cols, err := p.KeyColumns(opts.Records.Spec, opts.ExtraKeys...)
	if err != nil {
		// An extra column (replay's time) is named as the time field,
		// as a text input's Keyer names it.
		var ke *ingest.KeyError
		if errors.As(err, &ke) && slices.Contains(opts.ExtraKeys, ke.Item) && !slices.Contains(opts.Records.Spec.Keys, ke.Item) {
			ke.TimeField = true
		}
		return ingest.InInput(err, name)
	}
	done := *before
	for g := range p.RowGroups() {
		err := p.Chunks(g, cols, parquetChunk, func(c *ingest.Chunk) error {
			select {
			case jobs <- chunkJob{in: i, name: name, chunk: c}:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		done += p.RowGroupBytes(g)
		opts.Progress.RawBytes.Store(done)
	}
	*before += size
	opts.Progress.RawBytes.Store(*before)
	return nil
}

// openParquet opens a Parquet input for reading at any offset: standard
// input, a pipe or a device spooled to the temporary directory (and to
// opts.Spool too, for a second pass, when set).
func (opts readOptions) openParquet(name string) (*os.File, int64, error) {
	dir := opts.TmpDir
	if dir == "" {
		dir = opts.SpoolDir
	}
	f, size, err := ingest.OpenSeekable(name, opts.Stdin, dir, opts.Spool)
	var se *ingest.SpoolError
	if errors.As(err, &se) {
		return nil, 0, &TmpDirError{Dir: se.Dir, Err: se.Err}
	}
	return f, size, err
}

// estimateRows is the rows the footers of Parquet inputs declare (2^20
// for one that is not a regular file, or whose footer does not read: the
// reading says what is wrong with it), read without parsing them: a
// footer parsed here as well as by the reading took its memory twice.
func estimateRows(inputs []string) int64 {
	var total int64
	for _, name := range inputs {
		n := int64(1 << 20)
		if f, err := os.Open(name); err == nil {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				if rows, err := ingest.ParquetRows(f, st.Size(), 64<<20); err == nil {
					n = max(rows, 1<<10)
				}
			}
			f.Close()
		}
		total += n
	}
	return total
}

// parquetRows copies the rows a dedup keeps (and those it sets aside) from
// their Parquet inputs: the inputs stay open from their reading to the end
// of the copy.
type parquetRows struct {
	out, side *ingest.RowWriter // side: DedupOptions.Duplicates
	mu        sync.Mutex
	files     []*os.File
	parsed    []*ingest.ParquetFile // by input index
}

func newParquetRows(out, side io.Writer, format ingest.RowFormat) *parquetRows {
	r := &parquetRows{out: ingest.NewRowWriter(out, format)}
	if side != nil {
		r.side = ingest.NewRowWriter(side, format)
	}
	return r
}

// opened takes input i, p in file f, in input order, before its rows come.
func (r *parquetRows) opened(i int, p *ingest.ParquetFile, f *os.File) error {
	r.mu.Lock()
	r.files = append(r.files, f)
	for len(r.parsed) <= i {
		r.parsed = append(r.parsed, nil)
	}
	r.parsed[i] = p
	r.mu.Unlock()
	if err := r.out.Schema(p); err != nil {
		return err
	}
	if r.side != nil {
		return r.side.Schema(p)
	}
	return nil
}

// write copies the rows of a chunk's row group numbered keep to the
// output and those numbered side to the side output.
func (r *parquetRows) write(c *ingest.Chunk, keep, side []int64) error {
	return r.writeGroup(c.Parquet, c.RowGroup-1, keep, side)
}

// writeInput is write for row group g of input i.
func (r *parquetRows) writeInput(i, g int, keep, side []int64) error {
	r.mu.Lock()
	p := r.parsed[i]
	r.mu.Unlock()
	return r.writeGroup(p, g, keep, side)
}

func (r *parquetRows) writeGroup(p *ingest.ParquetFile, g int, keep, side []int64) error {
	if len(keep) > 0 {
		if err := r.out.Write(p, g, keep); err != nil {
			return err
		}
	}
	if r.side != nil && len(side) > 0 {
		return r.side.Write(p, g, side)
	}
	return nil
}

// finish writes the outputs' footers.
func (r *parquetRows) finish() error {
	if err := r.out.Close(); err != nil {
		return err
	}
	if r.side != nil {
		return r.side.Close()
	}
	return nil
}

// close stops the copies still under way (after finish: none) and
// closes the inputs.
func (r *parquetRows) close() {
	r.out.Abort()
	if r.side != nil {
		r.side.Abort()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.parsed {
		if p != nil {
			p.Close()
		}
	}
	for _, f := range r.files {
		f.Close()
	}
	r.files, r.parsed = nil, nil
}
