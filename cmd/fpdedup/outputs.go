package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	inPlace    []pathKind // outputs only: the inputs it may replace
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
// output. It also makes inv say "nothing was published" when interrupted.
func (p *ioPaths) check(inv *invocation) error {
	type seen struct {
		ioPath
		target string
		st     os.FileInfo
	}
	var outs []seen
	for _, o := range p.outputs {
		target, through, err := atomicfile.Resolve(o.path)
		if err != nil {
			return usageErrorf("%s: %v", o.flag, err)
		}
		inv.publishes = true
		if through {
			continue
		}
		st, _ := os.Stat(target)
		for _, in := range p.inputs {
			ist, err := os.Stat(in.path)
			if err != nil || !ist.Mode().IsRegular() || st == nil || !os.SameFile(st, ist) {
				continue
			}
			if !containsKind(o.inPlace, in.kind) {
				return usageErrorf("%s %s is also an input (%s %s): it would be overwritten; write to another file", o.flag, o.path, in.flag, in.path)
			}
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
