package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/fpdedup/fpdedup/ingest"
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
	// A page and a row group's key values are held decoded: the bound a
	// record has in the text formats, four times (the default --max-record,
	// 64 MiB, gives 256 MiB).
	p, err := ingest.OpenParquet(name, f, size, 4*int64(opts.Records.MaxRecord))
	if err != nil {
		f.Close()
		return err
	}
	if opts.Rows != nil {
		// The rows are copied after their keys are decided: the file
		// stays open until the copy is done (parquetRows.close).
		if err := opts.Rows.opened(p, f); err != nil {
			return err
		}
	} else {
		defer f.Close()
		defer p.Close()
	}
	cols, err := p.ResolveKey(append(slices.Clip(opts.Records.Spec.Keys), opts.ExtraKeys...))
	if err != nil {
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

// openParquet opens a Parquet input for reading at any offset: a regular
// file as it is; standard input, a pipe or a device copied to an unlinked
// file in the temporary directory.
func (opts readOptions) openParquet(name string) (*os.File, int64, error) {
	var src io.Reader
	if name == "-" {
		src = os.Stdin
		if opts.Stdin != nil {
			src = opts.Stdin
		}
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		if st.IsDir() {
			f.Close()
			return nil, 0, fmt.Errorf("%s: is a directory", name)
		}
		if st.Mode().IsRegular() {
			return f, st.Size(), nil
		}
		defer f.Close()
		src = f
	}
	dir := opts.TmpDir
	if dir == "" {
		dir = opts.SpoolDir
	}
	if dir == "" {
		dir = os.TempDir()
	}
	spool, err := os.CreateTemp(dir, "fpdedup-parquet-*")
	if err != nil {
		return nil, 0, &TmpDirError{Dir: dir, Err: fmt.Errorf("cannot spool %s: %w", name, err)}
	}
	os.Remove(spool.Name()) // gone with the process, whatever ends it
	r := &readErr{r: src}
	size, err := io.Copy(spool, r)
	if err != nil {
		spool.Close()
		if r.err != nil {
			return nil, 0, fmt.Errorf("%s: cannot read: %w", name, r.err)
		}
		return nil, 0, &TmpDirError{Dir: dir, Err: fmt.Errorf("cannot spool %s: %w", name, err)}
	}
	return spool, size, nil
}

// readErr keeps its reader's error apart from the writer's in an io.Copy.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// estimateRows is the rows the footers of Parquet inputs declare (2^20
// for one that is not a regular file, or whose footer does not read: the
// reading says what is wrong with it).
func estimateRows(inputs []string) int64 {
	var total int64
	for _, name := range inputs {
		n := int64(1 << 20)
		if f, err := os.Open(name); err == nil {
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				if p, err := ingest.OpenParquet(name, f, st.Size(), 64<<20); err == nil {
					n = max(p.Rows(), 1<<10)
					p.Close()
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
	out, side *ingest.ParquetWriter // side: DedupOptions.Duplicates
	mu        sync.Mutex
	files     []*os.File
	parsed    []*ingest.ParquetFile
}

func newParquetRows(out, side io.Writer) *parquetRows {
	r := &parquetRows{out: ingest.NewParquetWriter(out)}
	if side != nil {
		r.side = ingest.NewParquetWriter(side)
	}
	return r
}

// opened takes input p (file f), in input order, before its rows come.
func (r *parquetRows) opened(p *ingest.ParquetFile, f *os.File) error {
	r.mu.Lock()
	r.files, r.parsed = append(r.files, f), append(r.parsed, p)
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
	if len(keep) > 0 {
		if err := r.out.Write(c.Parquet, c.RowGroup-1, keep); err != nil {
			return err
		}
	}
	if r.side != nil && len(side) > 0 {
		return r.side.Write(c.Parquet, c.RowGroup-1, side)
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

// close closes the inputs.
func (r *parquetRows) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, f := range r.files {
		r.parsed[i].Close()
		f.Close()
	}
	r.files, r.parsed = nil, nil
}
