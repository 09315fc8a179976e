package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

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
// exist and be writable. Two outputs that land in one place (one
// descriptor, one file, pipe or terminal under two names, the file or pipe
// behind stdout) are refused: their bytes would interleave, or the file
// renamed at the commit point would drop what was written through the
// other; /dev/null alone may take several, since nothing is kept there.

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
	stdout     bool        // outputs only: a stream that "" and "-" send to stdout
	optional   bool        // outputs only: dropped, not refused, when check fails it
	dropped    bool        // an optional output check failed
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

// reads tells whether the command reads an input of kind k.
func (p *ioPaths) reads(k pathKind) bool {
	return slices.ContainsFunc(p.inputs, func(in ioPath) bool { return in.kind == k })
}

// output declares a file written at path ("": none). "-" is not stdout
// here: check refuses it rather than create a file of that name.
func (p *ioPaths) output(flag, path string, inPlace ...pathKind) {
	if path != "" {
		p.outputs = append(p.outputs, ioPath{flag: flag, path: path, inPlace: inPlace})
	}
}

// stream declares an output written as the work goes: stdout for "" and
// "-", else a file as output has it.
func (p *ioPaths) stream(flag, path string, inPlace ...pathKind) {
	p.outputs = append(p.outputs, ioPath{flag: flag, path: path, inPlace: inPlace, stdout: path == "" || path == "-"})
}

// optional declares a file the job may write for later runs' sake (the
// device cache): checked as an output is, but one that cannot be written
// there, or that lands on an input or another output, is dropped with a
// warning rather than refused (usable says which).
func (p *ioPaths) optional(flag, path string) {
	if path != "" {
		p.outputs = append(p.outputs, ioPath{flag: flag, path: path, optional: true})
	}
}

// usable tells whether an optional output at path passed check.
func (p *ioPaths) usable(path string) bool {
	return slices.ContainsFunc(p.outputs, func(o ioPath) bool { return o.optional && o.path == path && !o.dropped })
}

// sink is where an output's bytes land, as check compares them.
type sink struct {
	ioPath
	fd  int     // the descriptor written through, or noFD
	id  *fileID // what is there now; nil for a file not yet made
	abs string  // a file renamed into place at the commit point
}

// fileID is what a stat says a file is, from a path or a descriptor.
type fileID struct {
	dev, ino, rdev uint64
	mode           uint32
}

func idOf(st os.FileInfo) *fileID {
	if st == nil {
		return nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return &fileID{dev: uint64(sys.Dev), ino: sys.Ino, rdev: uint64(sys.Rdev), mode: sys.Mode}
	}
	return nil
}

// fdID stats descriptor fd itself: wrapping it in an os.File would close
// it when collected.
func fdID(fd int) (*fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	return &fileID{dev: uint64(st.Dev), ino: st.Ino, rdev: uint64(st.Rdev), mode: st.Mode}, nil
}

func (id *fileID) same(o *fileID) bool {
	return id != nil && o != nil && id.dev == o.dev && id.ino == o.ino
}

func (id *fileID) regular() bool { return id != nil && id.mode&unix.S_IFMT == unix.S_IFREG }

// devNull: the character device 1:3, whatever its name.
func (id *fileID) devNull() bool {
	return id != nil && id.mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(id.rdev) == 1 && unix.Minor(id.rdev) == 3
}

// noFD: not written through a descriptor. stdoutFD: the command's stdout
// when it is not a file (a test's buffer), which only stdout streams use.
const (
	noFD     = -1
	stdoutFD = -2
)

// name is how a refusal names the output: its flag and path, or stdout.
func (s sink) name() string {
	if s.stdout && s.path == "" {
		return "stdout"
	}
	return s.flag + " " + s.path
}

// oneSink tells whether two outputs land in one place. /dev/null takes
// any number of them: nothing written there is kept.
func oneSink(a, b sink) bool {
	switch {
	case a.id.same(b.id):
		return !a.id.devNull()
	case a.fd != noFD && a.fd == b.fd:
		return !a.id.devNull()
	}
	return a.abs != "" && a.abs == b.abs
}

// check refuses, before any work, an output that names an input (unless in
// place), that lands where another output does, or whose directory does
// not exist. Standard input is an input when it is a regular file (<
// in.txt). It also makes inv say "nothing was published" when interrupted.
func (p *ioPaths) check(inv *invocation) error {
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
	sameInput := func(id *fileID) *ioPath {
		for i, in := range inputs {
			if inID := idOf(in.st); inID.regular() && inID.same(id) {
				return &inputs[i]
			}
		}
		return nil
	}
	var sinks []sink
	for i, o := range p.outputs {
		s, err := p.checkOutput(inv, o, sameInput, sinks)
		if err != nil && o.optional {
			fmt.Fprintf(inv.stderr, "fpdedup: warning: %v; it is not written\n", err)
			p.outputs[i].dropped = true
			continue
		}
		if err != nil {
			return err
		}
		if !o.stdout && !o.optional {
			inv.publishes = true
		}
		sinks = append(sinks, s)
	}
	return nil
}

// checkOutput is check's refusal of one output o, given the outputs
// checked before it.
func (p *ioPaths) checkOutput(inv *invocation, o ioPath, sameInput func(*fileID) *ioPath, sinks []sink) (sink, error) {
	s, err := p.sink(inv, o)
	if err != nil {
		return s, err
	}
	if s.abs == "" {
		// Written through what the shell set up: a regular file there
		// is appended to or overwritten in place, so no input may be
		// it, in place or not.
		if in := sameInput(s.id); in != nil {
			return s, usageErrorf("%s is also an input (%s %s): it would be written over while it is read; write to another file", s.name(), in.flag, in.path)
		}
	} else if in := sameInput(s.id); in != nil && !containsKind(o.inPlace, in.kind) {
		return s, usageErrorf("%s is also an input (%s %s): it would be overwritten; write to another file", s.name(), in.flag, in.path)
	}
	for _, prev := range sinks {
		if !oneSink(prev, s) {
			continue
		}
		if prev.abs != "" && s.abs != "" {
			return s, usageErrorf("%s and %s are the same file", prev.name(), s.name())
		}
		return s, usageErrorf("%s and %s write to one stream: their bytes would be mixed; write one of them elsewhere", prev.name(), s.name())
	}
	return s, nil
}

// sink resolves where o's bytes land, refusing a path that cannot be
// written.
func (p *ioPaths) sink(inv *invocation, o ioPath) (sink, error) {
	s := sink{ioPath: o, fd: noFD}
	if o.stdout {
		s.fd = stdoutFD
		if f := stdoutFile(inv.stdout); f != nil {
			// Through SyscallConn: Fd would put stdout in blocking mode.
			if c, err := f.SyscallConn(); err == nil {
				_ = c.Control(func(fd uintptr) { s.fd = int(fd) })
			}
			st, _ := f.Stat()
			s.id = idOf(st)
		}
		return s, nil
	}
	if o.path == "-" {
		return s, usageErrorf("%s -: this output is not written to stdout; name /dev/stdout to write it there, or ./- for a file named -", o.flag)
	}
	target, through, err := atomicfile.Resolve(o.path)
	if err != nil {
		return s, usageErrorf("%s: %v", o.flag, err)
	}
	if through {
		if fd, ok := atomicfile.Descriptor(target); ok {
			s.fd = fd
			if s.id, err = fdID(fd); err != nil {
				return s, usageErrorf("%s %s: descriptor %d is not open", o.flag, o.path, fd)
			}
		} else {
			st, _ := os.Stat(target)
			s.id = idOf(st)
		}
		return s, nil
	}
	if dir := parentDir(target); !isDir(dir) {
		return s, usageErrorf("%s %s: no directory %s to write it in", o.flag, o.path, dir)
	}
	if err := checkWritable(target); err != nil {
		return s, usageErrorf("%s %s: cannot write there: %v", o.flag, o.path, err)
	}
	st, _ := os.Stat(target)
	s.id = idOf(st)
	s.abs, _ = filepath.Abs(target)
	return s, nil
}

// stdoutFile is the file behind the command's stdout, nil when it is not
// one (a test's buffer).
func stdoutFile(w io.Writer) *os.File {
	if s, ok := w.(stdoutWriter); ok {
		w = s.w
	}
	f, _ := w.(*os.File)
	return f
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
