// Package atomicfile publishes files all at once: written to a temp file in
// the target's directory, fsynced, renamed over the target, and the
// directory fsynced, so a crash leaves the old file or the new one, never a
// torn one. A lock file next to the target makes a second writer fail fast.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked: another process is writing the same output.
var ErrLocked = errors.New("output is locked by another writer")

// File is a file being written for atomic publication.
type File struct {
	*os.File
	path string
	lock *os.File
	done bool
}

// Writes go straight to the file (os.File's Write); Commit's fsync then
// waits for all of it (0.4 s for a 620 MB index here). Starting writeback
// early with sync_file_range every 16 MiB cut that fsync to 0.02 s, but not
// the wall time of a 2x20M-key merge (medians of 6 interleaved runs, 1.28 s
// with, 1.23 s without; both alternate between ~1.1 and ~1.6 s from run to
// run on this VM's disk), so it was taken out again.

// lockPath is the lock file guarding writes to path.
func lockPath(path string) string { return path + ".lock" }

// Create locks path's lock file and opens a temp file beside path.
func Create(path string) (*File, error) {
	lock, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot create lock file: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(lockPath(path))
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w (pid %s); wait for it or pick another output", path, ErrLocked, strings.TrimSpace(string(owner)))
		}
		return nil, fmt.Errorf("cannot lock %s: %w", lockPath(path), err)
	}
	_ = lock.Truncate(0)
	_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		unlock(lock, path)
		return nil, fmt.Errorf("cannot create temp file for %s: %w", path, err)
	}
	// CreateTemp makes 0600; a published index is as readable as any file.
	umask := unix.Umask(0)
	unix.Umask(umask)
	if err := f.Chmod(0o666 &^ os.FileMode(umask)); err != nil {
		f.Close()
		os.Remove(f.Name())
		unlock(lock, path)
		return nil, fmt.Errorf("cannot chmod %s: %w", f.Name(), err)
	}
	return &File{File: f, path: path, lock: lock}, nil
}

func unlock(lock *os.File, path string) {
	// Removing before unlocking keeps a waiting writer from locking an
	// inode that is no longer at the lock path.
	_ = os.Remove(lockPath(path))
	_ = unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	_ = lock.Close()
}

// Commit publishes the temp file under the target name. Errors from Sync and
// Close count: a write-back failure must not publish a torn file.
func (a *File) Commit() error {
	if a.done {
		return errors.New("BUG: atomic file committed twice")
	}
	a.done = true
	defer unlock(a.lock, a.path)
	tmp := a.Name()
	if err := a.Sync(); err != nil {
		a.Close()
		os.Remove(tmp)
		return fmt.Errorf("cannot fsync %s: %w", tmp, err)
	}
	if err := a.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, a.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cannot publish %s: %w", a.path, err)
	}
	return syncDir(filepath.Dir(a.path))
}

// Abort removes the temp file; the target is untouched. Safe to call after
// Commit (then it does nothing) and more than once.
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.Close()
	os.Remove(a.Name())
	unlock(a.lock, a.path)
}

func syncDir(dir string) error {
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

// Done reports whether the file was committed or aborted.
func (a *File) Done() bool { return a.done }

// Path is the target name.
func (a *File) Path() string { return a.path }
