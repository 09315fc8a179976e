package apply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
)

func TestCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.ckpt")
	c, err := loadCheckpoint(path, "a.fpx", 10, "redis://h/0?match=a*")
	if err != nil || c.hasLast {
		t.Fatalf("fresh: %+v %v", c, err)
	}
	c.advance(fpstore.Fingerprint{Hi: 5, Lo: 6}, 100)
	if err := c.save(path); err != nil {
		t.Fatal(err)
	}
	c2, err := loadCheckpoint(path, "a.fpx", 10, "redis://h/0?match=a*")
	if err != nil || !c2.hasLast || c2.last != (fpstore.Fingerprint{Hi: 5, Lo: 6}) || c2.Written != 100 {
		t.Fatalf("reloaded: %+v %v", c2, err)
	}
	if _, err := loadCheckpoint(path, "a.fpx", 10, "redis://h/0?match=b*"); err == nil || !strings.Contains(err.Error(), "another run") {
		t.Fatalf("another online side: %v", err)
	}
	os.WriteFile(path, []byte("junk"), 0o644)
	if _, err := loadCheckpoint(path, "a.fpx", 10, "redis://h/0?match=a*"); err == nil {
		t.Fatal("junk checkpoint accepted")
	}
}
