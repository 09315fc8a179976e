package ingest

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// A bad Parquet row has no bytes of its own to set aside as it is met: it
// is a place in its file. Under quarantine, the policy keeps each bad
// row's place and, when the run commits, copies those rows from the inputs
// (RowWriter, in input order, with the first input's schema, or as text
// under --output-format) into the quarantine file.

// maxBadRows bounds the places held: 16 bytes each, 64 MiB.
const maxBadRows = 1 << 22

// badRows are the places of the bad Parquet rows met, and the inputs to
// copy them from.
type badRows struct {
	format  RowFormat
	sources map[int]*rowSource
	first   *rowSource // the first input with a bad row: its schema is the file's
	places  []rowPlace
}

type rowPlace struct {
	in, group int32
	row       int64
}

// rowSource is a Parquet input to copy bad rows from. A regular file
// opened by its name is opened again by that name at commit (and must be
// the same file, unchanged), so a run over many inputs holds no
// descriptor of its own for them; a spool (standard input, a pipe), which
// has no name left, is kept open on a descriptor of the policy's own.
type rowSource struct {
	name   string
	f      *os.File    // a spool's descriptor, or nil
	stat   os.FileInfo // a named file's identity, to check at commit
	schema *ParquetFile
	size   int64
	limit  int64
	bad    bool // a bad row of it is kept
}

// WritesRows says how quarantined Parquet rows are written: the format of
// the run's outputs (RecordOptions.Rows).
func (p *BadPolicy) WritesRows(f RowFormat) {
	if p != nil {
		p.mu.Lock()
		p.rows.format = f
		p.mu.Unlock()
	}
}

// ParquetSource tells a quarantining policy of Parquet input i, pf read
// from f of size bytes with limit (OpenParquet): its bad rows are copied
// from it when the run commits. A file f opened by the name pf has is
// opened again then; any other f (a spool already unlinked) is kept open
// on a descriptor of the policy's own.
func (p *BadPolicy) ParquetSource(i int, pf *ParquetFile, f *os.File, size, limit int64) error {
	if !p.Quarantines() {
		return nil
	}
	src := &rowSource{name: pf.name, schema: &ParquetFile{name: pf.name, columns: pf.columns, nodes: pf.schemaNodes()}, size: size, limit: limit}
	if st, err := f.Stat(); err == nil && f.Name() == pf.name && st.Mode().IsRegular() {
		src.stat = st
	} else {
		fd, err := unix.Dup(int(f.Fd()))
		if err != nil {
			return &QuarantineError{Path: p.path, Err: fmt.Errorf("cannot keep %s open for its bad rows: %w", pf.name, err)}
		}
		src.f = os.NewFile(uintptr(fd), pf.name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rows.sources == nil {
		p.rows.sources = map[int]*rowSource{}
	}
	if old := p.rows.sources[i]; old != nil {
		// The same input again (a second look at it): the places kept
		// are of the file first read, which must be this one.
		old.close()
		if old.stat != nil && (src.stat == nil || !sameFile(src.stat, old.stat, old.size)) {
			p.err = &QuarantineError{Path: p.path, Err: fmt.Errorf("%s was replaced or changed during the run: its bad rows are not copied", pf.name)}
			return p.err
		}
		src.bad = old.bad
		if p.rows.first == old {
			p.rows.first = src
		}
	}
	p.rows.sources[i] = src
	return nil
}

// open opens the source again for the copy of its rows: a named file must
// be the one read, unchanged since.
func (s *rowSource) open() (*os.File, error) {
	if s.f != nil {
		return s.f, nil
	}
	changed := fmt.Errorf("it was replaced or changed during the run: its bad rows are not copied")
	// Looked at before it is opened: a FIFO put in its place would
	// block the open.
	if st, err := os.Stat(s.name); err != nil {
		return nil, fmt.Errorf("cannot open it again to copy its bad rows: %w", err)
	} else if !sameFile(st, s.stat, s.size) {
		return nil, changed
	}
	f, err := os.Open(s.name)
	if err != nil {
		return nil, fmt.Errorf("cannot open it again to copy its bad rows: %w", err)
	}
	if st, err := f.Stat(); err != nil || !sameFile(st, s.stat, s.size) {
		f.Close()
		return nil, changed
	}
	s.f = f
	return f, nil
}

// sameFile reports whether st is the file of was, of size bytes as read,
// unchanged: the same inode, size, and modification and change times
// (a rewrite that restores the modification time still changes ctime).
func sameFile(st, was os.FileInfo, size int64) bool {
	if !os.SameFile(st, was) || st.Size() != size || !st.ModTime().Equal(was.ModTime()) {
		return false
	}
	a, ok1 := st.Sys().(*syscall.Stat_t)
	b, ok2 := was.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && a.Ctim == b.Ctim
}

func (s *rowSource) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// keepRow keeps the place of the bad row re (a Parquet row). Called with
// mu held.
func (p *BadPolicy) keepRow(re *RecordError) error {
	if p.err != nil {
		return p.err
	}
	if len(p.rows.places) >= maxBadRows {
		p.err = &QuarantineError{Path: p.path, Err: fmt.Errorf("more than %d bad Parquet rows: their places are held in memory until the run commits; --on-bad skip counts them", maxBadRows)}
		return p.err
	}
	src := p.rows.sources[re.Input]
	if src == nil {
		p.err = &QuarantineError{Path: p.path, Err: fmt.Errorf("%s: a bad row of an input the quarantine was not told of", re.Name)}
		return p.err
	}
	if !src.bad {
		// The rows quarantined are one Parquet file (or one text table):
		// a schema of its own is refused at its first bad row, not after
		// the run's work.
		if first := p.rows.first; first != nil {
			if err := sameSchema(first.schema, src.schema); err != nil {
				p.err = &QuarantineError{Path: p.path, Err: fmt.Errorf("the bad rows of the inputs cannot be one file: %w", err)}
				return p.err
			}
		} else {
			p.rows.first = src
		}
		src.bad = true
	}
	if cols := src.schema.Columns(); len(cols) == 1 && (p.rows.format == RowsCSV || p.rows.format == RowsTSV) {
		// A bad row of a one-column file is a NULL in that column, which
		// has no csv or tsv row: refused now, not at the commit.
		p.err = &QuarantineError{Path: p.path, Err: &RecordError{Name: re.Name, Record: re.Record, RowGroup: re.RowGroup, Err: nullAlone(&cols[0])}}
		return p.err
	}
	p.rows.places = append(p.rows.places, rowPlace{in: int32(re.Input), group: int32(re.RowGroup - 1), row: re.Record})
	return nil
}

// writeRows copies the bad rows kept into the quarantine file, in input
// order. Called with mu held, when the run succeeded.
func (p *BadPolicy) writeRows() (err error) {
	if len(p.rows.places) == 0 {
		return nil
	}
	places := p.rows.places
	slices.SortFunc(places, func(a, b rowPlace) int {
		return cmp.Or(cmp.Compare(a.in, b.in), cmp.Compare(a.row, b.row))
	})
	places = slices.Compact(places) // a row met by two passes is one row
	f, err := atomicfile.Create(p.path)
	if err != nil {
		return &QuarantineError{Path: p.path, Err: err}
	}
	p.file = f
	bw := bufio.NewWriterSize(f, 1<<20)
	w := NewRowWriter(ReadBackWriter{bw, f}, p.rows.format)
	defer w.Abort()
	for len(places) > 0 {
		in := places[0].in
		n := 0
		for n < len(places) && places[n].in == in {
			n++
		}
		src := p.rows.sources[int(in)]
		f, err := src.open()
		if err != nil {
			return &QuarantineError{Path: p.path, Err: fmt.Errorf("%s: %w", src.name, err)}
		}
		pf, err := OpenParquetRows(src.name, f, src.size, src.limit)
		if err != nil {
			src.close()
			return err
		}
		err = w.Schema(pf)
		for i := 0; err == nil && i < n; {
			g := places[i].group
			var rows []int64
			for ; i < n && places[i].group == g; i++ {
				rows = append(rows, places[i].row)
			}
			err = w.Write(pf, int(g), rows)
		}
		if err == nil {
			err = w.Commit() // before pf closes
		} else {
			w.Abort() // the copies stop before pf closes
		}
		pf.Close()
		src.close()
		if err != nil {
			return err
		}
		places = places[n:]
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return &QuarantineError{Path: p.path, Err: err, Writing: true}
	}
	return nil
}

// closeSources closes the descriptors kept. Called with mu held.
func (p *BadPolicy) closeSources() {
	for _, s := range p.rows.sources {
		s.close()
	}
	p.rows.sources, p.rows.first, p.rows.places = nil, nil, nil
}
