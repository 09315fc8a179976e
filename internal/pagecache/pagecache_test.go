package pagecache

import (
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
