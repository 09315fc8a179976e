package pipeline

import (
	"fmt"

	"github.com/fpdedup/fpdedup/fpstore"
)

// TmpDirError: the temporary directory a job spills to cannot take its
// files (full, read-only, missing). Dir is the directory as given.
type TmpDirError struct {
	Dir string
	Err error
}

func (e *TmpDirError) Error() string {
	return fmt.Sprintf("temporary directory %s: %v", e.Dir, e.Err)
}

func (e *TmpDirError) Unwrap() error { return e.Err }

// DuplicateError is a --check's answer: the record at Name:Line (record
// number Record) has a key seen before, first at FirstName:FirstLine (see
// FindFirst), or in an index the input is checked against.
type DuplicateError struct {
	Name         string
	Line, Record int64
	FP           fpstore.Fingerprint
	InAgainst    bool
	FirstName    string
	FirstLine    int64
}

func (e *DuplicateError) Error() string {
	switch {
	case e.InAgainst:
		return fmt.Sprintf("%s:%d: record %d: its key is already in the index", e.Name, e.Line, e.Record)
	case e.FirstLine == 0:
		return fmt.Sprintf("%s:%d: record %d: duplicate of an earlier record", e.Name, e.Line, e.Record)
	case e.FirstName == e.Name:
		return fmt.Sprintf("%s:%d: record %d: duplicate of line %d", e.Name, e.Line, e.Record, e.FirstLine)
	}
	return fmt.Sprintf("%s:%d: record %d: duplicate of %s:%d", e.Name, e.Line, e.Record, e.FirstName, e.FirstLine)
}
