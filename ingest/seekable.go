package ingest

import (
	"fmt"
	"io"
	"os"
)

// SpoolError: an input that must be read at any offset (a Parquet file,
// read from its footer) could not be copied to the temporary directory
// Dir.
type SpoolError struct {
	Dir string
	Err error
}

func (e *SpoolError) Error() string { return e.Err.Error() }
func (e *SpoolError) Unwrap() error { return e.Err }

// OpenSeekable opens input name for reading at any offset, with its size:
// a regular file as it is; standard input ("-", read from stdin, or
// os.Stdin when nil), a pipe or a device copied to a file in dir that is
// unlinked at once, so it goes with the process whatever ends it. When tee
// is set, what standard input gives is copied to it too (a second pass's
// spool). A failure of the copy's writing is a *SpoolError.
func OpenSeekable(name string, stdin io.Reader, dir string, tee io.Writer) (*os.File, int64, error) {
	var src io.Reader
	if name == "-" {
		src = stdin
		if src == nil {
			src = os.Stdin
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
		src, tee = f, nil
	}
	if dir == "" {
		dir = os.TempDir()
	}
	spool, err := os.CreateTemp(dir, "fpdedup-spool-*")
	if err != nil {
		return nil, 0, &SpoolError{Dir: dir, Err: fmt.Errorf("cannot spool %s: %w", name, err)}
	}
	os.Remove(spool.Name())
	r := &readErr{r: src}
	var to io.Writer = spool
	if tee != nil {
		to = io.MultiWriter(spool, tee)
	}
	size, err := io.Copy(to, r)
	if err != nil {
		spool.Close()
		if r.err != nil {
			return nil, 0, fmt.Errorf("%s: cannot read: %w", name, r.err)
		}
		return nil, 0, &SpoolError{Dir: dir, Err: fmt.Errorf("cannot spool %s: %w", name, err)}
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
