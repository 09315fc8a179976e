package etcdkeys

import (
	"fmt"
	"strings"

	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
)

// The errors of reading and writing keys under an etcd prefix, beside
// the client's (etcdkv: *DialError naming the members, ErrAuth,
// *CompactedError, *TemplateError, *FieldError, *KeyError), which pass
// through as they are.

// A SnapshotError is an audit that could not read the prefix at one
// revision: each revision it read at was compacted before it finished,
// as many times as it was allowed to start again (Config.Retries). Err is
// the last *etcdkv.CompactedError.
type SnapshotError struct {
	Target    string  // the redacted URL
	Revisions []int64 // the revisions tried, each compacted under the read
	Err       error
}

func (e *SnapshotError) Error() string {
	revs := make([]string, len(e.Revisions))
	for i, r := range e.Revisions {
		revs[i] = fmt.Sprint(r)
	}
	return fmt.Sprintf("%s: the audit was started %d times, at revisions %s, and each was compacted before it finished: %v; audit between compactions, or raise the retries",
		e.Target, len(e.Revisions), strings.Join(revs, ", "), e.Err)
}

func (e *SnapshotError) Unwrap() error { return e.Err }

// A ValueError is a value that cannot be written (too large for a
// request), found before any write.
type ValueError struct {
	Reason string
}

func (e *ValueError) Error() string { return "the etcd value: " + e.Reason }

// A TooManyValuesError: the values of the keys to write, made from their
// records, do not fit in the memory budget (memplan.Plan.Values: a quarter of the budget).
type TooManyValuesError struct {
	Values, Bytes int64 // kept when the next did not fit
}

func (e *TooManyValuesError) Error() string {
	return fmt.Sprintf("the values of more than %d keys to write (%d bytes) do not fit in a quarter of the memory budget: write a slice at a time (a narrower prefix, a partitioned index), or give more memory", e.Values, e.Bytes)
}

// ErrCompacted is etcdkv's, for errors.Is.
var ErrCompacted = etcdkv.ErrCompacted
