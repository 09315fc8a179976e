package main

import (
	"fmt"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/pipeline"
)

// The libraries return typed errors that say what is wrong in their own
// terms (a temporary directory, a partition, the online URL) with the
// facts as fields; the user gave flags, so the CLI says them with its
// flags. Here is all of that wording (reconcile's typed errors are in
// reconcile_errors.go).

// say is err's message in the CLI's words. A typed error is said from its
// fields. Any other error keeps its message, in which each error it wraps
// (fmt.Errorf's %w) is said in the CLI's words where its message appears
// as it is. A wrapped message that does not appear as it is (reconcile
// scrubbed a password out of it) keeps the package's words: what replaces
// a message is made of the same facts, so a password is never put back.
func say(err error) string {
	if msg, ok := sayTyped(err); ok {
		return msg
	}
	msg := err.Error()
	var wrapped []error
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if w := u.Unwrap(); w != nil {
			wrapped = []error{w}
		}
	case interface{ Unwrap() []error }:
		wrapped = u.Unwrap()
	}
	for _, w := range wrapped {
		if was, now := w.Error(), say(w); was != "" && now != was {
			msg = strings.Replace(msg, was, now, 1)
		}
	}
	return msg
}

// sayTyped says one typed error of a library (not what it wraps).
func sayTyped(err error) (string, bool) {
	if msg, ok := sayReconcileTyped(err); ok {
		return msg, true
	}
	switch e := err.(type) {
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
