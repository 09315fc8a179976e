package ingest

import (
	"bytes"
	"fmt"
	"io"
)

// ReadFiles0 reads a --files0-from list: file names separated by NUL bytes,
// the final NUL optional, as GNU `sort --files0-from` reads them. name is the
// list's own name for errors ("-" for stdin). Names are taken byte for byte
// (a newline is part of a name). Like GNU sort it refuses a zero-length name,
// naming its 1-based position, a list with no names at all (falling back to
// stdin would silently read the wrong thing), and "-" inside a list that is
// itself read from stdin.
func ReadFiles0(r io.Reader, name string) ([]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("cannot read file list %s: %w", name, err)
	}
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: %w", name, ErrNoFileNames)
	}
	data = bytes.TrimSuffix(data, []byte{0})
	var names []string
	for i := 1; ; i++ {
		n, rest, more := bytes.Cut(data, []byte{0})
		if len(n) == 0 {
			return nil, fmt.Errorf("%s:%d: %w", name, i, ErrEmptyFileName)
		}
		if name == "-" && string(n) == "-" {
			return nil, fmt.Errorf("%s:%d: file name %q not allowed when reading file names from stdin", name, i, "-")
		}
		names = append(names, string(n))
		if !more {
			return names, nil
		}
		data = rest
	}
}
