// Package failpoint is the fault-injection seam of fpdedup's file I/O (in
// the manner of bbolt's failpoints and pebble's errorfs): every place that
// creates, writes, syncs, closes, renames or reads a file it publishes,
// spills or merges calls Hit first, and a test arms the Nth hit of some
// kinds of operation to fail. Tests then check, for every N, that the
// command fails cleanly: a clear error, the old output intact, no debris.
//
// Disarmed (always, outside tests), Hit is one atomic load.
package failpoint

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// Op is a kind of file operation.
type Op uint8

const (
	Create  Op = iota + 1 // creating a file or directory
	Write                 // write(2)
	Sync                  // fsync(2) of a file
	Close                 // close(2) of a file written
	Rename                // rename(2) publishing a file
	DirSync               // fsync(2) of the directory after a rename
	Read                  // read(2) or pread(2) of an input, run or index
	Open                  // opening an input, run or index
)

var opNames = [...]string{Create: "create", Write: "write", Sync: "fsync", Close: "close", Rename: "rename", DirSync: "directory fsync", Read: "read", Open: "open"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", o)
}

// Error is an injected fault.
type Error struct {
	Op   Op
	N    int64 // the hit that failed, 1-based, counting only armed kinds
	Path string
}

func (e *Error) Error() string {
	return fmt.Sprintf("injected fault: %s #%d of %s", e.Op, e.N, e.Path)
}

var (
	armed atomic.Bool
	mu    sync.Mutex
	kinds map[Op]bool
	fail  int64 // the hit to fail; 0: only count
	hits  int64
	log   []string
)

// Hit is called before an operation of kind op on path; it returns the
// injected error when this is the armed hit, else nil.
func Hit(op Op, path string) error {
	if !armed.Load() {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !kinds[op] {
		return nil
	}
	hits++
	log = append(log, fmt.Sprintf("%s %s", op, path))
	if hits == fail {
		return &Error{Op: op, N: hits, Path: path}
	}
	return nil
}

// Arm makes the nth hit (1-based) of the given kinds fail; n = 0 only
// counts. It returns a function that disarms and reports how many hits
// there were and what they were. For tests; not safe to arm twice at once.
func Arm(n int64, ops ...Op) (disarm func() (int64, []string)) {
	mu.Lock()
	kinds = map[Op]bool{}
	for _, o := range ops {
		kinds[o] = true
	}
	fail, hits, log = n, 0, nil
	mu.Unlock()
	armed.Store(true)
	return func() (int64, []string) {
		armed.Store(false)
		mu.Lock()
		defer mu.Unlock()
		return hits, log
	}
}

// Writer returns w with a Write hit before every write.
func Writer(w io.Writer, path string) io.Writer { return &writer{w, path} }

type writer struct {
	w    io.Writer
	path string
}

func (w *writer) Write(p []byte) (int, error) {
	if err := Hit(Write, w.path); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

// Reader returns r with a Read hit before every read.
func Reader(r io.Reader, path string) io.Reader { return &reader{r, path} }

type reader struct {
	r    io.Reader
	path string
}

func (r *reader) Read(p []byte) (int, error) {
	if err := Hit(Read, r.path); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
