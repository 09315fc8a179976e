package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// raceBuild is set by race_test.go under -race.
var raceBuild bool

// TestBombsHoldMem: a decompression bomb (128 MiB of zeros, no line end:
// one record far over the limit) is refused as too long, and the process
// stays within the README's bound, max(--mem, 64 MiB) + 16 MiB, under
// --mem 64MiB: the longest record --mem holds is an eighth of it (a record
// is held whole, twice while it grows). It peaked at 148 MB when the
// default --max-record (64MiB) did not depend on --mem.
func TestBombsHoldMem(t *testing.T) {
	bin := fpdedupLink(t)
	dir := t.TempDir()
	zeros := make([]byte, 1<<20)
	bombs := map[string]func(io.Writer) (io.WriteCloser, error){
		"bomb.gz": func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, gzip.BestSpeed) },
		"bomb.zst": func(w io.Writer) (io.WriteCloser, error) {
			return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
		},
	}
	for name, newWriter := range bombs {
		var buf bytes.Buffer
		zw, err := newWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		for range 128 {
			if _, err := zw.Write(zeros); err != nil {
				t.Fatal(err)
			}
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const bound = 80 << 20
	for _, args := range [][]string{
		{"dedup"}, {"dedup", "--keep", "last"}, {"count"}, {"build", "-o", filepath.Join(dir, "x.fpx")},
	} {
		for name := range bombs {
			t.Run(strings.Join(args[:min(len(args), 3)], " ")+"/"+name, func(t *testing.T) {
				cmd := exec.Command(bin, append(append(args, "--mem", "64MiB", "--tmpdir", dir), filepath.Join(dir, name))...)
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = io.Discard, &stderr
				err := cmd.Run()
				if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "record too long") {
					t.Fatalf("%v: want exit 2, record too long; stderr %s", err, stderr.String())
				}
				peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
				if raceBuild {
					t.Logf("peak RSS %d MiB under -race: the bound is not checked (the detector's shadow memory)", peak>>20)
				} else if peak > bound {
					t.Errorf("peak RSS %d MiB, over the %d MiB bound", peak>>20, bound>>20)
				}
			})
		}
	}
}
