package pipeline

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// shardSet is one shard of the seen-set in either mode:
//
//   - memory: the exact table alone;
//   - lsm: once the table would outgrow its share of --mem, it is flushed
//     to a sorted run (an index file in --tmpdir, with its segment filters)
//     and emptied, and a blocked bloom over every fingerprint of the shard
//     stays in RAM. A key the bloom rejects is certainly new: no disk is
//     touched. Only "maybe seen" keys check the table, then the runs.
//     Runs are merged into one when there are too many; the bloom is
//     rebuilt at twice its size from the runs when it fills.
//
// One goroutine owns a shardSet.
type shardSet struct {
	table   *seenShard
	bloom   *blockedBloom
	runs    []*fpstore.Index
	paths   []string
	tmpDir  string
	scratch *tempfile.Dir // made at the first flush: the runs live in it
	nrun    int
	// bloomMax bounds the bloom's bytes: past it the bloom stops growing
	// and its false-positive rate rises; answers stay exact.
	bloomMax int64

	probes, rejected, falsePos int64
}

// maxRuns bounds the runs a "maybe seen" key may have to check.
const maxRuns = 8

// free releases the shard's memory and runs. Safe to call more than once.
func (l *shardSet) free() {
	l.table.free()
	if l.bloom != nil {
		l.bloom.free()
		l.bloom = nil
	}
	l.closeRuns()
	l.scratch.Remove()
}

func (l *shardSet) closeRuns() {
	for i, x := range l.runs {
		x.Close()
		os.Remove(l.paths[i])
	}
	l.runs, l.paths = nil, nil
}

// insert adds fp and reports whether it was new.
func (l *shardSet) insert(fp fpstore.Fingerprint) (bool, error) {
	if l.bloom == nil {
		if l.table.needsRoom(1) {
			grown, err := l.table.grow()
			if err != nil {
				return false, err
			}
			if !grown {
				if err := l.startLSM(); err != nil {
					return false, err
				}
				return l.insert(fp)
			}
		}
		return l.table.insert(fp), nil
	}
	l.probes++
	if l.bloom.mayContain(fp) {
		if l.table.contains(fp) {
			return false, nil
		}
		for _, x := range l.runs {
			ok, err := x.Contains(fp)
			if err != nil {
				return false, err
			}
			if ok {
				return false, nil
			}
		}
		l.falsePos++
	} else {
		l.rejected++
	}
	return true, l.addNew(fp)
}

func (l *shardSet) addNew(fp fpstore.Fingerprint) error {
	if l.table.needsRoom(1) {
		if err := l.flush(); err != nil {
			return err
		}
	}
	l.table.insert(fp)
	l.bloom.add(fp)
	if l.bloom.keys > l.bloom.capacity() && 2*int64(len(l.bloom.mem)) <= l.bloomMax {
		return l.rebuildBloom(2 * l.bloom.capacity())
	}
	return nil
}

// startLSM switches to the bounded mode: a bloom over what the table holds
// (room for four tables' worth before its first rebuild), then a flush.
func (l *shardSet) startLSM() error {
	capacity := min(4*len(l.table.slots), int(l.bloomMax*8/bloomBitsPerKey))
	if err := l.rebuildBloom(capacity); err != nil {
		return err
	}
	return l.flush()
}

// rebuildBloom makes a bloom of the given capacity over the runs and the
// table.
func (l *shardSet) rebuildBloom(capacity int) error {
	b, err := newBlockedBloom(capacity)
	if err != nil {
		return err
	}
	l.table.each(b.add)
	buf := make([]fpstore.Fingerprint, 4096)
	for _, x := range l.runs {
		c := x.Cursor()
		for {
			n, err := c.Read(buf)
			for _, fp := range buf[:n] {
				b.add(fp)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				// A bloom missing a run's keys would call them new: a
				// repeat written as a first occurrence.
				b.free()
				return fmt.Errorf("cannot rebuild the seen-set's bloom: %w", err)
			}
		}
	}
	if l.bloom != nil {
		l.bloom.free()
	}
	l.bloom = b
	return nil
}

// flush writes the table as a sorted run and empties it.
func (l *shardSet) flush() error {
	// Sorted in place in the table's own memory (no copy: the bounded
	// mode must stay inside --mem), which reset then clears.
	fps := l.table.compact()
	slices.SortFunc(fps, fpstore.Fingerprint.Compare)
	path, err := l.runPath()
	if err != nil {
		return err
	}
	if err := writeRun(path, func(fn func([]fpstore.Fingerprint) error) error { return fn(fps) }); err != nil {
		return err
	}
	x, err := fpstore.Open(path)
	if err != nil {
		os.Remove(path)
		return err
	}
	l.runs, l.paths = append(l.runs, x), append(l.paths, path)
	l.table.reset()
	if len(l.runs) > maxRuns {
		return l.mergeRuns()
	}
	return nil
}

// mergeRuns folds every run into one: the runs are disjoint, so this is a
// sorted union streamed through the index writer.
func (l *shardSet) mergeRuns() error {
	path, err := l.runPath()
	if err != nil {
		return err
	}
	cursors := make([]*fpstore.Cursor, len(l.runs))
	for i, x := range l.runs {
		cursors[i] = x.Cursor()
	}
	err = writeRun(path, func(fn func([]fpstore.Fingerprint) error) error {
		return fpstore.MergeCursors(cursors, fpstore.Union, fn)
	})
	if err != nil {
		return err
	}
	x, err := fpstore.Open(path)
	if err != nil {
		os.Remove(path)
		return err
	}
	l.closeRuns()
	l.runs, l.paths = []*fpstore.Index{x}, []string{path}
	return nil
}

// runPath names the next run, in the shard's scratch directory.
func (l *shardSet) runPath() (string, error) {
	if l.scratch == nil {
		d, err := tempfile.MkDir(l.tmpDir)
		if err != nil {
			return "", &TmpDirError{Dir: l.tmpDir, Err: fmt.Errorf("cannot write a seen-set run: %w", err)}
		}
		l.scratch = d
	}
	l.nrun++
	return filepath.Join(l.scratch.Path, fmt.Sprintf("seen-%d.fpx", l.nrun)), nil
}

func writeRun(path string, produce func(fn func([]fpstore.Fingerprint) error) error) error {
	w, err := fpstore.Create(path, fpstore.WriterOptions{Spec: fpstore.Spec{Hash: "run"}, Sequential: true, Scratch: true})
	if err != nil {
		return fmt.Errorf("cannot write a seen-set run: %w", err)
	}
	if err := produce(func(fps []fpstore.Fingerprint) error { return w.Add(fps...) }); err != nil {
		w.Abort()
		return err
	}
	if _, err := w.Commit(); err != nil {
		return fmt.Errorf("cannot write a seen-set run: %w", err)
	}
	return nil
}
