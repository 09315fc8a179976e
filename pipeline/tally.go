package pipeline

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/failpoint"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/prefetch"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// A tally is what the jobs that look at every occurrence of a key need
// before they can write anything (count, dedup --keep last): per distinct
// key, how many records have it and where its first (count) or its last
// (keep last) is. It is made in a first pass over the input and read,
// unchanged, by a second pass that writes in input order (stdin is spooled
// to --tmpdir for it).
//
// It is a hash table in huge pages up to its memory budget. Beyond it, the
// table is sorted and spilled to a run in a scratch directory and emptied;
// at the end the runs are merged (counts added, first and last positions
// kept) into an index of the keys' fingerprints, whose Rank finds each
// key's entry in a file of values beside it: exact, in bounded memory,
// with a lookup per record in the second pass.
type tally struct {
	mem     []byte
	slots   []tallyEntry
	used    int
	budget  int64
	maxUsed int // grow past this many entries

	records, distinct int64

	last    bool // entries keep the last occurrence, not the first
	tmpDir  string
	scratch *tempfile.Dir
	runs    []string
	index   *fpstore.Index // the merged runs' keys; nil while all is in the table
	values  []byte         // 16 bytes a key of index, in its order: count, at
}

// tallyEntry is one key's: 32 bytes, two to a cache line. count 0 marks an
// empty slot. With first and last both (40 bytes, which count and keep
// last never needed together), half the entries straddled two lines, and
// the table had a quarter more pages to touch for the first time, the
// costliest thing a count does in this VM (see newTally).
type tallyEntry struct {
	fp    fpstore.Fingerprint
	count uint64
	at    uint64 // recordPos.order() of the first occurrence, or of the last
}

const (
	tallyEntryBytes = 32
	tallyValueBytes = 16
	tallyMinSlots   = 1 << 16
)

// newTally makes a table sized for keys distinct keys (an estimate: the
// input's record count when known), within budget: growing it as it fills
// spends a large share of a count's CPU time rehashing (pprof).
// last says the entries keep each key's last occurrence.
func newTally(budget int64, tmpDir string, keys int64, last bool) (*tally, error) {
	t := &tally{budget: max(budget, 2*tallyMinSlots*tallyEntryBytes), tmpDir: tmpDir, last: last}
	// Exactly the estimate's size, not the next power of two: every page
	// of the table is touched, and a page used for the first time is the
	// costliest thing a count does in a VM, its system time varying with
	// what ran before (bench/results/ab-2026-12-03-s11.md).
	n := int64(tallyMinSlots)
	if want := keys * 4 / 3; want > n {
		n = min(want, t.budget/tallyEntryBytes)
	}
	return t, t.alloc(int(n))
}

// alloc makes a table of n slots and moves the current entries into it.
func (t *tally) alloc(n int) error {
	mem, err := hugemem.Alloc(n * tallyEntryBytes)
	if err != nil {
		return fmt.Errorf("cannot allocate the key table: %w", err)
	}
	old, oldMem := t.slots, t.mem
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
	if t.index != nil {
		t.index.Close()
		t.index = nil
	}
	if t.values != nil {
		_ = unix.Munmap(t.values)
		t.values = nil
	}
	t.scratch.Remove()
}

// slot is fp's entry, or the empty slot where it goes.
func (t *tally) slot(fp fpstore.Fingerprint) *tallyEntry {
	n := uint64(len(t.slots))
	i, _ := bits.Mul64(fp.Lo, n)
	for {
		e := &t.slots[i]
		if e.count == 0 || e.fp == fp {
			return e
		}
		if i++; i == n {
			i = 0
		}
	}
}

// tallyGroup is how many keys' slots are prefetched (touch) one group ahead
// of their use: the table is memory-latency bound (pprof puts much of a
// count in slot), and the misses of a group overlap with each other and
// with the adds or gets of the group before.
const tallyGroup = 16

// touch prefetches the home slots of fps.
func (t *tally) touch(fps []fpstore.Fingerprint) {
	if t.index != nil {
		return
	}
	var addrs [tallyGroup]uintptr
	for len(fps) > 0 {
		n := min(len(fps), tallyGroup)
		for j, fp := range fps[:n] {
			addrs[j] = t.home(fp)
		}
		prefetch.Addrs(addrs[:n])
		fps = fps[n:]
	}
}

// home is the address of fp's home slot, for a prefetch.
func (t *tally) home(fp fpstore.Fingerprint) uintptr {
	i, _ := bits.Mul64(fp.Lo, uint64(len(t.slots)))
	return uintptr(unsafe.Pointer(&t.slots[i]))
}

// add counts an occurrence of fp at order.
func (t *tally) add(fp fpstore.Fingerprint, order uint64) error {
	t.records++
	e := t.slot(fp)
	if e.count == 0 {
		if t.used >= t.maxUsed {
			var err error
			if next := min(2*len(t.slots), int(t.budget/tallyEntryBytes)); next >= len(t.slots)*5/4 {
				err = t.alloc(next)
			} else {
				err = t.spill()
			}
			if err != nil {
				return err
			}
			e = t.slot(fp)
		}
		*e = tallyEntry{fp: fp, at: order}
		t.used++
	}
	e.count++
	e.at = t.keep(e.at, order)
	return nil
}

// keep is the occurrence an entry keeps of two.
func (t *tally) keep(a, b uint64) uint64 {
	if t.last {
		return max(a, b)
	}
	return min(a, b)
}

// spill writes the table's entries, sorted by fingerprint, as a run and
// empties the table.
func (t *tally) spill() error {
	if t.scratch == nil {
		d, err := tempfile.MkDir(t.tmpDir)
		if err != nil {
			return &TmpDirError{Dir: t.tmpDir, Err: fmt.Errorf("cannot spill the key table: %w", err)}
		}
		t.scratch = d
	}
	// Sorted in the table's own memory: no copy, the budget holds.
	n := 0
	for i := range t.slots {
		if t.slots[i].count > 0 {
			t.slots[n] = t.slots[i]
			n++
		}
	}
	run := t.slots[:n]
	slices.SortFunc(run, func(a, b tallyEntry) int { return a.fp.Compare(b.fp) })
	path := filepath.Join(t.scratch.Path, fmt.Sprintf("run-%d", len(t.runs)))
	if err := writeTallyRun(path, run); err != nil {
		return &TmpDirError{Dir: t.tmpDir, Err: err}
	}
	t.runs = append(t.runs, path)
	clear(t.slots)
	t.used = 0
	return nil
}

func writeTallyRun(path string, run []tallyEntry) error {
	if err := failpoint.Hit(failpoint.Create, path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(failpoint.Writer(f, path), 1<<20)
	var rec [tallyEntryBytes]byte
	for _, e := range run {
		putTallyEntry(rec[:], e)
		if _, err := bw.Write(rec[:]); err != nil {
			break // bw keeps the error
		}
	}
	err = bw.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write a run of the key table: %w", err)
	}
	return nil
}

func putTallyEntry(b []byte, e tallyEntry) {
	binary.BigEndian.PutUint64(b[0:], e.fp.Hi)
	binary.BigEndian.PutUint64(b[8:], e.fp.Lo)
	binary.LittleEndian.PutUint64(b[16:], e.count)
	binary.LittleEndian.PutUint64(b[24:], e.at)
}

func getTallyEntry(b []byte) tallyEntry {
	return tallyEntry{
		fp:    fpstore.Fingerprint{Hi: binary.BigEndian.Uint64(b[0:]), Lo: binary.BigEndian.Uint64(b[8:])},
		count: binary.LittleEndian.Uint64(b[16:]), at: binary.LittleEndian.Uint64(b[24:]),
	}
}

// finish ends the first pass: with no run spilled the table is the tally;
// otherwise the rest is spilled too and the runs are merged into the
// index and values that get reads.
func (t *tally) finish() error {
	if len(t.runs) == 0 {
		t.distinct = int64(t.used)
		return nil
	}
	if t.used > 0 {
		if err := t.spill(); err != nil {
			return err
		}
	}
	hugemem.Free(t.mem)
	t.mem, t.slots = nil, nil
	return t.merge()
}

// merge folds the runs into one index of the keys and a values file.
func (t *tally) merge() error {
	idxPath := filepath.Join(t.scratch.Path, "keys.fpx")
	valPath := filepath.Join(t.scratch.Path, "values")
	w, err := fpstore.Create(idxPath, fpstore.WriterOptions{Spec: fpstore.Spec{Hash: "tally"}, Sequential: true, Scratch: true})
	if err != nil {
		return &TmpDirError{Dir: t.tmpDir, Err: err}
	}
	defer w.Abort()
	if err := failpoint.Hit(failpoint.Create, valPath); err != nil {
		return &TmpDirError{Dir: t.tmpDir, Err: err}
	}
	vf, err := os.OpenFile(valPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &TmpDirError{Dir: t.tmpDir, Err: err}
	}
	defer vf.Close()
	vw := bufio.NewWriterSize(failpoint.Writer(vf, valPath), 1<<20)
	var cur tallyEntry
	have := false
	var val [tallyValueBytes]byte
	emit := func() error {
		t.distinct++
		if err := w.Add(cur.fp); err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(val[0:], cur.count)
		binary.LittleEndian.PutUint64(val[8:], cur.at)
		_, err := vw.Write(val[:])
		return err
	}
	err = mergeTallyRuns(t.runs, func(e tallyEntry) error {
		if have && e.fp == cur.fp {
			cur.count += e.count
			cur.at = t.keep(cur.at, e.at)
			return nil
		}
		if have {
			if err := emit(); err != nil {
				return err
			}
		}
		cur, have = e, true
		return nil
	})
	if err == nil && have {
		err = emit()
	}
	if err == nil {
		err = vw.Flush()
	}
	if err == nil {
		_, err = w.Commit()
	}
	if err != nil {
		return fmt.Errorf("cannot merge the key table's runs: %w", err)
	}
	for _, r := range t.runs {
		os.Remove(r)
	}
	if t.index, err = fpstore.Open(idxPath); err != nil {
		return err
	}
	if t.distinct > 0 {
		if t.values, err = unix.Mmap(int(vf.Fd()), 0, int(t.distinct)*tallyValueBytes, unix.PROT_READ, unix.MAP_SHARED); err != nil {
			return fmt.Errorf("cannot map the key table's values: %w", err)
		}
	}
	return nil
}

// mergeTallyRuns calls fn with every entry of the runs in fingerprint order.
func mergeTallyRuns(paths []string, fn func(tallyEntry) error) error {
	type reader struct {
		r   *bufio.Reader
		f   *os.File
		cur tallyEntry
	}
	var rs []*reader
	defer func() {
		for _, r := range rs {
			r.f.Close()
		}
	}()
	var rec [tallyEntryBytes]byte
	next := func(r *reader) (bool, error) {
		if _, err := io.ReadFull(r.r, rec[:]); err != nil {
			if err == io.EOF {
				return false, nil
			}
			return false, fmt.Errorf("cannot read a run of the key table: %w", err)
		}
		r.cur = getTallyEntry(rec[:])
		return true, nil
	}
	for _, p := range paths {
		if err := failpoint.Hit(failpoint.Open, p); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		r := &reader{r: bufio.NewReaderSize(failpoint.Reader(f, p), 256<<10), f: f}
		rs = append(rs, r)
	}
	live := rs[:0:0]
	for _, r := range rs {
		ok, err := next(r)
		if err != nil {
			return err
		}
		if ok {
			live = append(live, r)
		}
	}
	for len(live) > 0 {
		// Few runs (the input's keys over the table's size): a scan for
		// the smallest is as good as a heap.
		m := 0
		for i := range live[1:] {
			if live[i+1].cur.fp.Less(live[m].cur.fp) {
				m = i + 1
			}
		}
		if err := fn(live[m].cur); err != nil {
			return err
		}
		ok, err := next(live[m])
		if err != nil {
			return err
		}
		if !ok {
			live = append(live[:m], live[m+1:]...)
		}
	}
	return nil
}

// get is fp's entry; the zero entry (count 0) when fp was never added. Safe
// for concurrent use once finish has run.
func (t *tally) get(fp fpstore.Fingerprint) (tallyEntry, error) {
	if t.index == nil {
		return *t.slot(fp), nil
	}
	rank, found, err := t.index.Rank(fp)
	if err != nil || !found {
		return tallyEntry{}, err
	}
	v := t.values[rank*tallyValueBytes:]
	return tallyEntry{fp: fp, count: binary.LittleEndian.Uint64(v), at: binary.LittleEndian.Uint64(v[8:])}, nil
}

// tallyOptions say what the two passes read.
type tallyOptions struct {
	Inputs   []string
	Records  ingest.RecordOptions
	Threads  int
	Tables   int64 // the tally's share of the job's plan
	TmpDir   string
	Progress *ingest.Progress
	Stdin    io.Reader // read for "-" instead of the process's stdin (tests)
	KeepLast bool      // entries keep each key's last occurrence, not its first
}

// twoPasses makes the tally of the inputs in a first pass and returns it
// with the options of a second pass over the same bytes: stdin comes from
// its spool in a scratch directory, and bad records, which the first pass
// counted (and quarantined) under --on-bad, are passed over in silence.
// done removes the spool.
func twoPasses(ctx context.Context, o tallyOptions, headers *Headers) (t *tallySet, second readOptions, done func(), err error) {
	first := readOptions{Inputs: o.Inputs, Records: o.Records, Progress: o.Progress, Headers: headers, Stdin: o.Stdin}
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
			first.Spool, first.SpoolDir = failpoint.Writer(spool, spool.Name()), o.TmpDir
			break
		}
	}
	est, err := estimateRecords(o.Inputs, o.Records.Spec.Format)
	if err != nil {
		return nil, second, done, err
	}
	if t, err = newTallySet(o.Threads, o.Tables, o.TmpDir, est, o.KeepLast); err != nil {
		return nil, second, done, err
	}
	if err = t.fill(ctx, first, max(o.Threads, 1), o.Progress); err == nil {
		err = t.finish()
	}
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

// tallySet is the tally in shards by fingerprint bits (the low bits of Hi;
// a shard's table places keys by Lo), one goroutine owning each while the
// first pass fills them: the table is memory-latency bound, and one owner
// alone held up the whole count (pprof). The entries do not depend on the
// order of the adds (a sum, a min, a max), so the owners need no ordering.
type tallySet struct {
	shards []*tally
	mask   uint64
	// bound[i] is the number of the last record of input i that the first
	// pass read (numbered as recordPos numbers them).
	bound []atomic.Int64
}

func newTallySet(threads int, budget int64, tmpDir string, keys int64, last bool) (*tallySet, error) {
	n := 1
	for n < threads {
		n *= 2
	}
	ts := &tallySet{mask: uint64(n - 1)}
	for range n {
		t, err := newTally(budget/int64(n), tmpDir, keys/int64(n), last)
		if err != nil {
			ts.free()
			return nil, err
		}
		ts.shards = append(ts.shards, t)
	}
	return ts, nil
}

func (ts *tallySet) shard(fp fpstore.Fingerprint) *tally { return ts.shards[fp.Hi&ts.mask] }

// fill is the first pass: records are read, keyed and hashed on threads
// workers, and every shard owner takes its keys from each batch.
func (ts *tallySet) fill(ctx context.Context, first readOptions, threads int, progress *ingest.Progress) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ts.bound = make([]atomic.Int64, len(first.Inputs))
	jobs := make(chan chunkJob, threads)
	go func() {
		defer close(jobs)
		if err := readChunks(ctx, first, jobs); err != nil {
			cancel(err)
		}
	}()
	type batch struct {
		b    []byte // fingerprint (Hi, Lo) and order, 24 bytes a record
		left atomic.Int32
	}
	owners := make([]chan *batch, len(ts.shards))
	for i := range owners {
		owners[i] = make(chan *batch, 2*threads)
	}
	var pool sync.Pool
	var workers sync.WaitGroup
	for range threads {
		workers.Add(1)
		go func() {
			defer workers.Done()
			w := newRecordWorker(&first.Records, first.Headers)
			for job := range jobs {
				if ctx.Err() != nil {
					job.rd.Release(job.chunk)
					continue
				}
				var buf []byte
				if b, ok := pool.Get().(*[]byte); ok {
					buf = (*b)[:0]
				}
				n := int64(0)
				err := w.eachAt(job, func(_ []byte, fp fpstore.Fingerprint, at recordPos) error {
					n++
					buf = binary.LittleEndian.AppendUint64(buf, fp.Hi)
					buf = binary.LittleEndian.AppendUint64(buf, fp.Lo)
					buf = binary.LittleEndian.AppendUint64(buf, at.order())
					return nil
				})
				last := job.chunk.FirstRecord + int64(job.chunk.Records) - 1
				if job.header {
					last-- // data records are numbered without it
				}
				bound := &ts.bound[job.in]
				for b := bound.Load(); b < last && !bound.CompareAndSwap(b, last); b = bound.Load() {
				}
				job.rd.Release(job.chunk)
				progress.Records.Add(n)
				if err != nil {
					cancel(err)
					continue
				}
				bt := &batch{b: buf}
				bt.left.Store(int32(len(owners)))
				for _, o := range owners {
					o <- bt
				}
			}
		}()
	}
	go func() {
		workers.Wait()
		for _, o := range owners {
			close(o)
		}
	}()
	var owning sync.WaitGroup
	for me := range ts.shards {
		owning.Add(1)
		go func(me uint64, t *tally, in <-chan *batch) {
			defer owning.Done()
			var group [2][tallyGroup]fpstore.Fingerprint
			var orders [2][tallyGroup]uint64
			for bt := range in {
				b := bt.b
				// collect takes the next group of this shard's keys from
				// b into group[k] and prefetches their slots.
				collect := func(k int) int {
					n := 0
					for ; len(b) >= 24 && n < tallyGroup; b = b[24:] {
						fp := fpstore.Fingerprint{Hi: binary.LittleEndian.Uint64(b), Lo: binary.LittleEndian.Uint64(b[8:])}
						if fp.Hi&ts.mask == me {
							group[k][n], orders[k][n] = fp, binary.LittleEndian.Uint64(b[16:])
							n++
						}
					}
					t.touch(group[k][:n])
					return n
				}
				cur := 0
				for n := collect(cur); n > 0 && ctx.Err() == nil; {
					next := collect(cur ^ 1)
					for k := range n {
						if err := t.add(group[cur][k], orders[cur][k]); err != nil {
							cancel(err)
							break
						}
					}
					cur, n = cur^1, next
				}
				if bt.left.Add(-1) == 0 {
					pool.Put(&bt.b)
				}
			}
		}(uint64(me), ts.shards[me], owners[me])
	}
	owning.Wait()
	return context.Cause(ctx)
}

func (ts *tallySet) finish() error {
	for _, t := range ts.shards {
		if err := t.finish(); err != nil {
			return err
		}
	}
	return nil
}

func (ts *tallySet) free() {
	for _, t := range ts.shards {
		t.free()
	}
}

func (ts *tallySet) get(fp fpstore.Fingerprint) (tallyEntry, error) { return ts.shard(fp).get(fp) }

// touch prefetches the home slots of fps, each in its shard.
func (ts *tallySet) touch(fps []fpstore.Fingerprint) {
	var addrs [tallyGroup]uintptr
	n := 0
	for _, fp := range fps {
		if t := ts.shard(fp); t.index == nil {
			addrs[n] = t.home(fp)
			if n++; n == len(addrs) {
				prefetch.Addrs(addrs[:n])
				n = 0
			}
		}
	}
	prefetch.Addrs(addrs[:n])
}

// figures: records, distinct keys, runs spilled, table bytes.
func (ts *tallySet) figures() (records, distinct int64, runs int, bytes int64) {
	for _, t := range ts.shards {
		records += t.records
		distinct += t.distinct
		runs += len(t.runs)
		bytes += int64(len(t.mem))
	}
	return
}

// tallyGroupReader is a second pass's reading of a chunk: its records, each
// with its key's entry, looked up tallyGroup at a time (touch). One per
// worker goroutine.
type tallyGroupReader struct {
	recs  [][]byte
	fps   []fpstore.Fingerprint
	where []recordPos
}

func (g *tallyGroupReader) each(t *tallySet, w *recordWorker, job chunkJob, fn func(rec []byte, e tallyEntry, at recordPos) error) error {
	g.recs, g.fps, g.where = g.recs[:0], g.fps[:0], g.where[:0]
	err := w.eachAt(job, func(rec []byte, fp fpstore.Fingerprint, at recordPos) error {
		g.recs, g.fps, g.where = append(g.recs, rec), append(g.fps, fp), append(g.where, at)
		return nil
	})
	if err != nil {
		return err
	}
	t.touch(g.fps[:min(tallyGroup, len(g.fps))])
	for base := 0; base < len(g.fps); base += tallyGroup {
		end := min(base+tallyGroup, len(g.fps))
		t.touch(g.fps[end:min(end+tallyGroup, len(g.fps))])
		for i := base; i < end; i++ {
			e, err := t.get(g.fps[i])
			if err != nil {
				return err
			}
			if err := fn(g.recs[i], e, g.where[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// byPosition is the tally turned around for a second pass that needs only
// the occurrences the tally keeps (each key's first, or with last its
// last) and their counts: per input, an array indexed by record number
// holding the count of the key whose kept occurrence is there (0: not
// one). The second pass then reads it in order instead of probing the
// table (pprof: the probes were most of that pass; count needs no keying
// or hashing either). 8 bytes a record; made only when that fits the
// budget and nothing was spilled.
type byPosition struct {
	mem    [][]byte
	counts [][]uint64
}

// countsByPosition makes it, or returns nil when the tally spilled or it
// does not fit in budget beside the tally's tables (they are freed once it
// is made, but both are held while it is filled). Each input's array is
// sized by the record numbers the first pass saw in it, and threads
// goroutines fill the arrays from ranges of the shards' slots: done in one
// goroutine, the pass over the slots for the sizes and the one to fill them
// were a visible part of a count, with the other cores idle.
func (ts *tallySet) countsByPosition(budget int64, threads int) *byPosition {
	for _, t := range ts.shards {
		if t.index != nil {
			return nil
		}
	}
	_, _, _, need := ts.figures()
	for i := range ts.bound {
		need += 8 * (ts.bound[i].Load() + 1)
	}
	if need > budget {
		return nil
	}
	bp := &byPosition{}
	for i := range ts.bound {
		mem, err := hugemem.Alloc(8 * int(ts.bound[i].Load()+1))
		if err != nil {
			bp.free()
			return nil
		}
		bp.mem, bp.counts = append(bp.mem, mem), append(bp.counts, hugemem.Slice[uint64](mem))
	}
	spans := make(chan []tallyEntry, 64) // 8 MiB of slots each
	go func() {
		defer close(spans)
		for _, t := range ts.shards {
			for lo := 0; lo < len(t.slots); lo += 1 << 18 {
				spans <- t.slots[lo:min(lo+1<<18, len(t.slots))]
			}
		}
	}()
	var outside atomic.Bool // an entry beyond the sizes: never, but checked
	var wg sync.WaitGroup
	for range max(threads, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for slots := range spans {
				for i := range slots {
					if e := &slots[i]; e.count > 0 {
						in, rec := e.at>>40, e.at&(1<<40-1)
						if in >= uint64(len(bp.counts)) || rec >= uint64(len(bp.counts[in])) {
							outside.Store(true)
							continue
						}
						bp.counts[in][rec] = e.count
					}
				}
			}
		}()
	}
	wg.Wait()
	if outside.Load() {
		bp.free() // the second pass probes the table instead
		return nil
	}
	for _, t := range ts.shards {
		hugemem.Free(t.mem)
		t.mem, t.slots = nil, nil
	}
	return bp
}

// count is how many records have the key whose kept occurrence is at p;
// 0 when p is not one.
func (bp *byPosition) count(p recordPos) uint64 {
	if c := bp.counts[p.in]; uint64(p.record) < uint64(len(c)) {
		return c[p.record]
	}
	return 0
}

func (bp *byPosition) free() {
	if bp == nil {
		return
	}
	for _, m := range bp.mem {
		hugemem.Free(m)
	}
	bp.mem, bp.counts = nil, nil
}
