package atomicfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fpdedup/fpdedup/internal/tempfile"
)

func write(t *testing.T, f *File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noDebris fails if dir holds a temp or lock file.
func noDebris(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if tempfile.IsTemp(de.Name()) {
			t.Errorf("debris in %s: %s", dir, de.Name())
		}
	}
}

func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "new")
	if got := read(t, path); got != "old" {
		t.Fatalf("the target changed before Commit: %q", got)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != "new" {
		t.Fatalf("after Commit: %q", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("the replaced file's mode was %v, want 0640 kept", st.Mode().Perm())
	}
	f.Abort() // after Commit: nothing
	if got := read(t, path); got != "new" {
		t.Fatalf("Abort after Commit changed the target: %q", got)
	}

	g, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, g, "newer")
	g.Abort()
	if got := read(t, path); got != "new" {
		t.Fatalf("after Abort: %q", got)
	}
	noDebris(t, dir)
}

func TestSecondWriterLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	_, err = Create(path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("a second writer: %v, want ErrLocked naming the pid", err)
	}
}

// TestSymlinks: a symlink's final target is replaced, the links stay;
// a dangling link creates its target.
func TestSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "sub", "real")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	l1, l2 := filepath.Join(dir, "l1"), filepath.Join(dir, "l2")
	if err := os.Symlink("sub/real", l1); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(l1, l2); err != nil {
		t.Fatal(err)
	}
	f, err := Create(l2)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{l1, l2} {
		if st, err := os.Lstat(l); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink", l)
		}
	}
	if got := read(t, real); got != "new" {
		t.Errorf("the target holds %q", got)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("sub/created", dangling); err != nil {
		t.Fatal(err)
	}
	f, err = Create(dangling)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "x")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "sub", "created")); got != "x" {
		t.Errorf("a dangling link's target holds %q", got)
	}
	noDebris(t, dir)
	noDebris(t, filepath.Join(dir, "sub"))
}

func TestNotRegular(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("a directory as output: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- string(b)
	}()
	f, err := Create(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Through() {
		t.Error("a FIFO is not written through")
	}
	write(t, f, "through")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through" {
		t.Errorf("the FIFO's reader got %q", s)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is no longer one")
	}
	for _, p := range []string{"/dev/stdout", "/dev/fd/1", "/proc/self/fd/2"} {
		if _, through, err := Resolve(p); err != nil || !through {
			t.Errorf("Resolve(%s): through %v, %v", p, through, err)
		}
	}
	noDebris(t, dir)
}

// TestGroup: files finished into a group are published by its Commit only,
// not at all when the context is done, and a deferred Abort of a finished
// file does not undo the group.
func TestGroup(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, cancelled := range []bool{true, false} {
		for _, p := range []string{a, b} {
			if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		g := &Group{}
		fa, err := Create(a)
		if err != nil {
			t.Fatal(err)
		}
		write(t, fa, "A")
		if err := g.Finish(fa); err != nil {
			t.Fatal(err)
		}
		fa.Abort() // a writer's deferred Abort: the group's now
		if err := WriteFile(g, b, []byte("B")); err != nil {
			t.Fatal(err)
		}
		if read(t, a) != "old" || read(t, b) != "old" {
			t.Fatal("published before the group committed")
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("a signal")
		if cancelled {
			cancel(stop)
		}
		err = g.Commit(ctx)
		cancel(nil)
		if cancelled {
			if !errors.Is(err, stop) || read(t, a) != "old" || read(t, b) != "old" {
				t.Fatalf("a cancelled group: %v, a=%q b=%q", err, read(t, a), read(t, b))
			}
		} else if err != nil || read(t, a) != "A" || read(t, b) != "B" {
			t.Fatalf("a committed group: %v, a=%q b=%q", err, read(t, a), read(t, b))
		}
		g.Abort()
		noDebris(t, dir)
	}
	var nilGroup *Group
	if err := WriteFile(nilGroup, a, []byte("now")); err != nil || read(t, a) != "now" {
		t.Fatalf("a nil group publishes at once: %v %q", err, read(t, a))
	}
}

func TestDescriptor(t *testing.T) {
	for _, c := range []struct {
		path string
		fd   int
		ok   bool
	}{
		{"/dev/stdout", 1, true},
		{"/dev/stderr", 2, true},
		{"/dev/fd/3", 3, true},
		{"/proc/self/fd/12", 12, true},
		{"/dev/fd/../fd/4", 4, true},
		{"/dev/fd/x", 0, false},
		{"/dev/fd/-1", 0, false},
		{"/dev/null", 0, false},
		{"/proc/1/fd/1", 0, false},
		{"out.txt", 0, false},
	} {
		fd, ok := Descriptor(c.path)
		if fd != c.fd || ok != c.ok {
			t.Errorf("Descriptor(%q) = %d, %v; want %d, %v", c.path, fd, ok, c.fd, c.ok)
		}
	}
}

// TestReadBack: a file's checks read what was written, every byte, before
// it is made durable; a check that fails leaves the old target and no
// debris, and returns its error. A file written through is not read back.
func TestReadBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("not what was written")
	for _, tc := range []struct {
		name string
		want error
	}{{"read back", nil}, {"refused", refuse}} {
		f, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		write(t, f, "new bytes")
		var got string
		f.ReadBack(func(r io.ReaderAt, size int64) error {
			b := make([]byte, size)
			if _, err := r.ReadAt(b, 0); err != nil {
				return err
			}
			got = string(b)
			return tc.want
		})
		var g Group
		if err := g.Finish(f); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != "new bytes" {
			t.Fatalf("%s: the check read %q", tc.name, got)
		}
		if err := g.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		if want := map[error]string{nil: "new bytes", refuse: "old"}[tc.want]; read(t, path) != want {
			t.Fatalf("%s: the target holds %q", tc.name, read(t, path))
		}
		if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		noDebris(t, dir)
	}
	// Written through (a FIFO's reader could not read it back): not read.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		b, _ := os.ReadFile(fifo)
		done <- b
	}()
	f, err := Create(fifo)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "through")
	f.ReadBack(func(io.ReaderAt, int64) error { return refuse })
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if b := <-done; string(b) != "through" {
		t.Fatalf("the FIFO read %q", b)
	}
}
