package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/pipeline"
)

// The libraries return typed errors that say what is wrong in their own
// terms (a temporary directory, a partition); the user gave flags, so the
// message names the flags. cliMessage replaces the words of each typed
// error found in err's chain by the CLI's, in place: the context the
// callers wrapped around it stays.
func cliMessage(err error) string {
	msg := err.Error()
	for _, word := range cliWordings {
		if w, ok := word(err); ok {
			msg = strings.Replace(msg, w.inner.Error(), w.text, 1)
		}
	}
	return msg
}

// wording is the CLI's text for one typed error of a chain.
type wording struct {
	inner error
	text  string
}

var cliWordings = []func(error) (wording, bool){
	func(err error) (wording, bool) {
		var e *fpstore.SpillSpaceError
		if !errors.As(err, &e) {
			return wording{}, false
		}
		return wording{e, fmt.Sprintf("not enough space in --tmpdir %s for a sorted run: %d bytes free, %d needed; use a --tmpdir with more room or a larger --mem", e.Dir, e.Free, e.Need)}, true
	},
	func(err error) (wording, bool) {
		var e *fpstore.PartitionError
		if !errors.As(err, &e) {
			return wording{}, false
		}
		if e.Path != "" {
			return wording{e, fmt.Sprintf("%s covers partition %s, outside --partition %s", e.Path, e.Has, e.Want)}, true
		}
		return wording{e, fmt.Sprintf("the inputs cover partition %s, not all of --partition %s", e.Has, e.Want)}, true
	},
	func(err error) (wording, bool) {
		var e *fpstore.SpecMismatchError
		if !errors.As(err, &e) {
			return wording{}, false
		}
		if e.HashOnly {
			return wording{e, fmt.Sprintf("%v; rebuild one of them with --hash %s", e, e.Specs[0].Hash)}, true
		}
		return wording{e, fmt.Sprintf("%v; merge only indexes built with the same --hash and key recipe", e)}, true
	},
	func(err error) (wording, bool) {
		var e *pipeline.TmpDirError
		if !errors.As(err, &e) {
			return wording{}, false
		}
		return wording{e, fmt.Sprintf("--tmpdir %s: %v", e.Dir, e.Err)}, true
	},
}
