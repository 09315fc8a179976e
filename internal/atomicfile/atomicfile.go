// Package atomicfile publishes files all at once: written to a temp file in
// the target's directory, fsynced, renamed over the target, and the
// directory fsynced, so a crash leaves the old file or the new one, never a
// torn one. A lock file next to the target makes a second writer fail fast.
//
// What the target names decides how it is written:
//   - a regular file, or nothing yet: replaced atomically as above (an
//     existing file's permission bits are kept);
//   - a symbolic link: followed (to any depth), and its final target, not
//     the link, is replaced atomically;
//   - a character device, a FIFO or a socket (/dev/null, a named pipe,
//     /dev/stdout, /dev/fd/N): written through, as sort -o does; renaming
//     a file over /dev/null would turn it into a regular file.
//
// Several files that one command publishes together form a Group, which
// publishes them only when its Commit is called and the run was not
// interrupted: the command's one commit point.
package atomicfile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/failpoint"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// ErrLocked: another process is writing the same output.
var ErrLocked = errors.New("output is locked by another writer")

// ErrNotDurable wraps a failure to fsync a directory after the rename: the
// new file is in place but might not survive a crash.
var ErrNotDurable = errors.New("published, but the directory could not be fsynced")

// ErrReaderGone wraps a write to an output written through (a pipe, a FIFO,
// a descriptor) whose reader went away (EPIPE).
var ErrReaderGone = errors.New("the reader of the output went away")

type state uint8

const (
	writing  state = iota
	prepared       // synced and closed, not yet renamed
	done           // published or aborted
)

// File is a file being written for publication. Write it, then Commit (or
// hand it to a Group); Abort on any error. Not safe for concurrent use.
type File struct {
	f       *os.File
	w       io.Writer
	path    string // as the caller named it
	target  string // path with symbolic links followed
	through bool   // written in place: not a regular file
	scratch bool   // CreateScratch: never published, never fsynced
	grouped bool   // handed to a Group: only the group publishes or aborts it
	lock    *os.File
	state   state
	written int64 // bytes written
	started int64 // bytes whose writeback was started
	checks  []func(r io.ReaderAt, size int64) error
}

// writebackEvery: a temp file's writeback is started (sync_file_range
// SYNC_FILE_RANGE_WRITE, which does not wait) every 8 MiB written, as
// RocksDB's bytes_per_sync does, so that Prepare's fsync finds little left
// to write and the disk works while the command still computes: builds
// and merges finish sooner, a large merge close to its cat + dd floor
// (bench/results/ab-2026-12-03-s11.md).
const writebackEvery = 8 << 20

// Create prepares to write path: it locks the output, and opens a temp file
// beside its (symlink-resolved) target, or the target itself when that is
// not a regular file.
func Create(path string) (*File, error) {
	target, through, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	if through {
		if err := failpoint.Hit(failpoint.Create, target); err != nil {
			return nil, err
		}
		f, err := openThrough(target)
		if err != nil {
			return nil, fmt.Errorf("cannot open %s: %w", path, err)
		}
		return &File{f: f, w: failpoint.Writer(f, target), path: path, target: target, through: true}, nil
	}
	lock, err := lockTarget(target)
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	f, err := tempfile.Create(dir, base)
	if err != nil {
		unlock(lock, target)
		return nil, fmt.Errorf("cannot create temp file for %s: %w", path, err)
	}
	// The temp file is 0600; the published file gets what a new file gets
	// (0666 less the umask), or the permission bits of the file it replaces.
	mode := 0o666 &^ umask()
	if st, err := os.Stat(target); err == nil {
		mode = st.Mode().Perm()
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		unlock(lock, target)
		return nil, fmt.Errorf("cannot chmod %s: %w", f.Name(), err)
	}
	return &File{f: f, w: failpoint.Writer(f, f.Name()), path: path, target: target, lock: lock}, nil
}

// CreateScratch makes a new file at path that is written like a File but
// never published: a temporary of the run itself (a sorted run in a
// tempfile.Dir), which a crash may lose since nothing needs it afterwards.
// It is not fsynced; Commit only closes it, Abort removes it.
func CreateScratch(path string) (*File, error) {
	if err := failpoint.Hit(failpoint.Create, path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &File{f: f, w: failpoint.Writer(f, path), path: path, target: path, scratch: true}, nil
}

// Resolve says where writing path goes: its final target after symbolic
// links, and whether that is written through (not a regular file).
func Resolve(path string) (target string, through bool, err error) {
	if _, ok := Descriptor(path); ok {
		return path, true, nil
	}
	p := path
	for hops := 0; ; hops++ {
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			return p, false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("cannot write %s: %w", path, err)
		}
		switch m := st.Mode(); {
		case m&os.ModeSymlink != 0:
			if hops >= 40 {
				return "", false, fmt.Errorf("cannot write %s: too many levels of symbolic links", path)
			}
			link, err := os.Readlink(p)
			if err != nil {
				return "", false, fmt.Errorf("cannot write %s: %w", path, err)
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(p), link)
			}
			if _, ok := Descriptor(link); ok {
				return link, true, nil
			}
			p = link
		case m.IsRegular():
			return p, false, nil
		case m.IsDir():
			return "", false, fmt.Errorf("cannot write %s: it is a directory", path)
		default:
			return p, true, nil
		}
	}
}

// Descriptor is the descriptor a path of this process's own descriptors
// names (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N), or false.
// Such a path is written through whatever the descriptor points at (a
// redirected stdout may be a regular file that the shell holds open:
// replacing it would lose the output).
func Descriptor(path string) (int, bool) {
	p := filepath.Clean(path)
	switch p {
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	}
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/"} {
		if rest, ok := strings.CutPrefix(p, dir); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	return 0, false
}

// openThrough opens a target that is written in place. A descriptor path
// is written through the descriptor itself, as the shell set it up (its
// offset, O_APPEND): opening /dev/stdout anew would make a new file
// description at offset 0 and write over what `>>` was to append to.
func openThrough(target string) (*os.File, error) {
	if fd, ok := Descriptor(target); ok {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "dup", Path: target, Err: err}
		}
		return os.NewFile(uintptr(dup), target), nil
	}
	return os.OpenFile(target, os.O_WRONLY, 0)
}

var (
	umaskOnce sync.Once
	umaskBits os.FileMode
)

// umask reads the process's umask from /proc (umask(2) can only read it by
// setting it, which would race with files other goroutines create).
func umask() os.FileMode {
	umaskOnce.Do(func() {
		umaskBits = 0o022
		b, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					umaskBits = os.FileMode(n)
				}
			}
		}
	})
	return umaskBits
}

// lockTarget takes the lock of target's lock file, recording our pid in it.
// The lock file is removed when the writer is done, so the lock taken must
// be on the inode still at that name; and a tempfile.Clean may hold a stale
// lock file's lock for a moment while it removes it, so a lock held by no
// live pid is retried for a while.
func lockTarget(target string) (*os.File, error) {
	lp := tempfile.LockPath(target)
	for attempt := 0; ; attempt++ {
		lock, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("cannot create lock file %s: %w", lp, err)
		}
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			var a, b unix.Stat_t
			if unix.Fstat(int(lock.Fd()), &a) == nil && unix.Stat(lp, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino {
				_ = lock.Truncate(0)
				_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
				return lock, nil
			}
			lock.Close() // removed by its last owner meanwhile: lock the new one
			continue
		}
		owner, _ := os.ReadFile(lp)
		lock.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("cannot lock %s: %w", lp, err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(owner)))
		if attempt < 20 && (pid <= 0 || unix.Kill(pid, 0) == unix.ESRCH) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		return nil, fmt.Errorf("%s: %w (pid %s); wait for it or pick another output", target, ErrLocked, strings.TrimSpace(string(owner)))
	}
}

func unlock(lock *os.File, target string) {
	if lock == nil {
		return
	}
	// Removing before unlocking: a writer waiting for this lock then finds
	// the name gone or new (lockTarget checks the inode).
	_ = os.Remove(tempfile.LockPath(target))
	_ = unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	_ = lock.Close()
}

// Write writes to the temp file (or through to the target).
func (a *File) Write(p []byte) (int, error) {
	if a.state != writing {
		return 0, errors.New("BUG: write to an atomic file after Prepare")
	}
	n, err := a.w.Write(p)
	if a.through && errors.Is(err, unix.EPIPE) {
		err = fmt.Errorf("%w: %s: %w", ErrReaderGone, a.path, err)
	}
	a.written += int64(n)
	if a.written-a.started >= writebackEvery && !a.through && !a.scratch {
		startWriteback(a.f, a.started, a.written-a.started)
		a.started = a.written
	}
	return n, err
}

// Name is the file being written: the temp file, or the target when it is
// written through.
func (a *File) Name() string { return a.f.Name() }

// Path is the target as the caller named it.
func (a *File) Path() string { return a.path }

// Through reports whether the target is written in place (not a regular
// file): then nothing is atomic about it.
func (a *File) Through() bool { return a.through }

// Done reports whether the file was published or aborted.
func (a *File) Done() bool { return a.state == done }

// ReadBack has check read the file as written, from its start, before
// Prepare makes it durable: a writer's claim that its output is whole is
// checked on the bytes that will be published, and a failed check
// publishes nothing. A file written through (a pipe, a descriptor) is not
// read back.
func (a *File) ReadBack(check func(r io.ReaderAt, size int64) error) {
	a.checks = append(a.checks, check)
}

// Prepare makes the written bytes durable (fsync, close) without
// publishing them. Errors from Sync and Close count: a write-back failure
// must not publish a torn file. On error the file is aborted.
func (a *File) Prepare() error {
	if a.state != writing {
		return errors.New("BUG: atomic file prepared twice")
	}
	if !a.through {
		for _, check := range a.checks {
			if err := check(a.f, a.written); err != nil {
				a.Abort()
				return err
			}
		}
	}
	if a.scratch {
		err := failpoint.Hit(failpoint.Close, a.Name())
		if cerr := a.f.Close(); err == nil {
			err = cerr
		}
		a.state = prepared
		if err != nil {
			a.Abort()
			return fmt.Errorf("cannot close %s: %w", a.Name(), err)
		}
		return nil
	}
	if err := a.sync(); err != nil {
		a.Abort()
		return fmt.Errorf("cannot fsync %s: %w", a.Name(), err)
	}
	if !a.through {
		err := failpoint.Hit(failpoint.Close, a.Name())
		if cerr := a.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			a.state = prepared // closed: Abort must not close it again
			a.Abort()
			return fmt.Errorf("cannot close %s: %w", a.Name(), err)
		}
	}
	a.state = prepared
	return nil
}

func (a *File) sync() error {
	if err := failpoint.Hit(failpoint.Sync, a.Name()); err != nil {
		return err
	}
	err := a.f.Sync()
	if a.through && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EROFS)) {
		return nil // a pipe, a terminal, /dev/null: nothing to make durable
	}
	return err
}

// Publish renames the prepared temp file over the target and fsyncs the
// directory. An error wrapping ErrNotDurable means the file is published
// all the same.
func (a *File) Publish() error {
	if a.state != prepared {
		return errors.New("BUG: atomic file published before Prepare or twice")
	}
	a.state = done
	if a.scratch {
		return nil
	}
	if a.through {
		err := failpoint.Hit(failpoint.Close, a.Name())
		if cerr := a.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("cannot close %s: %w", a.path, err)
		}
		return nil
	}
	defer unlock(a.lock, a.target)
	tmp := a.Name()
	err := failpoint.Hit(failpoint.Rename, a.target)
	if err == nil {
		err = os.Rename(tmp, a.target)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot publish %s: %w", a.path, err)
	}
	if err := syncDir(filepath.Dir(a.target)); err != nil {
		return fmt.Errorf("%s: %w: %v", a.path, ErrNotDurable, err)
	}
	return nil
}

// Commit prepares and publishes the file.
func (a *File) Commit() error {
	if err := a.Prepare(); err != nil {
		return err
	}
	return a.Publish()
}

// Abort removes the temp file; the target is untouched (a target written
// through keeps what was written). Safe to call after Commit or once the
// file is a Group's (then it does nothing: a deferred Abort must not undo
// what the group will publish), and more than once.
func (a *File) Abort() {
	if a.grouped {
		return
	}
	a.abort()
}

func (a *File) abort() {
	if a.state == done {
		return
	}
	if a.state == writing || a.through {
		a.f.Close()
	}
	a.state = done
	if !a.through {
		os.Remove(a.Name())
		unlock(a.lock, a.target) // nil for scratch files
	}
}

func syncDir(dir string) error {
	if err := failpoint.Hit(failpoint.DirSync, dir); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open directory %s to fsync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("cannot fsync directory %s: %w", dir, err)
	}
	return nil
}

// WriteFile publishes data at path atomically (or with g, when g commits).
func WriteFile(g *Group, path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		f.Abort()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Abort()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return g.Finish(f)
}

// Group publishes the files of one command together, at its commit point.
// Safe for concurrent use.
type Group struct {
	mu    sync.Mutex
	files []*File
	done  bool
}

// Finish takes a file written in full. With a nil Group it is published at
// once; otherwise it is made durable now (so that failures show before the
// commit point) and published when the group commits.
func (g *Group) Finish(f *File) error {
	if g == nil {
		return f.Commit()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		f.Abort()
		return errors.New("BUG: file finished after its group was committed or aborted")
	}
	if err := f.Prepare(); err != nil {
		return err
	}
	f.grouped = true
	g.files = append(g.files, f)
	return nil
}

// Paths lists the targets of the files the group holds.
func (g *Group) Paths() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []string
	for _, f := range g.files {
		ps = append(ps, f.path)
	}
	return ps
}

// PublishError: some of a group's files were published and one could not
// be; the rest were not.
type PublishError struct {
	Published []string
	Err       error
}

func (e *PublishError) Error() string {
	if len(e.Published) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v (already published: %s)", e.Err, strings.Join(e.Published, ", "))
}

func (e *PublishError) Unwrap() error { return e.Err }

// Commit publishes the group's files, in the order they were finished,
// unless ctx is done: then nothing is published and the context's cause is
// returned. It is the command's commit point. Errors wrapping ErrNotDurable
// leave the files published.
func (g *Group) Commit(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return errors.New("BUG: group committed twice")
	}
	g.done = true
	if err := context.Cause(ctx); err != nil {
		for _, f := range g.files {
			f.abort()
		}
		return err
	}
	var published []string
	var errs []error
	for i, f := range g.files {
		err := f.Publish()
		if err != nil && !errors.Is(err, ErrNotDurable) {
			for _, rest := range g.files[i+1:] {
				rest.abort()
			}
			return &PublishError{Published: published, Err: err}
		}
		published = append(published, f.path)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Abort removes every file not yet published. Safe after Commit.
func (g *Group) Abort() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.done = true
	for _, f := range g.files {
		f.abort()
	}
}
