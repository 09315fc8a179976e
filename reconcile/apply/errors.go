package apply

import "fmt"

// A CheckpointError is a checkpoint file this run cannot resume from.
type CheckpointError struct {
	Path    string
	Problem CheckpointProblem
	// Last is the bad last fingerprint (BadLast).
	Last string
	// The run the file belongs to and this one (OtherRun): the online
	// side's redacted URL and the index's fingerprint count.
	FileOnline       string
	FileFingerprints uint64
	Online           string
	Fingerprints     uint64
}

// CheckpointProblem says why a checkpoint file cannot be used.
type CheckpointProblem int

// The problems of a checkpoint file.
const (
	NotACheckpoint CheckpointProblem = iota + 1 // not a checkpoint of this format version
	OtherRun                                    // written for another index or online side
	BadLast                                     // its last fingerprint is not 32 hex digits
)

func (e *CheckpointError) Error() string {
	switch e.Problem {
	case NotACheckpoint:
		return fmt.Sprintf("checkpoint %s is not an fpdedup reconcile checkpoint (remove it to start over)", e.Path)
	case OtherRun:
		return fmt.Sprintf("checkpoint %s belongs to another run (%s, index of %d fingerprints), not this one (%s, %d): remove it or name another file",
			e.Path, e.FileOnline, e.FileFingerprints, e.Online, e.Fingerprints)
	case BadLast:
		return fmt.Sprintf("checkpoint %s: bad last fingerprint %q", e.Path, e.Last)
	}
	return fmt.Sprintf("checkpoint %s: CheckpointProblem(%d)", e.Path, int(e.Problem))
}

// A WriteError: writing the missing keys online failed after the retries.
// Keys written before it are online; a rerun finds them present (the
// checkpoint says up to where, CheckpointLast). Refused: a rerun would be
// refused the same, and the message does not advise one.
//
// Err is kept as a field and not unwrapped (errors.Is and errors.As do
// not see through a WriteError): it is the server's or the network's
// failure, reported in words, and a broken connection to the server must
// not be mistaken for one of the caller's own (a closed stdout's EPIPE).
type WriteError struct {
	Target         string // the online side's redacted URL
	Err            error  // what the last attempt failed with
	Refused        bool   // the store refused it for good (online.Refused): a rerun does not help
	Retries        int64  // retries in all
	MaxRetries     int    // Options.Retries: at most this many per batch
	Written        int64  // keys written and acknowledged in this run
	Checkpoint     string // Options.Checkpoint; "" none
	CheckpointLast string // the last fingerprint the checkpoint covers
}

func (e *WriteError) Error() string { return e.Text(e.Err.Error()) }

// Text is the error's message with cause as the words for Err: a caller
// that words Err its own way keeps the rest.
func (e *WriteError) Text(cause string) string {
	if e.Refused {
		return fmt.Sprintf("writing to %s was refused: %s; %d keys written in this run", e.Target, cause, e.Written)
	}
	msg := fmt.Sprintf("writing to %s failed: %s (%d retries in all, at most %d per batch); %d keys written in this run", e.Target, cause, e.Retries, e.MaxRetries, e.Written)
	if e.Checkpoint != "" {
		return msg + fmt.Sprintf(", checkpoint %s at %s: rerun the same command to resume after it", e.Checkpoint, e.CheckpointLast)
	}
	return msg + ": rerun the same command to write the rest (what was written now shows as present)"
}

// ReadBackError is a read back after --apply's writes that failed: the
// keys were written, but what the store holds after them is not known.
type ReadBackError struct {
	Target  string
	Written int64 // keys written by the run
	Probed  int64 // keys read back before the failure
	Err     error
}

func (e *ReadBackError) Error() string {
	return fmt.Sprintf("%d keys were written to %s, but reading them back failed after %d: %v; audit it again (writing nothing) to see what it holds", e.Written, e.Target, e.Probed, e.Err)
}

func (e *ReadBackError) Unwrap() error { return e.Err }

// An UnsavedCheckpointError is a failed --apply whose checkpoint could not
// be saved either.
type UnsavedCheckpointError struct {
	Err, Save error
}

func (e *UnsavedCheckpointError) Error() string {
	return fmt.Sprintf("%v (and the checkpoint could not be saved: %v)", e.Err, e.Save)
}

func (e *UnsavedCheckpointError) Unwrap() []error { return []error{e.Err, e.Save} }

// MovedError is a failover (or a resharding) during a run's writes
// (--apply, --rebuild-shard): the nodes that serve the slots were not the
// same after the read-back as before the writes, so what was written to
// or read back from a master that has since lost its slots may be lost
// with it.
type MovedError struct {
	Target, What  string
	Written       int64  // keys (--apply) or shards swapped in (--rebuild-shard)
	Before, After string // online.Placed's SlotOwners
}

func (e *MovedError) Error() string {
	wrote := fmt.Sprintf("%d keys written", e.Written)
	if e.What != "--apply" {
		wrote = fmt.Sprintf("%d shards swapped in", e.Written)
	}
	return fmt.Sprintf("%s: the Cluster's slots changed hands during %s (a failover?): %s, but what was written to or read back from a master that lost its slots may be lost; not said to agree: rerun %s once the Cluster is ok. Before: %s. After: %s",
		e.Target, e.What, wrote, e.What, e.Before, e.After)
}
