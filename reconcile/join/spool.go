package join

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// A Spool keeps the missing fingerprints for Apply when no index of them
// is wanted: 16 big-endian bytes each in an unlinked temp file, written
// once in order and read back once. Building a temporary index instead
// (segments, filters, checksums) cost CPU that the writes then lacked.
type Spool struct {
	f *os.File
	w *bufio.Writer
	n int64
}

func newSpool(dir string) (*Spool, error) {
	f, err := os.CreateTemp(dir, "fpdedup-missing-*.tmp")
	if err != nil {
		return nil, &online.FileError{Op: "make a temp file in", File: online.TempDir, Err: err}
	}
	os.Remove(f.Name()) // gone when closed, whatever happens
	return &Spool{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// Add appends fingerprints.
func (s *Spool) Add(fps ...fpstore.Fingerprint) error {
	var rec [16]byte
	for _, fp := range fps {
		binary.BigEndian.PutUint64(rec[:8], fp.Hi)
		binary.BigEndian.PutUint64(rec[8:], fp.Lo)
		if _, err := s.w.Write(rec[:]); err != nil {
			return &online.FileError{Op: "write to", File: online.TempDir, Err: err}
		}
	}
	s.n += int64(len(fps))
	return nil
}

// Reader flushes the spool and reads it from the start.
func (s *Spool) Reader() (Reader, error) {
	if err := s.w.Flush(); err != nil {
		return nil, &online.FileError{Op: "write to", File: online.TempDir, Err: err}
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return &spoolReader{r: bufio.NewReaderSize(s.f, 1<<20), buf: make([]fpstore.Fingerprint, 8192), raw: make([]byte, 16*8192)}, nil
}

func (s *Spool) close() { s.f.Close() }

type spoolReader struct {
	r   *bufio.Reader
	buf []fpstore.Fingerprint
	raw []byte
}

func (r *spoolReader) Next() ([]fpstore.Fingerprint, error) {
	n, err := io.ReadFull(r.r, r.raw)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	if n%16 != 0 {
		return nil, errors.New("spool: truncated record")
	}
	out := r.buf[:n/16]
	for i := range out {
		out[i] = fpstore.Fingerprint{Hi: binary.BigEndian.Uint64(r.raw[16*i:]), Lo: binary.BigEndian.Uint64(r.raw[16*i+8:])}
	}
	return out, nil
}
