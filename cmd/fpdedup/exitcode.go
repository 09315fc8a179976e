package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/reconcile"
)

// Exit codes (README "Exit codes, outputs and signals").
const (
	exitOK        = 0
	exitNegative  = 1 // a negative answer: a key absent, an index damaged
	exitError     = 2
	exitInterrupt = 130
	exitTerm      = 143
	exitPipe      = 141 // stdout closed by the reader, like a SIGPIPE death
)

// negativeAnswer ends a command that ran fine but answers "no".
type negativeAnswer struct{ msg string }

func (n negativeAnswer) Error() string { return n.msg }

// interrupted is the cause of a context cancelled by a signal.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

// signalName is SIGINT or SIGTERM, as the README and the shell name them
// (syscall's String says "interrupt", "terminated").
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// interruptedRun is a run that ended with an error after a signal: the
// signal decides the exit code and the message, err says what was under
// way.
type interruptedRun struct {
	sig       syscall.Signal
	publishes bool
	err       error
}

func (i interruptedRun) Error() string {
	msg := "interrupted by " + signalName(i.sig)
	var ai *reconcile.ApplyInterruptedError
	switch {
	case errors.As(i.err, &ai):
		msg += "; " + applyInterruptedText(ai)
	case i.publishes:
		msg += "; nothing was published"
	}
	return msg
}

func (i interruptedRun) Unwrap() error { return i.err }

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exitCode is the table: the exit code err ends the process with.
func exitCode(err error) int {
	var neg negativeAnswer
	var intr interruptedRun
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &neg):
		return exitNegative
	case errors.As(err, &intr):
		if intr.sig == syscall.SIGTERM {
			return exitTerm
		}
		return exitInterrupt
	case errors.Is(err, errStdoutClosed), errors.Is(err, atomicfile.ErrReaderGone):
		return exitPipe
	}
	return exitError
}

// underSignal is err as the command's end sees it: an error while a
// signal is pending is the interruption, whatever the code that saw it
// made of it (context.Canceled, a closed reader); a negative answer was
// computed in full and stands. (run in root.go does the same.)
func underSignal(ctx context.Context, err error, publishes bool) error {
	var intr interrupted
	var neg negativeAnswer
	if err != nil && errors.As(context.Cause(ctx), &intr) && !errors.As(err, &neg) {
		return interruptedRun{sig: intr.sig, publishes: publishes, err: err}
	}
	return err
}

// report prints err (with a hint where one helps) and maps it to an exit
// code.
func report(stderr io.Writer, err error) int {
	code := exitCode(err)
	var neg negativeAnswer
	var intr interruptedRun
	switch {
	case code == exitOK, code == exitPipe:
	case errors.As(err, &neg):
		if neg.msg != "" {
			fmt.Fprintln(stderr, "fpdedup:", neg.msg)
		}
	case errors.As(err, &intr):
		fmt.Fprintln(stderr, "fpdedup:", intr.Error())
	default:
		msg := say(err)
		if hint := hintFor(err); hint != "" {
			msg += "\n  hint: " + hint
		}
		fmt.Fprintln(stderr, "fpdedup:", msg)
	}
	return code
}

func hintFor(err error) string {
	var ue usageError
	var re *reconcile.ReplyError
	switch {
	case errors.As(err, &ue), reconcileUsage(err), strings.Contains(err.Error(), "unknown flag"), strings.Contains(err.Error(), "unknown command"), strings.Contains(err.Error(), "arg(s)"), strings.Contains(err.Error(), "required flag"):
		return "see fpdedup --help, or fpdedup COMMAND --help"
	case errors.Is(err, fpstore.ErrCorrupt):
		return "run fpdedup verify on it, and rebuild it from its records or from a copy"
	case errors.Is(err, fpstore.ErrUnsupportedVersion):
		return "it was written by a newer fpdedup; use that version, or rebuild it"
	case errors.Is(err, fpstore.ErrLocked):
		return "another fpdedup is writing the same output"
	case errors.Is(err, ingest.ErrRecordTooLong):
		return "raise --max-record if such records are real (with --mem at least 8 times it)"
	case errors.As(err, &re) && re.Problem == reconcile.ReplyTooLarge:
		return "a reply that large (a SCAN page, a probe batch) needs a larger share of memory: lower count= in the --online URL or --batch, or raise --mem"
	case errors.Is(err, ingest.ErrParquetAsText):
		return "give --format parquet and --key COLUMNS: files, and standard input redirected from a file, are looked into; a pipe is not before it is read"
	case errors.Is(err, fpstore.ErrBadHex):
		return "build --format fp, dedup --format fp and query --fp read one 32-digit hex fingerprint per line, as dump prints them"
	}
	return ""
}
