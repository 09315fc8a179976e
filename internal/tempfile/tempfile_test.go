package tempfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClean removes what no live owner covers and nothing else: a dead
// writer's temp and lock files, a dead run's scratch directory; it keeps a
// temp file whose output lock is held, a locked scratch directory, and
// names fpdedup did not make.
func TestClean(t *testing.T) {
	dir := t.TempDir()
	live, err := MkDir(dir) // first: MkDir cleans too
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	// Dead: a temp file and lock file of "a", a lone lock of "b", a
	// scratch directory with a run in it.
	touch(t, filepath.Join(dir, ".a"+fileMarker+"1"))
	touch(t, LockPath(filepath.Join(dir, "a")))
	touch(t, LockPath(filepath.Join(dir, "b")))
	if err := os.MkdirAll(filepath.Join(dir, dirPrefix+"dead", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Live: "c"'s lock held (another open file description, as another
	// process would), its temp file; a scratch directory from MkDir.
	lock, err := os.OpenFile(LockPath(filepath.Join(dir, "c")), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(dir, ".c"+fileMarker+"2"))
	// Not ours.
	for _, n := range []string{"out.lock", ".x.tmp-1", "fpdedup-run-1.tmp", "a"} {
		touch(t, filepath.Join(dir, n))
	}

	removed := Clean(dir)
	got := names(t, dir)
	for _, n := range []string{".a" + fileMarker + "1", ".a" + LockSuffix, ".b" + LockSuffix, dirPrefix + "dead"} {
		if slices.Contains(got, n) {
			t.Errorf("dead %s kept", n)
		}
	}
	for _, n := range []string{".c" + LockSuffix, ".c" + fileMarker + "2", filepath.Base(live.Path), "out.lock", ".x.tmp-1", "fpdedup-run-1.tmp", "a"} {
		if !slices.Contains(got, n) {
			t.Errorf("%s removed", n)
		}
	}
	if len(removed) != 4 {
		t.Errorf("removed %v", removed)
	}
	if err := live.Remove(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(t, dir), filepath.Base(live.Path)) {
		t.Error("Remove left the scratch directory")
	}
}

// TestCreateRemovesOwnStale: a writer holding an output's lock removes
// that output's older temp files (its own lock hides them from Clean).
func TestCreateRemovesOwnStale(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".o[1]"+fileMarker+"old")
	touch(t, stale)
	other := filepath.Join(dir, ".o[2]"+fileMarker+"old")
	touch(t, other)
	f, err := Create(dir, "o[1]")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the output's stale temp file is still there")
	}
	// other has no lock file: Clean removed it as a dead writer's.
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("a dead writer's temp file is still there")
	}
}

// TestMkDirRacesClean: scratch directories made while other runs clean the
// same parent are never taken from under their maker (a Clean between
// Mkdir and the lock used to make MkDir fail with "no such file").
func TestMkDirRacesClean(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				Clean(dir)
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		d, err := MkDir(dir)
		if err != nil {
			close(stop)
			<-done
			t.Fatalf("MkDir %d: %v", i, err)
		}
		if err := os.WriteFile(filepath.Join(d.Path, "run"), nil, 0o600); err != nil {
			close(stop)
			<-done
			t.Fatalf("the scratch directory went away under its owner: %v", err)
		}
		if err := d.Remove(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}

// TestLongNames: an output whose name is as long as a name can be (255
// bytes) still gets a temp file and a lock beside it, distinct from those of
// another long name with the same first bytes, and Clean still finds a dead
// run's debris of it.
func TestLongNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{maxStem, maxStem + 1, 240, 255} {
		for _, last := range []string{"a", "b"} {
			base := strings.Repeat("x", n-1) + last
			if err := os.WriteFile(filepath.Join(dir, base), nil, 0o600); err != nil {
				t.Fatalf("%d bytes: the test's own name does not fit: %v", n, err)
			}
			f, err := Create(dir, base)
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			f.Close()
			lock := LockPath(filepath.Join(dir, base))
			if err := os.WriteFile(lock, nil, 0o600); err != nil {
				t.Fatalf("%d bytes: lock %s: %v", n, filepath.Base(lock), err)
			}
			// No one holds the lock: the temp file and the lock are debris.
			removed := Clean(dir)
			if !slices.Contains(removed, f.Name()) || !slices.Contains(removed, lock) {
				t.Errorf("%d bytes %s: Clean removed %v, want %s and %s; left %v", n, last, removed, f.Name(), lock, names(t, dir))
			}
			if stem(stem(base)) != stem(base) {
				t.Errorf("%d bytes: stem is not stable", n)
			}
		}
		if n > maxStem && stem(strings.Repeat("x", n-1)+"a") == stem(strings.Repeat("x", n-1)+"b") {
			t.Errorf("%d bytes: two names share a stem", n)
		}
	}
}
