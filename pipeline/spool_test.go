package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/failpoint"
)

// TestStdinSpoolWriteError: when the copy of stdin kept for a second pass
// cannot be written (its directory full, a write failing), the error is
// the temporary directory's: a *TmpDirError naming it, saying "cannot
// write" and keeping the cause, not a read error of "-". Plain and gzip
// stdin, the spool of count and dedup --keep last (made in TmpDir by
// twoPasses; its writes go through the fault seam) and the one --check's
// caller hands in (here on /dev/full: no space left on device).
func TestStdinSpoolWriteError(t *testing.T) {
	// Several reads of the raw input, gzip'd too (hex of a hash does not
	// compress much).
	var plain []byte
	for i := range 100_000 {
		plain = fmt.Appendf(plain, "line %d %x\n", i, uint64(i)*0x9e3779b97f4a7c15)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	records := func() ingest.RecordOptions {
		bad, _ := ingest.ParseOnBad("fail")
		return ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}, Hash: ingest.XXH3, OnBad: bad}
	}
	// twoPasses' spool: the nth write fails.
	spooled := func(n int64) func(t *testing.T, dir string, stdin io.Reader) error {
		return func(t *testing.T, dir string, stdin io.Reader) error {
			disarm := failpoint.Arm(n, failpoint.Write)
			defer disarm()
			_, err := Dedup(context.Background(), DedupOptions{Inputs: []string{"-"}, Stdin: stdin, Records: records(), KeepLast: true, Threads: 2, Mem: 64 << 20, TmpDir: dir}, io.Discard)
			return err
		}
	}
	// The caller's spool, on a device that is always full.
	full := func(t *testing.T, dir string, stdin io.Reader) error {
		f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			t.Skipf("no /dev/full: %v", err)
		}
		defer f.Close()
		_, err = Dedup(context.Background(), DedupOptions{Inputs: []string{"-"}, Stdin: stdin, Spool: f, Records: records(), Threads: 2, Mem: 64 << 20, TmpDir: dir}, io.Discard)
		return err
	}
	var injected *failpoint.Error
	for _, c := range []struct {
		name  string
		input []byte
		run   func(t *testing.T, dir string, stdin io.Reader) error
		cause func(error) bool
	}{
		{"spool, first write", plain, spooled(1), func(err error) bool { return errors.As(err, &injected) }},
		{"spool, third write", plain, spooled(3), func(err error) bool { return errors.As(err, &injected) }},
		{"gzip spool, first write", gz.Bytes(), spooled(1), func(err error) bool { return errors.As(err, &injected) }},
		{"gzip spool, second write", gz.Bytes(), spooled(2), func(err error) bool { return errors.As(err, &injected) }},
		{"device full", plain, full, func(err error) bool { return errors.Is(err, syscall.ENOSPC) }},
		{"gzip, device full", gz.Bytes(), full, func(err error) bool { return errors.Is(err, syscall.ENOSPC) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			err := c.run(t, dir, bytes.NewReader(c.input))
			var te *TmpDirError
			switch {
			case err == nil:
				t.Fatal("no error")
			case !errors.As(err, &te) || te.Dir != dir:
				t.Fatalf("not a *TmpDirError naming %s: %v", dir, err)
			case !strings.Contains(err.Error(), "cannot write the spool of standard input") || strings.Contains(err.Error(), "cannot read"):
				t.Fatalf("does not say the spool could not be written: %v", err)
			case !c.cause(err):
				t.Fatalf("the cause is lost: %v", err)
			}
		})
	}
}
