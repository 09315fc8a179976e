package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// Output paths and the commit point (README "Exit codes, outputs and signals").
//
// Every command declares the files it reads and the files it writes before
// it does any work. An output that is also an input is refused, unless the
// command is documented as working in place (merge -o H H x, dedup -o in
// in): overwriting an input would destroy it with exit 0. Outputs that are
// not regular files (/dev/null, a FIFO, /dev/stdout) are written through
// and take part in no check; symbolic links are judged by their target.
//
// Every output then joins one atomicfile.Group, which publishes them all at
// the command's single commit point, inv.commit: a signal before it means
// exit 130/143 and nothing published; after it, the work is done and is
// reported as done.

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
}

func (p *ioPaths) input(flag string, kind pathKind, paths ...string) {
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

// checkPaths declares the outputs every command may have (--stats-json,
// --metrics) besides its own, and checks them all.
func (inv *invocation) checkPaths(p *ioPaths) error {
	p.output("--stats-json", inv.statsJSON)
	p.output("--metrics", inv.metrics)
	return p.check(inv)
}

// commit is the command's commit point. The run's figures join the group
// (written and fsynced first, so that a --stats-json that cannot be written
// fails the run before anything is published); then, unless a signal came,
// every output is published. A directory that cannot be fsynced after the
// rename is a warning: the file is published, and the exit code says so.
func (inv *invocation) commit(ctx context.Context, grp *atomicfile.Group, stats map[string]any) error {
	if err := inv.finishStats(grp, stats); err != nil {
		grp.Abort()
		return err
	}
	hook("commit:before")
	err := grp.Commit(ctx)
	hook("commit:after")
	if err != nil && errors.Is(err, atomicfile.ErrNotDurable) {
		var pe *atomicfile.PublishError
		if !errors.As(err, &pe) {
			fmt.Fprintln(inv.stderr, "fpdedup: warning:", err)
			return nil
		}
	}
	return err
}

// finishStats writes --stats-json and --metrics into the group.
func (inv *invocation) finishStats(grp *atomicfile.Group, v map[string]any) error {
	if inv.statsJSON == "" && inv.metrics == "" {
		return nil
	}
	if inv.rss != nil {
		v["memory"] = inv.rss.peaks()
		inv.rss = nil
	}
	m, err := asMap(v)
	if err != nil {
		return err
	}
	if inv.statsJSON != "" {
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(grp, inv.statsJSON, append(b, '\n')); err != nil {
			return fmt.Errorf("cannot write --stats-json: %w", err)
		}
	}
	command, _ := m["command"].(string)
	return inv.writeMetrics(grp, command, m)
}

// testHook, when set (by the test binary only), is called at named stages
// of a run: "signal" once a signal has cancelled the run, "work" before a
// command's main work, "commit:before" and "commit:after" around the commit
// point. Tests use it to deliver a signal at an exact point.
var testHook func(stage string)

func hook(stage string) {
	if testHook != nil {
		testHook(stage)
	}
}

// interruptible runs work, which does not watch ctx (verify, inspect: they
// write nothing and hold no temp file), and returns as soon as ctx is done.
func interruptible(ctx context.Context, work func() error) error {
	hook("work")
	done := make(chan error, 1)
	go func() { done <- work() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return context.Cause(ctx)
		}
	}
}
