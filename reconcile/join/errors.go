package join

import (
	"errors"
	"fmt"
)

// ErrUnsorted: a source said to be sorted is not in fingerprint order.
var ErrUnsorted = errors.New("the online source is not in fingerprint order")

// A ProbeError is a probe of the online side that failed after the
// retries.
type ProbeError struct {
	Target   string // redacted URL
	Answered int64  // keys answered before it failed
	Retries  int    // in all
	PerBatch int    // at most, per batch
	// Retryable: the failure was of the network or the server; a rerun
	// may succeed.
	Retryable bool
	Err       error
}

func (e *ProbeError) Error() string { return e.Say(e.Err.Error()) }

// Say is the message with cause as what failed.
func (e *ProbeError) Say(cause string) string {
	msg := fmt.Sprintf("probing %s failed after %d keys were answered (%d retries in all, at most %d per batch): %s",
		e.Target, e.Answered, e.Retries, e.PerBatch, cause)
	if e.Retryable {
		msg += "; nothing was published, rerun to probe again"
	}
	return msg
}

func (e *ProbeError) Unwrap() error { return e.Err }
