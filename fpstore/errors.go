package fpstore

import (
	"errors"
	"fmt"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// Sentinel errors. Callers test them with errors.Is; messages name the file
// and, for damage, the offset.
var (
	// ErrNotIndex: the file does not start with the index magic.
	ErrNotIndex = errors.New("not an fpdedup index")
	// ErrUnsupportedVersion: a format version this build cannot read.
	ErrUnsupportedVersion = errors.New("unsupported index format version")
	// ErrCorrupt: an index whose header is recognised but whose bytes fail
	// a size, checksum or structure check (truncation included).
	ErrCorrupt = errors.New("index is damaged")
	// ErrSpecMismatch: indexes or inputs with different fingerprint specs.
	ErrSpecMismatch = errors.New("fingerprint spec mismatch")
	// ErrOrder: fingerprints given to a Writer out of order or repeated.
	ErrOrder = errors.New("fingerprints not strictly ascending")
	// ErrOutOfRange: a fingerprint outside the writer's covered range.
	ErrOutOfRange = errors.New("fingerprint outside the covered prefix range")
	// ErrLocked: another process is writing the same output.
	ErrLocked = atomicfile.ErrLocked
)

// SpecMismatchError: two indexes of one operation have different specs
// (Hash only: a set, whose key recipes the caller compares where records
// are read).
type SpecMismatchError struct {
	Paths    [2]string
	Specs    [2]Spec
	HashOnly bool
}

func (e *SpecMismatchError) Error() string {
	if e.HashOnly {
		return fmt.Sprintf("%v: %s uses %s, %s uses %s", ErrSpecMismatch, e.Paths[0], e.Specs[0].Hash, e.Paths[1], e.Specs[1].Hash)
	}
	return fmt.Sprintf("%v: %s is %s, %s is %s", ErrSpecMismatch, e.Paths[0], describeSpec(e.Specs[0]), e.Paths[1], describeSpec(e.Specs[1]))
}

func (e *SpecMismatchError) Is(target error) bool { return target == ErrSpecMismatch }

// PartitionError: a merge restricted to one partition (MergeOptions.
// Partition) whose inputs do not serve it: Path (the first input of a
// subtraction or an intersection) covers Has, outside Want; or the inputs
// together cover Has, not all of Want (Path empty).
type PartitionError struct {
	Path      string
	Has, Want Range
}

func (e *PartitionError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("%s covers partition %s, outside partition %s", e.Path, e.Has, e.Want)
	}
	return fmt.Sprintf("the inputs cover partition %s, not all of partition %s", e.Has, e.Want)
}

// SpillSpaceError: the temporary directory has less free space than the
// sorted run about to be spilled there.
type SpillSpaceError struct {
	Dir        string
	Free, Need int64
}

func (e *SpillSpaceError) Error() string {
	return fmt.Sprintf("not enough space in %s for a sorted run: %d bytes free, %d needed", e.Dir, e.Free, e.Need)
}
