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
	Rows         bool // Parquet rows, numbered in their file, have no lines
}

func (e *DuplicateError) Error() string {
	at, line := fmt.Sprintf("%s:%d: record %d", e.Name, e.Line, e.Record), "line"
	if e.Rows {
		at, line = fmt.Sprintf("%s: row %d", e.Name, e.Record), "row"
	}
	switch {
	case e.InAgainst:
		return at + ": its key is already in the index"
	case e.FirstLine == 0:
		return at + ": duplicate of an earlier record"
	case e.FirstName == e.Name:
		return fmt.Sprintf("%s: duplicate of %s %d", at, line, e.FirstLine)
	}
	if e.Rows {
		return fmt.Sprintf("%s: duplicate of %s row %d", at, e.FirstName, e.FirstLine)
	}
	return fmt.Sprintf("%s: duplicate of %s:%d", at, e.FirstName, e.FirstLine)
}
