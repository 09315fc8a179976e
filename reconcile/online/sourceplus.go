package online

import (
	"fmt"

	"github.com/fpdedup/fpdedup/reconcile/report"
)

// What a Source may do besides the Source contract: each an interface the
// facade looks for, so that a store that does not need it says nothing.

// A ReadAgainError from Source.Read says that what it gave is not one
// consistent snapshot of the online side after all (etcd: the revision the
// read was pinned to was compacted under it), so the comparison built on
// it is thrown away and made again from the start, with a new Read. The
// source bounds how many times it asks (its Read fails with its own error
// past that); a comparison whose outputs cannot be taken back (an index
// written through to a pipe) is not made again and fails with Err.
type ReadAgainError struct {
	Err error // why: the source's error
}

func (e *ReadAgainError) Error() string {
	return fmt.Sprintf("the online side must be read again from the start: %v", e.Err)
}

func (e *ReadAgainError) Unwrap() error { return e.Err }

// A Valued source writes each key with a value made of fields of its
// record (etcd's value template): the records pass, which finds the
// records of the missing keys, hands it each one's fields before any
// write, and Write looks the value up by the item's whole digest.
type Valued interface {
	Source
	// ValueFields are the record fields the values are made of, each once;
	// none: every key gets the same value, and no record is needed.
	ValueFields() []string
	// KeepValue makes the value of the key whose whole SHA-256 is digest
	// from its record's fields (fields[i] is ValueFields()[i]'s bytes),
	// and keeps it for Write. A field that cannot stand in the value is
	// an error, which ends the run before anything is written. Called
	// from one goroutine, in the records' order: the first record of a
	// key gives its value, as the online side's first write would.
	KeepValue(digest [32]byte, fields [][]byte) error
}

// A Reporter source has figures of its own beyond the comparison's
// (etcd: the revision read at, leases): Report puts them in their section
// of rep, once the run is over, however it ended.
type Reporter interface {
	Source
	Report(rep *report.Report)
}

// A SelfRetrying source sends its own writes again (etcd's client, inside
// Write, before it gives up with a Permanent error): WriteRetries is how
// many it sent again so far, counted in the run's retries beside the ones
// the machinery made, so that "N retries in all" is true of either.
type SelfRetrying interface {
	Source
	WriteRetries() int64
	// KeysWritten is how many keys its writes committed so far, those of a
	// batch that failed part way included (etcd: the transactions of a
	// batch that went through before one failed), which the machinery,
	// counting whole batches acknowledged, does not see.
	KeysWritten() int64
}
