package apply

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/failpoint"
	"github.com/fpdedup/fpdedup/reconcile/online"
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

// TestCheckpointSaveFaults fails each file operation of a checkpoint's save
// in turn (the fault seam every output goes through): each fails with the
// injected fault, naming the checkpoint, and leaves the previous
// checkpoint as it was and no temp or lock file beside it; a failed
// directory fsync after the rename leaves the new one in place, and says
// so. On 9cdcd90 the save went through no seam.
func TestCheckpointSaveFaults(t *testing.T) {
	ops := []failpoint.Op{failpoint.Create, failpoint.Write, failpoint.Sync, failpoint.Close, failpoint.Rename, failpoint.DirSync}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.ckpt")
	const target = "redis://h/0?match=a*"
	var old []byte
	reset := func() *Checkpoint {
		c, err := loadCheckpoint(path, "a.fpx", 10, target)
		if err != nil {
			t.Fatal(err)
		}
		if old == nil {
			c.advance(fpstore.Fingerprint{Hi: 1, Lo: 2}, 10)
			if err := c.save(path); err != nil {
				t.Fatal(err)
			}
			old, _ = os.ReadFile(path)
		} else if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
		c.advance(fpstore.Fingerprint{Hi: 5, Lo: 6}, 100)
		return c
	}
	c := reset()
	disarm := failpoint.Arm(0, ops...)
	err := c.save(path)
	n, log := disarm()
	if err != nil || n == 0 {
		t.Fatalf("clean save: %v; %d operations through the fault seam", err, n)
	}
	for i := int64(1); i <= n; i++ {
		c := reset()
		disarm := failpoint.Arm(i, ops...)
		err := c.save(path)
		disarm()
		dirSync := strings.HasPrefix(log[i-1], failpoint.DirSync.String())
		var fe *online.FileError
		if !errors.As(err, &fe) || fe.File != online.CheckpointFile || !strings.Contains(err.Error(), "injected fault") ||
			dirSync != strings.HasPrefix(fe.Op, "fsync the directory") {
			t.Errorf("fault %d (%s): %v", i, log[i-1], err)
		}
		got, _ := os.ReadFile(path)
		if replaced := !bytes.Equal(got, old); replaced != dirSync {
			t.Errorf("fault %d (%s): checkpoint replaced: %v", i, log[i-1], replaced)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "c.ckpt" {
				t.Errorf("fault %d (%s): %s left beside the checkpoint", i, log[i-1], e.Name())
			}
		}
	}
}
