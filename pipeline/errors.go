package pipeline

import "fmt"

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
