package ingest

import (
	"errors"
	"fmt"
)

// Sentinels, matched with errors.Is; the errors returned wrap them with the
// file name and position.
var (
	// ErrUnsupportedCompression marks an input compressed in a format that is
	// recognised (xz, bzip2, lz4, zip) but not decoded: hashing its bytes as
	// lines would give a silent wrong answer.
	ErrUnsupportedCompression = errors.New("unsupported compression")

	// ErrRecordTooLong marks a record over the caller's size limit.
	ErrRecordTooLong = errors.New("record too long")

	// ErrEmptyFileName marks a zero-length name in a --files0-from list.
	ErrEmptyFileName = errors.New("invalid zero-length file name")

	// ErrNoFileNames marks a --files0-from list that names no file; like GNU
	// sort we refuse it rather than fall back to stdin.
	ErrNoFileNames = errors.New("no input file names")

	// ErrUnknownHash marks a --hash name that is not one of ours.
	ErrUnknownHash = errors.New("unknown hash")

	// ErrInputChanged marks a regular file whose size or modification time
	// at the end of reading differs from what it was when opened (appended
	// to, truncated or rewritten meanwhile): what was read is no snapshot
	// of anything, so the run stops rather than publish it.
	ErrInputChanged = errors.New("the file changed while it was read")
)

// RecordError locates a bad record the way every fpdedup error about input
// reads: "FILE:LINE: record N: reason", where LINE is the
// physical line the record starts on and N its 1-based number in that input.
type RecordError struct {
	Name   string
	Line   int64
	Record int64
	Err    error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("%s:%d: record %d: %v", e.Name, e.Line, e.Record, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// tooLong builds the error for a record over maxRecord bytes.
func tooLong(name string, line, record int64, maxRecord int) error {
	return &RecordError{
		Name: name, Line: line, Record: record,
		Err: fmt.Errorf("%w: more than %d bytes", ErrRecordTooLong, maxRecord),
	}
}
