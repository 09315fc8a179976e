package reconcile

import (
	"context"
	"errors"
	"fmt"
)

// ApplyInterruptedError is the error of a Run whose context was cancelled
// (SIGINT, SIGTERM) once --apply had begun writing keys online: unlike an
// interruption before that point, something was published, and a rerun
// with the same --checkpoint resumes after the last acknowledged batch.
// Keys written after that batch but not yet acknowledged (a reply lost to
// the interruption) may be online too; a rerun's comparison finds them
// present and does not write them again. Run returns it (possibly wrapped:
// use errors.As) whenever its context is done and Options.Apply wrote, or
// was writing, keys; DryRun never does.
type ApplyInterruptedError struct {
	// Target is the online side, as its redacted URL (no password).
	Target string
	// Written is how many keys this run wrote and the server acknowledged
	// before it stopped (ApplyStats.Written).
	Written int64
	// Checkpoint is the --checkpoint file; "" when none was given.
	Checkpoint string
	// CheckpointSaved: Checkpoint was saved at the interruption and names
	// the last acknowledged key (CheckpointLast). False without a
	// checkpoint, or when saving it failed (CheckpointErr): the file then
	// holds its previous save, still valid, only older.
	CheckpointSaved bool
	CheckpointLast  string // the last fingerprint the checkpoint covers; "" none yet
	CheckpointErr   error  // why the checkpoint could not be saved
	// Cause is the context's cause (context.Cause): the signal for the
	// CLI, context.Canceled for a plain cancel.
	Cause error
	// ctxErr is ctx.Err() (context.Canceled or DeadlineExceeded), wrapped
	// too when the cause is another error.
	ctxErr error
}

func (e *ApplyInterruptedError) Error() string {
	msg := fmt.Sprintf("--apply interrupted (%v) after writing %d keys to %s", e.Cause, e.Written, e.Target)
	switch {
	case e.Checkpoint != "" && e.CheckpointSaved:
		msg += fmt.Sprintf("; rerun with --checkpoint %s to resume", e.Checkpoint)
	case e.Checkpoint != "" && e.CheckpointErr != nil:
		msg += fmt.Sprintf("; the checkpoint could not be saved (%v): rerun with --checkpoint %s to resume from its last save (keys written since then are found present, not written again)", e.CheckpointErr, e.Checkpoint)
	case e.Checkpoint != "":
		msg += fmt.Sprintf("; rerun with --checkpoint %s to write the rest", e.Checkpoint)
	default:
		msg += "; rerun the same command to write the rest (the keys written now are found present, not written again)"
	}
	return msg
}

// Unwrap gives the cause and, when the cause is another error, ctx.Err():
// errors.Is(err, context.Canceled) holds whatever the cause.
func (e *ApplyInterruptedError) Unwrap() []error { return causes(e.Cause, e.ctxErr, nil) }

// interruptedError is the error of a Run whose context was cancelled
// before anything was written online: it wraps the context's cause,
// ctx.Err() and the error the run stopped with (if it was not already
// the cause), so errors.Is(err, context.Canceled) and errors.As for the
// cause's type both hold.
type interruptedError struct {
	cause, ctxErr, err error
}

func (e *interruptedError) Error() string {
	if e.err == nil {
		return e.cause.Error()
	}
	return fmt.Sprintf("%v (%v)", e.cause, e.err)
}

func (e *interruptedError) Unwrap() []error { return causes(e.cause, e.ctxErr, e.err) }

func causes(errs ...error) []error {
	var out []error
	for _, err := range errs {
		if err != nil && !containsErr(out, err) {
			out = append(out, err)
		}
	}
	return out
}

func containsErr(errs []error, err error) bool {
	for _, e := range errs {
		if errors.Is(e, err) {
			return true
		}
	}
	return false
}

// interrupted makes the error of a run whose context is done say so: the
// result wraps context.Cause(ctx) and ctx.Err(), and is never nil. An
// error that wraps both already (an *ApplyInterruptedError) is returned as
// it is. With a live context, err is returned unchanged.
func interrupted(ctx context.Context, err error) error {
	ctxErr := ctx.Err()
	if ctxErr == nil {
		return err
	}
	cause := context.Cause(ctx)
	if err != nil && errors.Is(err, cause) && errors.Is(err, ctxErr) {
		return err
	}
	if err != nil && (err.Error() == cause.Error() || err.Error() == ctxErr.Error()) {
		err = nil // the cancellation itself: its words add nothing
	}
	return &interruptedError{cause: cause, ctxErr: ctxErr, err: err}
}
