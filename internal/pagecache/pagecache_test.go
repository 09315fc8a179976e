package pagecache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDrop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".empty", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := Drop(path + ".empty"); err != nil || r != 0 {
		t.Fatalf("Drop(empty) = %v, %v", r, err)
	}
	r, err := Drop(path)
	if err != nil {
		t.Fatal(err)
	}
	if r < 0 || r > 1 {
		t.Fatalf("resident fraction %v", r)
	}
	// Dirty pages cannot be dropped until written back; after fsync
	// they can, except where the page cache is the storage (tmpfs).
	f, _ := os.Open(path)
	f.Sync()
	f.Close()
	if r, err = Drop(path); err != nil {
		t.Fatal(err)
	}
	t.Logf("resident after sync and drop: %.2f", r)
	if _, err := Drop(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Fatalf("Drop(missing) = %v, want not-exist", err)
	}
}

func TestColdPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 64*os.Getpagesize())
	for i := range data {
		data[i] = byte(i / os.Getpagesize())
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := OpenColdPages(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Written and not yet dropped: every page is in memory.
	if _, err := c.Read(); !errors.Is(err, ErrNoColdPage) {
		t.Fatalf("Read of a file in memory = %v, want ErrNoColdPage", err)
	}
	f, _ := os.Open(path)
	f.Sync()
	f.Close()
	if r, err := Drop(path); err != nil || r > 0 {
		t.Skipf("the file stays in memory after a drop (%.2f resident, %v): tmpfs?", r, err)
	}
	in := 0
	for range 8 {
		if _, err := c.Read(); err != nil {
			t.Fatal(err)
		}
		if in, err = Resident(c.m, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	// Each read brought in its page and no other (FADV_RANDOM), never a
	// page read before.
	if in != 8 {
		t.Fatalf("%d pages in memory after 8 reads of pages out of it, want 8", in)
	}
	if p := int64(c.buf[0]); !bytes.Equal(c.buf, data[p*int64(os.Getpagesize()):(p+1)*int64(os.Getpagesize())]) {
		t.Fatalf("the last page read is not page %d of the file", p)
	}
}

func TestOpenColdPagesShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenColdPages(path, 1); err == nil {
		t.Fatal("OpenColdPages of a file without a whole page: no error")
	}
}
