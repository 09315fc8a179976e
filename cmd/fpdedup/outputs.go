package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// Output paths (README "Exit codes, outputs and signals").
//
// Every job declares the files it reads and writes (job.go), and they are
// checked here before any work. An output that is also an input is
// refused, unless the command is documented as working in place (merge -o
// H H x, dedup -o in in): overwriting an input would destroy it with exit
// 0. Outputs that are not regular files (/dev/null, a FIFO, /dev/stdout)
// are written through, and a descriptor path that is an input is refused;
// symbolic links are judged by their target. An output's directory must
// exist and be writable.

// pathKind says what a command does with an input path; it decides which
// outputs may name it in place.
type pathKind uint8

const (
	kindRecords pathKind = iota // records read (dedup, build, reconcile --records)
	kindIndex                   // an index read (--against, --index, IDX)
	kindOther                   // a file list, a password file, a checkpoint
)

type ioPath struct {
	flag, path string
	kind       pathKind
	inPlace    []pathKind  // outputs only: the inputs it may replace
	st         os.FileInfo // inputs only: what check found there
}

// ioPaths collects one command's inputs and outputs.
type ioPaths struct {
	inputs, outputs []ioPath
	// stdinRecords: records are read from standard input ("-", or no
	// FILE operand at all).
	stdinRecords bool
}

func (p *ioPaths) input(flag string, kind pathKind, paths ...string) {
	if kind == kindRecords && (flag == "FILE" && len(paths) == 0 || slices.Contains(paths, "-")) {
		p.stdinRecords = true
	}
	for _, path := range paths {
		if path != "" && path != "-" {
			p.inputs = append(p.inputs, ioPath{flag: flag, path: path, kind: kind})
		}
	}
}

func (p *ioPaths) output(flag, path string, inPlace ...pathKind) {
	if path != "" && path != "-" {
		p.outputs = append(p.outputs, ioPath{flag: flag, path: path, inPlace: inPlace})
	}
}

// check refuses an output that names an input (unless in place) or another
// output, or whose directory does not exist, before any work. Standard
// input is an input when it is a regular file (< in.txt). It also makes
// inv say "nothing was published" when interrupted.
func (p *ioPaths) check(inv *invocation) error {
	type seen struct {
		ioPath
		target string
		st     os.FileInfo
	}
	inputs := p.inputs
	if f, ok := inv.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			inputs = append(inputs, ioPath{flag: "standard input", path: "-", kind: kindRecords, st: st})
		}
	}
	for i := range inputs {
		if inputs[i].st == nil {
			inputs[i].st, _ = os.Stat(inputs[i].path)
		}
	}
	sameInput := func(st os.FileInfo) *ioPath {
		for i, in := range inputs {
			if st != nil && in.st != nil && in.st.Mode().IsRegular() && os.SameFile(st, in.st) {
				return &inputs[i]
			}
		}
		return nil
	}
	var outs []seen
	for _, o := range p.outputs {
		target, through, err := atomicfile.Resolve(o.path)
		if err != nil {
			return usageErrorf("%s: %v", o.flag, err)
		}
		inv.publishes = true
		if through {
			// Written through the descriptor the shell set up: a regular
			// file there is appended to or overwritten in place, so no
			// input may be it, in place or not.
			if fd, ok := atomicfile.Descriptor(target); ok {
				if st, err := fdStat(fd); err == nil {
					if in := sameInput(st); in != nil {
						return usageErrorf("%s %s is also an input (%s %s): it would be written over while it is read; write to another file", o.flag, o.path, in.flag, in.path)
					}
				}
			}
			continue
		}
		if dir := parentDir(target); !isDir(dir) {
			return usageErrorf("%s %s: no directory %s to write it in", o.flag, o.path, dir)
		}
		if err := checkWritable(target); err != nil {
			return usageErrorf("%s %s: cannot write there: %v", o.flag, o.path, err)
		}
		st, _ := os.Stat(target)
		if in := sameInput(st); in != nil && !containsKind(o.inPlace, in.kind) {
			return usageErrorf("%s %s is also an input (%s %s): it would be overwritten; write to another file", o.flag, o.path, in.flag, in.path)
		}
		abs, _ := filepath.Abs(target)
		for _, prev := range outs {
			if (st != nil && prev.st != nil && os.SameFile(st, prev.st)) || prev.target == abs {
				return usageErrorf("%s %s and %s %s are the same file", prev.flag, prev.path, o.flag, o.path)
			}
		}
		outs = append(outs, seen{o, abs, st})
	}
	return nil
}

// parentDir is the directory path names as the kernel resolves it, without
// cleaning: "nodir/../x" is in "nodir/..", which does not exist when nodir
// does not, though filepath.Dir would say ".".
func parentDir(path string) string {
	i := strings.LastIndexByte(path, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return path[:i]
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func fdStat(fd int) (os.FileInfo, error) {
	// Stat of /proc/self/fd/N follows the descriptor to its file (Fstat
	// through os.NewFile would close the descriptor when collected).
	return os.Stat(fmt.Sprintf("/proc/self/fd/%d", fd))
}

func containsKind(ks []pathKind, k pathKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// checkTmpDir refuses, before any work, a --tmpdir that a spill would
// fail in hours later: one that is missing, not a directory or not
// writable.
func checkTmpDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return usageErrorf("--tmpdir %s: %v", dir, errors.Unwrap(err))
	case !st.IsDir():
		return usageErrorf("--tmpdir %s: not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return usageErrorf("--tmpdir %s: cannot write there: %v", dir, err)
	}
	return nil
}

// checkWritable tells, before any work, whether path can be published: a
// command must not fail after hours of work for want of a writable
// --stats-json.
func checkWritable(path string) error {
	target, through, err := atomicfile.Resolve(path)
	if err != nil || through {
		return err
	}
	dir := filepath.Dir(target)
	// Under a name of its own, whose lock nobody holds: Clean may remove it
	// under us, which is fine, but it is never a writer's temp file.
	f, err := tempfile.Create(dir, "fpdedup-check")
	if err != nil {
		return err
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
