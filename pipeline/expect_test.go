package pipeline

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestKeysLeft: the keys a cold index is told to expect come from the
// records read per byte read, or, before any is counted, from the chunk
// at hand; inputs of unknown size tell nothing.
func TestKeysLeft(t *testing.T) {
	for _, c := range []struct {
		name                                     string
		total, read, recs, chunkRecs, chunkBytes int64
		want                                     uint64
		ok                                       bool
	}{
		{"counted", 33_000_000, 3_300_000, 100_000, 0, 0, 900_000, true},
		{"first chunk", 33_000_000, 1 << 20, 0, 31_775, 1 << 20, 968_224, true},
		{"all read", 1000, 1000, 10, 0, 0, 0, true},
		{"read past a file that grew", 1000, 2000, 10, 0, 0, 0, true},
		{"a pipe", -1, 1 << 20, 100, 0, 0, 0, false},
		{"nothing read", 1000, 0, 0, 10, 100, 0, false},
		{"an empty chunk", 1000, 100, 0, 0, 0, 0, false},
	} {
		got, ok := keysLeft(c.total, c.read, c.recs, c.chunkRecs, c.chunkBytes)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: keysLeft = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestInputSize: a regular file's size; standard input's bytes left when
// it is redirected from a file (past what was read of it before), and
// unknown from a pipe; any other file unknown.
func TestInputSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(path, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(300, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for _, c := range []struct {
		name  string
		opts  readOptions
		input string
		want  int64
	}{
		{"a file", readOptions{}, path, 1000},
		{"stdin from a file", readOptions{Stdin: f}, "-", 700},
		{"stdin from a pipe", readOptions{Stdin: pr}, "-", -1},
		{"stdin a reader", readOptions{Stdin: io.LimitReader(f, 10)}, "-", -1},
		{"a directory", readOptions{}, t.TempDir(), -1},
		{"no file", readOptions{}, filepath.Join(t.TempDir(), "none"), -1},
	} {
		if got := c.opts.inputSize(c.input); got != c.want {
			t.Errorf("%s: inputSize = %d, want %d", c.name, got, c.want)
		}
	}
}
