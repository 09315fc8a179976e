package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// A tally is what the jobs that look at every occurrence of a key need
// before they can write anything (count, dedup --keep last): per distinct
// key, how many records have it and where the first and the last are. It
// is made in a first pass over the input and read, unchanged, by a second
// pass that writes in input order (stdin is spooled to --tmpdir for it).
type tally struct {
	mem     []byte
	slots   []tallyEntry
	used    int
	budget  int64
	maxUsed int // grow past this many entries
}

// tallyEntry is one key's: 40 bytes. count 0 marks an empty slot.
type tallyEntry struct {
	fp          fpstore.Fingerprint
	count       uint64
	first, last uint64 // recordPos.order()
}

const tallyEntryBytes = 40

// TallyMemoryError: the keys of the input need a bigger table than the
// memory budget allows. (Spilling the tally to disk is not done yet.)
type TallyMemoryError struct {
	Keys   int   // distinct keys when the table was full
	Budget int64 // bytes
}

func (e *TallyMemoryError) Error() string {
	return fmt.Sprintf("more than %d distinct keys: their table (%d bytes each) does not fit in %d bytes of memory", e.Keys, tallyEntryBytes, e.Budget)
}

func newTally(budget int64) (*tally, error) {
	t := &tally{budget: budget}
	return t, t.alloc(1 << 16)
}

func (t *tally) alloc(n int) error {
	if int64(n)*tallyEntryBytes > t.budget {
		return &TallyMemoryError{Keys: t.used, Budget: t.budget}
	}
	mem, err := hugemem.Alloc(n * tallyEntryBytes)
	if err != nil {
		return fmt.Errorf("cannot allocate the key table: %w", err)
	}
	old := t.slots
	oldMem := t.mem
	t.mem, t.slots, t.used = mem, hugemem.Slice[tallyEntry](mem), 0
	t.maxUsed = n / 4 * 3
	for i := range old {
		if e := &old[i]; e.count > 0 {
			*t.slot(e.fp) = *e
			t.used++
		}
	}
	hugemem.Free(oldMem)
	return nil
}

func (t *tally) free() {
	hugemem.Free(t.mem)
	t.mem, t.slots = nil, nil
}

// slot is fp's entry, or the empty slot where it goes.
func (t *tally) slot(fp fpstore.Fingerprint) *tallyEntry {
	mask := uint64(len(t.slots) - 1)
	i, _ := bits.Mul64(fp.Lo, uint64(len(t.slots)))
	for {
		e := &t.slots[i]
		if e.count == 0 || e.fp == fp {
			return e
		}
		i = (i + 1) & mask
	}
}

// add counts an occurrence of fp at order.
func (t *tally) add(fp fpstore.Fingerprint, order uint64) error {
	e := t.slot(fp)
	if e.count == 0 {
		if t.used >= t.maxUsed {
			if err := t.alloc(2 * len(t.slots)); err != nil {
				return err
			}
			e = t.slot(fp)
		}
		*e = tallyEntry{fp: fp, first: order, last: order}
		t.used++
	}
	e.count++
	e.first = min(e.first, order)
	e.last = max(e.last, order)
	return nil
}

// get is fp's entry; the zero entry (count 0) when fp was never added. Safe
// for concurrent use once the adding is done.
func (t *tally) get(fp fpstore.Fingerprint) tallyEntry {
	return *t.slot(fp)
}

// tallyOptions say what the two passes read.
type tallyOptions struct {
	Inputs   []string
	Records  ingest.RecordOptions
	Threads  int
	Mem      int64
	TmpDir   string
	Progress *ingest.Progress
}

// twoPasses makes the tally of the inputs in a first pass and returns it
// with the options of a second pass over the same bytes: stdin comes from
// its spool in a scratch directory, and bad records, which the first pass
// counted (and quarantined) under --on-bad, are passed over in silence.
// done removes the spool.
func twoPasses(ctx context.Context, o tallyOptions, headers *Headers) (t *tally, second readOptions, done func(), err error) {
	first := readOptions{Inputs: o.Inputs, Records: o.Records, Progress: o.Progress, Headers: headers}
	var scratch *tempfile.Dir
	var spool *os.File
	done = func() {
		if spool != nil {
			spool.Close()
		}
		scratch.Remove()
	}
	for _, in := range o.Inputs {
		if in == "-" {
			if scratch, err = tempfile.MkDir(o.TmpDir); err != nil {
				return nil, second, done, &TmpDirError{Dir: o.TmpDir, Err: fmt.Errorf("cannot spool stdin for a second pass: %w", err)}
			}
			if spool, err = os.Create(filepath.Join(scratch.Path, "stdin")); err != nil {
				return nil, second, done, &TmpDirError{Dir: o.TmpDir, Err: fmt.Errorf("cannot spool stdin for a second pass: %w", err)}
			}
			first.Spool = spool
			break
		}
	}
	if t, err = newTally(o.Mem); err != nil {
		return nil, second, done, err
	}
	newWork := func() chunkWork {
		w := newRecordWorker(&first.Records, headers)
		return func(job chunkJob, buf []byte) ([]byte, error) {
			n := int64(0)
			err := w.eachAt(job, func(_ []byte, fp fpstore.Fingerprint, at recordPos) error {
				n++
				buf = binary.LittleEndian.AppendUint64(buf, fp.Hi)
				buf = binary.LittleEndian.AppendUint64(buf, fp.Lo)
				buf = binary.LittleEndian.AppendUint64(buf, at.order())
				return nil
			})
			o.Progress.Records.Add(n)
			return buf, err
		}
	}
	err = runOrdered(ctx, first, max(o.Threads, 1), newWork, func(b []byte) error {
		for ; len(b) >= 24; b = b[24:] {
			fp := fpstore.Fingerprint{Hi: binary.LittleEndian.Uint64(b), Lo: binary.LittleEndian.Uint64(b[8:])}
			if err := t.add(fp, binary.LittleEndian.Uint64(b[16:])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.free()
		return nil, second, done, err
	}
	second = readOptions{Inputs: o.Inputs, Records: o.Records, Progress: &ingest.Progress{}, Headers: newHeaders()}
	second.Records.OnBad, _ = ingest.ParseOnBad("skip")
	if spool != nil {
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			t.free()
			return nil, second, done, fmt.Errorf("cannot read back the spool of stdin: %w", err)
		}
		second.Stdin = spool
	}
	return t, second, done, nil
}
