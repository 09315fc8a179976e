package online

import (
	"context"
	"errors"
	"fmt"
)

// The errors every part of a run may return, which a caller matches with
// errors.As (reconcile names them too): a file of the run's that could not
// be read or written, an interruption after something was written online,
// a URL refused. Each store's own errors are its package's.

// A URLError is an online URL that ParseURL refuses.
type URLError struct {
	URL    string // as it may be printed, without any password; "" when the string is no URL at all
	Reason string // what is wrong, in the URL's own terms (match=, cluster=, the scheme)
	// PasswordEnv is set when the URL holds a password, which would be
	// visible in ps and shell history: it names the environment variable
	// meant to hold it.
	PasswordEnv string
}

func (e *URLError) Error() string {
	switch {
	case e.PasswordEnv != "":
		return fmt.Sprintf("online URL %s holds a password, which would be visible in ps and shell history: remove it and put it in $%s", e.URL, e.PasswordEnv)
	case e.URL == "":
		return "online URL: " + e.Reason
	}
	return fmt.Sprintf("online URL %s: %s", e.URL, e.Reason)
}

// A FileError is a file Run could not read, write or remove, named by its
// role (the checkpoint, the temp directory, the backfill).
type FileError struct {
	Op   string   // what could not be done: "read", "write", "write to", "make a temp file in", …
	File FileRole // whose file
	Path string   // the path, where the message names it ("" when Err does)
	Err  error
	// AfterApply: --apply had written every key when it failed (removing
	// the checkpoint, which nothing is left to resume from).
	AfterApply bool
}

// FileRole is the role of a file in a run.
type FileRole int

// The files a run reads and writes besides its outputs' indexes.
const (
	CheckpointFile FileRole = iota + 1 // Options.Checkpoint
	TempDir                            // Options.TmpDir
	BackfillFile                       // Options.Backfill
)

func (r FileRole) String() string {
	switch r {
	case CheckpointFile:
		return "the checkpoint"
	case TempDir:
		return "the temp directory"
	case BackfillFile:
		return "the backfill"
	}
	return fmt.Sprintf("FileRole(%d)", int(r))
}

func (e *FileError) Error() string { return e.Say(e.File.String(), e.Err.Error()) }

// Say is the message with the file named as file and the cause as cause.
func (e *FileError) Say(file, cause string) string {
	if e.Path != "" {
		file += " " + e.Path
	}
	msg := fmt.Sprintf("cannot %s %s: %s", e.Op, file, cause)
	if e.AfterApply {
		msg = "apply done, but " + msg
	}
	return msg
}

func (e *FileError) Unwrap() error { return e.Err }

// ApplyInterruptedError is the error of a Run whose context was cancelled
// (SIGINT, SIGTERM in the CLI) once Options.Apply had begun writing keys
// online: unlike an interruption before that point, something was
// published, and a rerun with the same Options.Checkpoint resumes after
// the last acknowledged batch. Keys written after that batch but not yet
// acknowledged (a reply lost to the interruption) may be online too; a
// rerun's comparison finds them present and does not write them again.
// Run returns it (possibly wrapped: use errors.As) whenever its context is
// done and Options.Apply wrote, or was writing, keys; DryRun never does.
type ApplyInterruptedError struct {
	// Target is the online side, as its redacted URL (no password).
	Target string
	// Written is how many keys this run wrote and the server acknowledged
	// before it stopped (ApplyStats.Written).
	Written int64
	// Checkpoint is Options.Checkpoint; "" when none was given.
	Checkpoint string
	// CheckpointSaved: Checkpoint was saved at the interruption and names
	// the last acknowledged key (CheckpointLast). False without a
	// checkpoint, or when saving it failed (CheckpointErr): the file then
	// holds its previous save, still valid, only older.
	CheckpointSaved bool
	CheckpointLast  string // the last fingerprint the checkpoint covers; "" none yet
	CheckpointErr   error  // why the checkpoint could not be saved
	// Rebuilt is how many shards of Rebuild a rebuild (Options.Rebuild)
	// had swapped in; Rebuild, how many it was asked for (0: an apply).
	Rebuilt, Rebuild int64
	// Cause is the context's cause (context.Cause): the signal for the
	// CLI, context.Canceled for a plain cancel.
	Cause error
	// ctxErr is ctx.Err() (context.Canceled or DeadlineExceeded), wrapped
	// too when the cause is another error.
	ctxErr error
}

func (e *ApplyInterruptedError) Error() string {
	if e.Rebuild > 0 {
		return fmt.Sprintf("rebuild interrupted (%v) after swapping in %d of %d shards on %s; %s", e.Cause, e.Rebuilt, e.Rebuild, e.Target, RebuildRerun)
	}
	msg := fmt.Sprintf("applying interrupted (%v) after writing %d keys to %s", e.Cause, e.Written, e.Target)
	switch {
	case e.Checkpoint != "" && e.CheckpointSaved:
		msg += fmt.Sprintf("; rerun with the checkpoint %s to resume", e.Checkpoint)
	case e.Checkpoint != "" && e.CheckpointErr != nil:
		msg += fmt.Sprintf("; the checkpoint could not be saved (%v): rerun with the checkpoint %s to resume from its last save (keys written since then are found present, not written again)", e.CheckpointErr, e.Checkpoint)
	case e.Checkpoint != "":
		msg += fmt.Sprintf("; rerun with the checkpoint %s to write the rest", e.Checkpoint)
	default:
		msg += "; run it again to write the rest (the keys written now are found present, not written again)"
	}
	return msg
}

// RebuildRerun says what rerunning an interrupted rebuild does.
const RebuildRerun = "the others are as they were; rerun to rebuild them (a shard rebuilt again clears no bit)"

// Unwrap gives the cause and, when the cause is another error, ctx.Err():
// errors.Is(err, context.Canceled) holds whatever the cause.
func (e *ApplyInterruptedError) Unwrap() []error { return causes(e.Cause, e.ctxErr, nil) }

// ApplyInterrupted is e, the figures of a run that wrote online, as the
// error of its interruption: its Cause is ctx's, and it wraps ctx.Err().
func ApplyInterrupted(ctx context.Context, e ApplyInterruptedError) *ApplyInterruptedError {
	e.Cause, e.ctxErr = context.Cause(ctx), ctx.Err()
	return &e
}

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

// Interrupted makes the error of a run whose context is done say so: the
// result wraps context.Cause(ctx) and ctx.Err(), and is never nil. An
// error that wraps both already (an *ApplyInterruptedError) is returned as
// it is. With a live context, err is returned unchanged.
func Interrupted(ctx context.Context, err error) error {
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
