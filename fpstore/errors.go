package fpstore

import (
	"errors"

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
