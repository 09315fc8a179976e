package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/pipeline"
)

// The libraries return typed errors that say what is wrong in their own
// terms (a temporary directory, a partition, a key field, the online URL)
// with the facts as fields; the user gave flags, so the CLI says them with
// its flags. Here is all of that wording (reconcile's typed errors are in
// reconcile_errors.go).

// flagWords name the parts of a key recipe as the command line gives them.
var flagWords = ingest.Words{Key: "--key", TimeField: "--time-field", Header: "--header", Format: "--format"}

// say is err's message in the CLI's words: a typed error is said from its
// fields (and a typed error that wraps another says that one in the
// CLI's words too); a wrapper that adds no words of its own (a marker,
// such as reconcile's permanent) is said as what it wraps; any other
// error keeps its message. A library that wraps an error the CLI words
// wraps it in a typed error, never with fmt.Errorf.
func say(err error) string {
	if msg, ok := sayTyped(err); ok {
		return msg
	}
	if inner := errors.Unwrap(err); inner != nil && inner.Error() == err.Error() {
		return say(inner)
	}
	return err.Error()
}

// sayTyped says one typed error of a library (not what it wraps).
func sayTyped(err error) (string, bool) {
	if msg, ok := sayReconcileTyped(err); ok {
		return msg, true
	}
	switch e := err.(type) {
	case *ingest.KeyError:
		return e.Say(flagWords), true
	case *ingest.OnBadError:
		return fmt.Sprintf("--on-bad must be fail, skip or quarantine=FILE, not %q", e.Value), true
	case *ingest.ParquetMemError:
		return sayParquetMem(e), true
	case *ingest.QuarantineError:
		if e.Writing {
			return fmt.Sprintf("--on-bad quarantine: cannot write %s: %v", e.Path, e.Err), true
		}
		return fmt.Sprintf("--on-bad quarantine: %v", e.Err), true
	case *fpstore.SpillSpaceError:
		return fmt.Sprintf("not enough space in --tmpdir %s for a sorted run: %d bytes free, %d needed; use a --tmpdir with more room or a larger --mem", e.Dir, e.Free, e.Need), true
	case *fpstore.PartitionError:
		if e.Path != "" {
			return fmt.Sprintf("%s covers partition %s, outside --partition %s", e.Path, e.Has, e.Want), true
		}
		return fmt.Sprintf("the inputs cover partition %s, not all of --partition %s", e.Has, e.Want), true
	case *fpstore.SpecMismatchError:
		if e.HashOnly {
			return fmt.Sprintf("%v; rebuild one of them with --hash %s", e, e.Specs[0].Hash), true
		}
		return fmt.Sprintf("%v; merge only indexes built with the same --hash and key recipe", e), true
	case *ingest.RecipeMismatchError:
		return fmt.Sprintf("%v: %v; give the same --key/--key-sep, or --assume-recipe if they are the same fields under other names", fpstore.ErrSpecMismatch, e), true
	case *pipeline.TmpDirError:
		return fmt.Sprintf("--tmpdir %s: %s", e.Dir, say(e.Err)), true
	}
	return "", false
}

// sayParquetMem names the flags under which a Parquet input's need fits.
// A Parquet reader holds its footer, a page, a row group's key values and
// a copy's buffers within four times --max-record (read_parquet.go), and
// --max-record is an eighth of --mem unless given, 64MiB at most by
// default: so --mem twice the need, and --max-record a quarter of it when
// that is past its default.
func sayParquetMem(e *ingest.ParquetMemError) string {
	const defaultMaxRecord = 64 << 20 // --max-record's default
	mib := func(n int64) int64 { return (n + 1<<20 - 1) >> 20 }
	maxRecord := (e.Need + 3) / 4
	fix := fmt.Sprintf("give --mem %dMiB or more", max(mib(memplan.MemForRecord(maxRecord)), 16))
	if maxRecord > defaultMaxRecord {
		fix = fmt.Sprintf("give --mem %dMiB and --max-record %dMiB or more", mib(memplan.MemForRecord(mib(maxRecord)<<20)), mib(maxRecord))
	}
	if e.Remedy != "" {
		fix += ", " + e.Remedy
	}
	return fmt.Sprintf("%s (a Parquet input is read within four times --max-record, an eighth of --mem unless given): %s", e.Error(), fix)
}

// wrapped breaks text made from figures (a help paragraph built from the
// memory plan) into lines of at most width columns, as --help's hand-wrapped
// paragraphs are.
func wrapped(text string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(text) {
		switch {
		case col == 0:
		case col+1+len(w) > width:
			b.WriteByte('\n')
			col = 0
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}
