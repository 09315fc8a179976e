package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// These tests run the fpdedup process itself (the test binary under the
// name fpdedup, see TestMain) where a script cannot: a signal sent while a
// merge is writing, and a file system that fills up under it.

// randomIndex writes an index of n random fingerprints (seeded) at path.
func randomIndex(t *testing.T, path string, n int, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	fps := make([]fpstore.Fingerprint, n)
	for i := range fps {
		fps[i] = fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
	}
	slices.SortFunc(fps, func(x, y fpstore.Fingerprint) int { return x.Compare(y) })
	fps = slices.Compact(fps)
	w, err := fpstore.Create(path, fpstore.WriterOptions{Spec: fpstore.Spec{Hash: "xxh3-128"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Add(fps...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// TestMergeInterrupted: SIGINT while the merged index is being written
// exits 130 and leaves neither the output nor its temp or lock file.
func TestMergeInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two 3M-key indexes")
	}
	bin := fpdedupLink(t)
	in := t.TempDir()
	a, b := filepath.Join(in, "a.fpx"), filepath.Join(in, "b.fpx")
	randomIndex(t, a, 3_000_000, 1)
	randomIndex(t, b, 3_000_000, 2)
	out := t.TempDir()
	cmd := exec.Command(bin, "merge", "-o", filepath.Join(out, "ab.fpx"), a, b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The temp file appears once the writer exists, after the signal
	// handler is installed; the merge then runs for a fraction of a second
	// at least.
	deadline := time.Now().Add(30 * time.Second)
	for {
		names := entries(t, out)
		if len(names) > 0 && tempfile.IsTemp(names[0]) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no temp file appeared in %s: %v", out, names)
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupt {
		t.Fatalf("merge interrupted: %v, want exit %d; stderr:\n%s", err, exitInterrupt, stderr.String())
	}
	if names := entries(t, out); len(names) != 0 {
		t.Fatalf("left behind after SIGINT: %v", names)
	}
	if !strings.Contains(stderr.String(), "interrupt") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
}

// TestOutputDiskFull: merge (k-way and stitched) and build onto a file
// system too small for the output, or spilling sorted runs to one, exit 2
// saying so, and leave nothing there. A 2 MiB tmpfs needs
// root (CI runs as root); elsewhere the test is skipped.
func TestOutputDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two 200k-key indexes")
	}
	full := t.TempDir()
	if err := syscall.Mount("tmpfs", full, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(full, 0) })
	bin := fpdedupLink(t)
	in := t.TempDir()
	a, b := filepath.Join(in, "a.fpx"), filepath.Join(in, "b.fpx")
	randomIndex(t, a, 200_000, 1)
	randomIndex(t, b, 200_000, 2)
	keys := filepath.Join(in, "keys.txt")
	var sb strings.Builder
	for i := range 200_000 {
		sb.WriteString("key-")
		sb.WriteString(strings.Repeat("x", i%7))
		sb.WriteString(time.Duration(i).String())
		sb.WriteByte('\n')
	}
	if err := os.WriteFile(keys, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for i := range 2 {
		p := filepath.Join(in, fmt.Sprintf("p%d.fpx", i))
		if out, err := exec.Command(bin, "build", "--partition", fmt.Sprintf("%d/2", i), "-o", p, keys).CombinedOutput(); err != nil {
			t.Fatalf("build --partition %d/2: %v\n%s", i, err, out)
		}
		parts = append(parts, p)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr; "" for ENOSPC's message
	}{
		{"merge partitions (stitch)", append([]string{"merge", "-o", filepath.Join(full, "p.fpx")}, parts...), ""},
		{"build spilling to a full --tmpdir", []string{"build", "--mem", "16MiB", "--tmpdir", full, "-o", filepath.Join(in, "spilled.fpx"), keys}, "not enough space in --tmpdir"},
		{"merge", []string{"merge", "-o", filepath.Join(full, "ab.fpx"), a, b}, ""},
		{"merge --subtract", []string{"merge", "--subtract", "-o", filepath.Join(full, "ab.fpx"), a, b}, ""},
		{"build", []string{"build", "-o", filepath.Join(full, "keys.fpx"), keys}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitError {
				t.Fatalf("%v on a full disk: %v, want exit %d; stderr:\n%s", tc.args, err, exitError, stderr.String())
			}
			want := tc.want
			if want == "" {
				want = "no space left on device"
			}
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say the disk is full:\n%s", stderr.String())
			}
			if names := entries(t, full); len(names) != 0 {
				t.Fatalf("left behind on the full file system: %v", names)
			}
		})
	}
}

// TestOutputsNotRegular: outputs naming a FIFO or a device are written
// through, as sort -o does: the FIFO's reader gets the bytes and the FIFO
// stays a FIFO; as root, /dev/null stays a character device (a rename
// over it would make it a regular file that every process then writes).
func TestOutputsNotRegular(t *testing.T) {
	bin := fpdedupLink(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("a\nb\na\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"dedup", "-q", "-o", fifo, in},
		{"dedup", "-q", "-o", filepath.Join(dir, "u.txt"), "--stats-json", fifo, in},
		{"build", "-q", "-o", fifo, in},
	} {
		got := make(chan []byte, 1)
		go func() {
			b, _ := os.ReadFile(fifo) // opens when the writer does, reads to its close
			got <- b
		}()
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		b := <-got
		if len(b) == 0 {
			t.Errorf("%v: the FIFO's reader got nothing", args)
		}
		if args[0] == "dedup" && args[3] == fifo && string(b) != "a\nb\nc\n" {
			t.Errorf("%v: the FIFO's reader got %q", args, b)
		}
		if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("%v: the FIFO is no longer one: %v %v", args, st.Mode(), err)
		}
	}
	for _, e := range entries(t, dir) {
		if tempfile.IsTemp(e) {
			t.Errorf("debris: %s", e)
		}
	}

	if os.Geteuid() != 0 {
		t.Skip("/dev/null is only at risk as root")
	}
	for _, args := range [][]string{
		{"dedup", "-q", "-o", "/dev/null", in},
		{"dedup", "-q", "--record", "/dev/null", in},
		{"build", "-q", "-o", "/dev/null", "--metrics", "/dev/null", in},
		{"merge", "-q", "-o", "/dev/null", "--stats-json", "/dev/null", filepath.Join(dir, "u.fpx")},
	} {
		if args[0] == "merge" {
			if out, err := exec.Command(bin, "build", "-q", "-o", filepath.Join(dir, "u.fpx"), in).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		}
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		st, err := os.Stat("/dev/null")
		if err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("%v turned /dev/null into %v (%v)", args, st.Mode(), err)
		}
	}
	for _, e := range entries(t, "/dev") {
		if tempfile.IsTemp(e) {
			t.Errorf("debris in /dev: %s", e)
		}
	}
}

// TestKilledRunDebrisCleaned: SIGKILL leaves a build's temp file beside its
// output, its lock file and its scratch directory of sorted runs in
// --tmpdir (the kernel drops its locks); the next run in those directories
// removes them, and never a live run's (TestFaultLoop and the scripts run
// writers side by side with this cleaning).
func TestKilledRunDebrisCleaned(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 3M-key input")
	}
	bin := fpdedupLink(t)
	in := filepath.Join(t.TempDir(), "keys.txt")
	var sb strings.Builder
	for i := range 3_000_000 {
		fmt.Fprintf(&sb, "key-%d\n", i)
	}
	if err := os.WriteFile(in, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, tmp := t.TempDir(), t.TempDir()
	debris := func() (beside, scratch []string) {
		for _, e := range entries(t, out) {
			if tempfile.IsTemp(e) {
				beside = append(beside, e)
			}
		}
		for _, e := range entries(t, tmp) {
			if tempfile.IsTemp(e) {
				scratch = append(scratch, e)
			}
		}
		return
	}
	var first []string
	for kill := 0; kill < 2; kill++ {
		cmd := exec.Command(bin, "build", "--mem", "16MiB", "--threads", "1", "--tmpdir", tmp, "-o", filepath.Join(out, "k.fpx"), in)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		fresh := func(names []string) bool {
			for _, n := range names {
				if strings.Contains(n, "-tmp-") || strings.Contains(n, "scratch") {
					if !slices.Contains(first, n) {
						return true
					}
				}
			}
			return false
		}
		for {
			beside, scratch := debris()
			if fresh(beside) && fresh(scratch) {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("no temp file and scratch directory appeared: %v %v", beside, scratch)
			}
			time.Sleep(time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		beside, scratch := debris()
		t.Logf("after SIGKILL %d: beside the output %v, in --tmpdir %v", kill+1, beside, scratch)
		if len(beside) == 0 || len(scratch) == 0 {
			t.Fatalf("SIGKILL left no debris to clean")
		}
		// The second killed run removed the first one's as it started.
		for _, f := range first {
			if strings.Contains(f, "-tmp-") || strings.Contains(f, "scratch") {
				if slices.Contains(beside, f) || slices.Contains(scratch, f) {
					t.Errorf("the second run left the first one's %s", f)
				}
			}
		}
		first = slices.Concat(beside, scratch)
	}
	// The next run in those directories cleans up (a small one: the
	// cleaning happens when it creates its own temp files).
	small := filepath.Join(t.TempDir(), "small.txt")
	if err := os.WriteFile(small, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command(bin, "build", "-q", "--mem", "16MiB", "--tmpdir", tmp, "-o", filepath.Join(out, "other.fpx"), small).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	if beside, _ := debris(); len(beside) > 0 {
		t.Errorf("beside the output after the next run: %v", beside)
	}
	// Sorted runs: a run that spills cleans --tmpdir when it makes its
	// scratch directory.
	if o, err := exec.Command(bin, "dedup", "-q", "--mem", "16MiB", "--threads", "1", "--tmpdir", tmp, "--record", filepath.Join(out, "r.fpx"), "-o", filepath.Join(out, "u.txt"), in).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, o)
	}
	if _, scratch := debris(); len(scratch) > 0 {
		t.Errorf("in --tmpdir after the next run: %v", scratch)
	}
}
