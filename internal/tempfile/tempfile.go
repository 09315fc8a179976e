// Package tempfile makes the temporary files and directories fpdedup writes
// before it publishes an output or while it spills work to disk, so that
// what a killed run leaves behind can be told from a live run's files and
// removed by the next run in that directory.
//
// Every such file or directory is covered by a flock(2) its owner holds for
// as long as it exists: the kernel drops the lock when the owner dies,
// however it dies (SIGKILL, OOM, power loss), so "unlocked" means "debris".
// A temp file beside an output is covered by the output's lock file (see
// LockPath), which its writer holds from before the temp file is made until
// after it is renamed or removed; a scratch directory by a lock on the
// directory itself. Pids in names would not do: a pid is reused, and a
// directory shared between containers sees other pid namespaces. Names
// carry a fixed marker so that Clean never touches a file fpdedup did not
// make.
package tempfile

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/failpoint"
)

// Markers in the names of what this package makes. Clean removes only
// names that carry one.
const (
	fileMarker = ".fpdedup-tmp-"    // .BASE.fpdedup-tmp-RAND, beside an output
	dirPrefix  = "fpdedup-scratch-" // fpdedup-scratch-RAND, in --tmpdir
	LockSuffix = ".fpdedup-lock"    // .BASE.fpdedup-lock, beside an output
)

// IsTemp reports whether name (a base name) is one this package makes or
// a lock file beside an output: what a clean run must not leave behind.
func IsTemp(name string) bool {
	return strings.Contains(name, fileMarker) || strings.HasPrefix(name, dirPrefix) || strings.HasSuffix(name, LockSuffix)
}

// globEscape quotes the glob metacharacters of a file name.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func random() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LockPath is the lock file of the output at path: hidden, beside it. Its
// writer holds it (atomicfile) while any temp file of that output exists.
func LockPath(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+stem(base)+LockSuffix)
}

// maxStem is the longest output name whose temp file name (".NAME" +
// fileMarker + 12 random digits) fits NAME_MAX, 255 bytes.
const maxStem = 255 - 1 - len(fileMarker) - 12

// stem is the part of an output's name that its temp and lock files carry:
// the name itself, or, for a name too long for them, its first bytes and a
// hash of the whole (distinct names stay distinct). stem(stem(b)) = stem(b),
// so Clean finds the lock of a temp file from the temp file's name.
func stem(base string) string {
	if len(base) <= maxStem {
		return base
	}
	sum := sha256.Sum256([]byte(base))
	return base[:maxStem-17] + "~" + hex.EncodeToString(sum[:8])
}

// Create makes a new temp file in dir for the output named base
// (".base.fpdedup-tmp-RAND", hidden), opened for writing. The caller must
// hold the output's lock (LockPath) until the file is renamed or removed.
// Clean first removes what dead runs left in dir, and since the caller
// holds base's lock, every temp file of base there is a dead run's too.
func Create(dir, base string) (*os.File, error) {
	Clean(dir)
	base = stem(base)
	if old, err := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+fileMarker+"*")); err == nil {
		for _, p := range old {
			os.Remove(p)
		}
	}
	for {
		name := filepath.Join(dir, "."+base+fileMarker+random())
		if err := failpoint.Hit(failpoint.Create, name); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		return f, err
	}
}

// lockOwn locks a directory this process just made, and reports false if a
// concurrent Clean removed it before the lock was taken (a Clean holds the
// lock while it removes, so after ours is granted the link count tells).
func lockOwn(f *os.File) (bool, error) {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return false, fmt.Errorf("cannot lock %s: %w", f.Name(), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false, fmt.Errorf("cannot stat %s: %w", f.Name(), err)
	}
	return st.Nlink > 0, nil
}

// Dir is a scratch directory in --tmpdir for one job's spilled files,
// locked while it exists. Files inside need no marker of their own.
type Dir struct {
	Path string
	lock *os.File
}

// MkDir makes a scratch directory in parent. Clean first removes what dead
// runs left there. Remove it when done.
func MkDir(parent string) (*Dir, error) {
	Clean(parent)
	for {
		name := filepath.Join(parent, dirPrefix+random())
		if err := failpoint.Hit(failpoint.Create, name); err != nil {
			return nil, err
		}
		if err := os.Mkdir(name, 0o700); err != nil {
			if errors.Is(err, os.ErrExist) {
				continue
			}
			return nil, err
		}
		d, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // a Clean took it before we could lock it: make another
		}
		if err != nil {
			os.Remove(name)
			return nil, err
		}
		ok, err := lockOwn(d)
		if err != nil {
			d.Close()
			os.RemoveAll(name)
			return nil, err
		}
		if ok {
			return &Dir{Path: name, lock: d}, nil
		}
		d.Close()
	}
}

// Remove deletes the directory and everything in it. Safe to call more
// than once.
func (d *Dir) Remove() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := os.RemoveAll(d.Path)
	d.lock.Close()
	d.lock = nil
	return err
}

// Clean removes, from dir, the temp files, scratch directories and lock
// files that no live process holds: a killed run's debris. It returns the
// names it removed. Errors are not reported: cleaning is a courtesy to the
// user, and a name it cannot remove is left as it was.
func Clean(dir string) []string {
	if dir == "" {
		dir = "."
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	temps := map[string][]string{} // an output's base name: its temp files
	var removed []string
	for _, de := range des {
		name := de.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, dirPrefix):
			if withLock(path, func() error { return os.RemoveAll(path) }) {
				removed = append(removed, path)
			}
		case strings.HasPrefix(name, ".") && strings.Contains(name, fileMarker):
			base := name[1:strings.LastIndex(name, fileMarker)]
			temps[base] = append(temps[base], path)
		}
	}
	for base, paths := range temps {
		lock := LockPath(filepath.Join(dir, base))
		remove := func() error {
			for _, p := range paths {
				if os.Remove(p) == nil {
					removed = append(removed, p)
				}
			}
			err := os.Remove(lock)
			if err == nil {
				removed = append(removed, lock)
			}
			return err
		}
		if _, err := os.Lstat(lock); errors.Is(err, os.ErrNotExist) {
			_ = remove() // no writer: they outlived it
		} else {
			withLock(lock, remove)
		}
	}
	// Lock files alone: a writer killed before it made its temp file.
	for _, de := range des {
		if name := de.Name(); strings.HasSuffix(name, LockSuffix) && len(temps[strings.TrimSuffix(name[1:], LockSuffix)]) == 0 {
			path := filepath.Join(dir, name)
			if withLock(path, func() error { return os.Remove(path) }) {
				removed = append(removed, path)
			}
		}
	}
	return removed
}

// withLock runs remove if no process holds path's lock, holding it itself
// meanwhile (so that a writer starting now waits, then sees the name gone
// or new), and reports whether remove succeeded.
func withLock(path string, remove func() error) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // a live owner
	}
	// The name must still be the file we locked.
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(path, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		return false
	}
	return remove() == nil
}
