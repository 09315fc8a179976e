package fpstore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/devrate"
	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// Cold lookups read with pread. A fault on the mapping costs ~20 µs of
// kernel work where a pread of the same page costs ~3 (issue 47), and a
// cold lookup through the mapping faults in its filter block, directory
// page and fingerprints one after the other. Read with pread instead, a
// cold key costs its directory page, held (the directories are the
// index's top level: 4 bytes a bucket of 16-32 keys) once read, and the
// page or two of fingerprints around its bucket, read into a buffer of
// the batch's, checked against the page CRC table and searched there:
// about one device read a key once the directories are held. The filter
// is not read: the bucket answers exactly, and reading a filter block
// costs a device read where it would save one.
//
// A batch's pages are read once each however many of its keys fall in
// them, sorted, neighbours as one read, preadDepth reads in flight on as
// many goroutines (a device's 4 KiB random reads reach their peak near
// depth 32). The buffers, and the directories held, are within the bytes
// the caller gives (WithReadBuffers: a share of the job's memory plan).
//
// Warm lookups do not come here: they read the mapping, without a copy
// (planBatch, probeCold).

// preadDepth is how many reads a batch keeps in flight.
const preadDepth = 32

// minReadBuffers is the least budget the pread path runs in: a batch
// round of a few keys and a few directory pages. Below it cold batches
// read through the mapping (coldread.go).
const minReadBuffers = 64 * PageSize

// preadPagesPerKey is what a cold key read with pread costs in device
// reads once its directory page is held: its bucket's page, and the next
// one when the bucket and the two fingerprints either side (~300-600
// bytes) cross a page boundary (TestColdReadsPerKey: 1.06-1.21 a key,
// directories and segment headers included).
const preadPagesPerKey = 1.15

// preadShare is the share of the device's depth-32 random reads that the
// pread path keeps busy: its rounds ask for all their reads at once, with
// no stage waiting on another's pages but the directory's, so nearer to
// fio's than the mapping's groups (coldShare). bench/cold-pread.sh
// measured 0.8-1.3 of fio's rate for 10^3 keys on a loaded machine (the
// host caches part of the disk); 0.85 is the aim until an idle
// run fits it.
const preadShare = 0.85

// WithReadBuffers has the index's cold lookups read with pread, holding
// at most bytes (a round's pages, and the directories and page CRC
// tables read, kept while the index is open): a share of the job's memory
// (internal/memplan). Without it, or with less than 256 KiB, cold
// lookups read through the mapping (coldread.go), which holds nothing.
func WithReadBuffers(bytes int64) Option {
	return func(x *Index) { x.readBuffers = bytes }
}

// ShareReadBuffers gives the set's indexes bytes to read cold lookups with
// (WithReadBuffers), shared in proportion to their fingerprints: a key is
// looked up in one index of a partitioned set, and in each of a history
// and its recent days, where the history has most of the pages. Called
// before the set's first lookup.
func (s *Set) ShareReadBuffers(bytes int64) {
	var total float64
	for _, x := range s.indexes {
		total += float64(x.Len())
	}
	for _, x := range s.indexes {
		x.readBuffers = 0
		if total > 0 {
			x.readBuffers = int64(float64(bytes) * float64(x.Len()) / total)
		}
	}
}

// preadable reports whether cold lookups may read with pread.
func (x *Index) preadable() bool { return x.readBuffers >= minReadBuffers && !x.whole.Load() }

// preadCost is how long reading n keys with pread takes, in seconds, on a
// device doing rand reads a second: their pages, the directory pages
// they read for the first time (dirPages in the index, each read once),
// and the segments they open.
func preadCost(n float64, segments int, dirPages, rand float64) float64 {
	opened, dirs := 0.0, 0.0
	if segments > 0 {
		s := float64(segments)
		opened = s * -math.Expm1(-n/s)
	}
	if dirPages > 0 {
		dirs = dirPages * -math.Expm1(-n/dirPages)
	}
	return (preadPagesPerKey*n + dirs + coldReadsPerSegment*opened) / (preadShare * rand)
}

// dirPages is how many pages the index's directories take.
func (x *Index) dirPages() float64 {
	// 4 bytes a bucket, a bucket per 16-32 keys: a page per 16k-32k keys.
	return float64(x.foot.fingerprints) / (24 * PageSize / 4)
}

// preadFile is the descriptor the pread path reads from: a second open
// file description of the mapped file (the same inode, through
// /proc/self/fd), advised POSIX_FADV_RANDOM so that the kernel reads
// exactly the pages asked for; the cursors' descriptor keeps its read
// ahead. Without /proc, the index's own.
func (x *Index) preadFile() int {
	x.preadOnce.Do(func() {
		x.preadFD = int(x.file.Fd())
		f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", x.file.Fd()))
		if err != nil {
			return
		}
		if a, b := statIno(x.file), statIno(f); a == 0 || a != b {
			f.Close()
			return
		}
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
		x.preadF, x.preadFD = f, int(f.Fd())
	})
	return x.preadFD
}

func statIno(f *os.File) uint64 {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0
	}
	return st.Ino
}

// pageKey names a page of a segment buffer.
type pageKey struct {
	seg  int32
	page uint32
}

// preadRound is one round of a cold batch: the pages it read, by page.
type preadRound struct {
	x     *Index
	want  map[pageKey]int // page → its place in pages, or -1 before it is read
	keys  []pageKey
	pages [][]byte
	slabs [][]byte // a read's pages each, reused round after round
	used  int      // slabs used this round
	limit int      // the pages a round may hold: half the budget
	// few: the batch is a few keys (a single lookup, a query of a few
	// KEYs), which read where their buckets most likely lie before, or
	// instead of, their directory pages (guessWindow).
	few bool
	win []Fingerprint // a key's fingerprints, copied from the pages
	// priced: the round's batch may ask the device's rates (at least
	// MinPricedBatch keys).
	priced bool
}

// fewKeys is the most keys a batch of a few keys has.
const fewKeys = 16

// ask adds the pages holding buf[from:to) of segment s, unless held, and
// returns how many it added (not asked for before in the round).
func (r *preadRound) ask(s *segment, from, to uint64, held func(uint32) bool) int {
	added := 0
	if to <= from {
		return 0
	}
	for p := from / PageSize; p <= (to-1)/PageSize; p++ {
		k := pageKey{int32(s.index), uint32(p)}
		if held != nil && held(uint32(p)) {
			continue
		}
		if _, ok := r.want[k]; !ok {
			r.want[k] = -1
			r.keys = append(r.keys, k)
			added++
		}
	}
	return added
}

// read reads the pages asked for since the last read, preadDepth reads
// in flight, and checks each against its CRC.
func (r *preadRound) read() error {
	x := r.x
	keys := r.keys
	r.keys = r.keys[:0]
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b pageKey) int {
		return cmp.Or(cmp.Compare(a.seg, b.seg), cmp.Compare(a.page, b.page))
	})
	// Each read of a round has a slab of its own, kept for the next
	// rounds: the pages of the reads before stay where they are.
	if r.used == len(r.slabs) {
		r.slabs = append(r.slabs, nil)
	}
	slab := r.slabs[r.used]
	if cap(slab) < len(keys)*PageSize {
		slab = make([]byte, len(keys)*PageSize)
		r.slabs[r.used] = slab
	}
	r.used++
	base := len(r.pages)
	for i, k := range keys {
		r.want[k] = base + i
	}
	r.pages = append(r.pages, make([][]byte, len(keys))...)
	// Runs of neighbouring pages of one segment: one read each.
	type run struct{ from, to int } // in keys
	var runs []run
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].seg == keys[i].seg && keys[j].page == keys[j-1].page+1 && j-i < 64 {
			j++
		}
		runs = append(runs, run{i, j})
		i = j
	}
	x.preadRuns.Add(uint64(len(runs)))
	fd := x.preadFile()
	errs := make([]error, len(runs))
	crcs := make([]uint32, len(keys))
	// Every run is asked for first (POSIX_FADV_WILLNEED: the kernel
	// queues its reads and returns), so the device has all of them in
	// flight at once, then read, each pread waiting for its own pages
	// only. Reads issued from blocked goroutines alone would keep few in
	// flight: a goroutine blocked in a syscall gives its core to the next
	// only when the runtime notices, 20 µs to 10 ms later.
	if len(runs) > 1 && preadAsk {
		parallel(runtime.GOMAXPROCS(0), len(runs), func(ri int) {
			r.askRun(fd, keys, runs[ri].from, runs[ri].to)
		})
	}
	parallel(min(preadDepth, len(runs)), len(runs), func(ri int) {
		errs[ri] = r.readRun(fd, slab, keys, crcs, base, runs[ri].from, runs[ri].to)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for i, k := range keys {
		s := x.segs[k.seg].seg.Load()
		if err := s.checkRead(uint64(k.page), r.pages[base+i], crcs[i], binary.LittleEndian.Uint32(x.heldCRCs(s)[4*uint64(k.page):])); err != nil {
			return err
		}
	}
	return nil
}

// preadAsk: the reads of a round are asked for before they are made
// (a variable: the benchmarks compare).
var preadAsk = true

// parallel calls fn(0) ... fn(n-1) on workers goroutines, the caller's
// one of them.
func parallel(workers, n int, fn func(int)) {
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for range min(workers, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// runBytes is where keys[from:to], neighbouring pages of one segment,
// lie in the file, and its segment.
func (r *preadRound) runBytes(keys []pageKey, from, to int) (s *segment, at int64, size uint64) {
	s = r.x.segs[keys[from].seg].seg.Load()
	first, last := uint64(keys[from].page), uint64(keys[to-1].page)
	size = min((last+1)*PageSize, uint64(len(s.buf))) - first*PageSize
	return s, int64(s.ref.offset + first*PageSize), size
}

// askRun asks the kernel to read keys[from:to] (an error is ignored: the
// pread that follows reads the pages anyway).
func (r *preadRound) askRun(fd int, keys []pageKey, from, to int) {
	_, at, size := r.runBytes(keys, from, to)
	_ = unix.Fadvise(fd, at, int64(size), unix.FADV_WILLNEED)
}

// readRun reads keys[from:to], neighbouring pages of one segment, into
// their places in slab, and their CRCs into crcs.
func (r *preadRound) readRun(fd int, slab []byte, keys []pageKey, crcs []uint32, base, from, to int) error {
	s, at, size := r.runBytes(keys, from, to)
	first := uint64(keys[from].page)
	dst := slab[from*PageSize:][:size]
	for got := 0; got < len(dst); {
		n, err := unix.Pread(fd, dst[got:], at+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: segment %d at offset %d: reading %d bytes at offset %d: %v", ErrCorrupt, s.index, s.ref.offset, len(dst)-got, at+int64(got), err)
		}
		if n == 0 {
			return fmt.Errorf("%w: segment %d at offset %d: the file ends at offset %d, before the page there (truncated?)", ErrCorrupt, s.index, s.ref.offset, at+int64(got))
		}
		got += n
	}
	for i := from; i < to; i++ {
		p := uint64(keys[i].page)
		page := dst[(p-first)*PageSize : min((p-first+1)*PageSize, size)]
		crcs[i] = crc32c(page)
		r.pages[base+i] = page
	}
	return nil
}

// bytesAt copies buf[from:to) of segment s into dst from the round's
// pages and the directory pages held; every page must have been read.
func (r *preadRound) bytesAt(s *segment, from, to uint64, dst []byte) {
	for at := from; at < to; {
		p := at / PageSize
		page := s.heldDir(p)
		if page == nil {
			page = r.pages[r.want[pageKey{int32(s.index), uint32(p)}]]
		}
		if at-p*PageSize >= uint64(len(page)) {
			// Past the buffer's last page: the ranges asked for lie
			// within the vectors loadSegment checked, so never.
			panic(fmt.Sprintf("pread: offset %d past segment page %d", at, p))
		}
		at += uint64(copy(dst[at-from:to-from], page[at-p*PageSize:]))
	}
}

// heldCRCs is the segment's page CRC table, as checked when it was
// opened: a copy held while the budget allows (a page of it serves 4 MiB
// of the segment, and a cold key would otherwise read one more page when
// it has left the page cache), else the mapping's. Called on the
// goroutine of the caller's fault guard.
func (x *Index) heldCRCs(s *segment) []byte {
	if b := s.crcHeld.Load(); b != nil {
		return *b
	}
	if x.dirBytes.Add(int64(len(s.crcs))) > x.readBuffers/2 {
		x.dirBytes.Add(-int64(len(s.crcs)))
		return s.crcs
	}
	b := slices.Clone(s.crcs)
	if crc32c(b) != s.ref.pagesCRC {
		// Changed since it was checked (the file rewritten in place):
		// the mapping's then, whose pages say so as they are read.
		x.dirBytes.Add(-int64(len(s.crcs)))
		return s.crcs
	}
	if !s.crcHeld.CompareAndSwap(nil, &b) {
		x.dirBytes.Add(-int64(len(s.crcs)))
	}
	return *s.crcHeld.Load()
}

// heldDir is directory page p of the segment if held, else nil.
func (s *segment) heldDir(p uint64) []byte {
	if p < s.dirFirst || p-s.dirFirst >= uint64(len(s.dirHeld)) {
		return nil
	}
	if b := s.dirHeld[p-s.dirFirst].Load(); b != nil {
		return *b
	}
	return nil
}

// dirEntriesHeld reports whether the pages of directory entries b and
// b+1 are held.
func (s *segment) dirEntriesHeld(b uint64) bool {
	return s.heldDir((s.dirAt+4*b)/PageSize) != nil && s.heldDir((s.dirAt+4*b+7)/PageSize) != nil
}

// holdDirs keeps the directory pages the round read, while the index's
// budget allows: half of it, the other half being the rounds'.
func (r *preadRound) holdDirs(s *segment, from, to uint64) {
	x := r.x
	for p := from / PageSize; p <= (to-1)/PageSize; p++ {
		if p < s.dirFirst || p-s.dirFirst >= uint64(len(s.dirHeld)) || s.dirHeld[p-s.dirFirst].Load() != nil {
			continue
		}
		i, ok := r.want[pageKey{int32(s.index), uint32(p)}]
		if !ok || i < 0 {
			continue
		}
		if x.dirBytes.Add(PageSize) > x.readBuffers/2 {
			x.dirBytes.Add(-PageSize)
			return
		}
		b := slices.Clone(r.pages[i])
		if !s.dirHeld[p-s.dirFirst].CompareAndSwap(nil, &b) {
			x.dirBytes.Add(-PageSize)
		}
	}
}

// preadKeys answers fps (any order, any segments) reading the pages they
// need with pread, in rounds whose pages fit in half the budget. The keys
// are taken in ascending order (their order in the file), so a round's
// pages lie together and neighbours are read as one; a batch of a few
// thousand keys is shared among the cores as containsShared shares a warm
// one, each share a contiguous part of the file (no page read twice), so
// that one share issues its reads while another waits for its own.
func (x *Index) preadKeys(fps []Fingerprint, found []bool) error {
	if len(fps) == 1 {
		// A round of its own, from those the single lookups before it
		// left (their slabs and window: made afresh, their memory was
		// much of a single lookup's CPU).
		r, _ := x.singleRounds.Get().(*preadRound)
		if r == nil {
			r = &preadRound{x: x, want: map[pageKey]int{}}
		}
		r.limit, r.few = max(int(x.readBuffers/2/PageSize), 4), true
		err := x.preadRounds(r, fps, found)
		x.singleRounds.Put(r)
		return err
	}
	// The budget is a batch's: concurrent batches (a pipeline's workers)
	// take turns, each keeping the device's preadDepth reads in flight.
	x.preadBatch.Lock()
	defer x.preadBatch.Unlock()
	order := make([]int32, len(fps))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return fps[a].Compare(fps[b]) })
	sorted := make([]Fingerprint, len(fps))
	for i, k := range order {
		sorted[i] = fps[k]
	}
	answers := make([]bool, len(fps))
	parts := max(min(runtime.GOMAXPROCS(0), len(fps)/minSharedBatch), 1)
	errs := make([]error, parts)
	// The shares' slabs are kept for the next batch, within half the
	// budget (the rounds' half): memory taken fresh from the runtime is
	// faulted in a page at a time as the reads fill it.
	for len(x.preadSlabs) < parts {
		x.preadSlabs = append(x.preadSlabs, nil)
	}
	parallel(parts, parts, func(p int) {
		lo, hi := len(fps)*p/parts, len(fps)*(p+1)/parts
		errs[p] = x.preadSorted(sorted[lo:hi], answers[lo:hi], parts, len(fps) >= MinPricedBatch, &x.preadSlabs[p])
	})
	var held int64
	for _, slabs := range x.preadSlabs {
		for _, slab := range slabs {
			held += int64(cap(slab))
		}
	}
	if held > x.readBuffers/2 {
		x.preadSlabs = nil
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for i, k := range order {
		found[k] = answers[i]
	}
	return nil
}

// preadSorted answers fps in rounds, with a parts'th of the round pages
// the budget allows, in the slabs given (nil: its own), which it leaves
// there for the next.
func (x *Index) preadSorted(fps []Fingerprint, found []bool, parts int, priced bool, slabs *[][]byte) error {
	r := &preadRound{x: x, want: map[pageKey]int{}, limit: max(int(x.readBuffers/2/PageSize)/parts, 4), few: len(fps) <= fewKeys, priced: priced}
	if slabs != nil {
		r.slabs = *slabs
		defer func() { *slabs = r.slabs }()
	}
	return x.preadRounds(r, fps, found)
}

// preadRounds answers fps in rounds of r.
func (x *Index) preadRounds(r *preadRound, fps []Fingerprint, found []bool) error {
	for base := 0; base < len(fps); {
		// Each round starts empty, whatever the one before left (an
		// error, in a round kept for the next single lookup).
		clear(r.want)
		r.keys, r.pages, r.used = r.keys[:0], r.pages[:0], 0
		var n int
		err := x.guard(func() (err error) {
			n, err = r.run(fps[base:], found[base:])
			return err
		})
		if err != nil {
			return err
		}
		base += n
	}
	return nil
}

// maxWindow is the most bytes of fingerprints the pread path reads for a
// key: a bucket of a sound index holds a few dozen. A directory entry
// that says more (damage within the checksums) is looked up through the
// mapping, whose checks say what is wrong, rather than read into buffers.
const maxWindow = 16 * PageSize

// run answers a round of the first keys of fps, as many as its pages
// allow (at least one), and returns how many: the segments the keys open
// (through the mapping: their headers and CRC tables, asked for at once
// first), then the directory pages not held, then the buckets' pages,
// each stage's reads at once.
func (r *preadRound) run(fps []Fingerprint, found []bool) (int, error) {
	x := r.x
	// The round's keys: those whose directory pages not held fit half
	// of the round's pages (a key asks for two at most), then those whose
	// buckets' pages fit the other half.
	fps = fps[:min(len(fps), r.limit)]
	var toOpen []int
	for _, fp := range fps {
		if si := x.find(fp); si >= 0 && x.segs[si].seg.Load() == nil {
			toOpen = append(toOpen, si)
		}
	}
	slices.Sort(toOpen)
	toOpen = slices.Compact(toOpen)
	if len(toOpen) > 1 || (len(toOpen) == 1 && !x.headerResident(toOpen[0])) {
		for _, si := range toOpen {
			ref := x.foot.segments[si]
			x.willNeedHeader(ref)
			at := ref.offset + writerLayout(ref).dir // the directory's length word
			x.willNeedRange(at&^(PageSize-1), at+4)
		}
		// A few keys (a single query): where their buckets most likely
		// lie too, where this package's writer puts the fingerprints,
		// read with the headers rather than after them (their directory
		// pages only if the guess misses: guessWindow).
		if r.few {
			for _, fp := range fps {
				if si := x.find(fp); si >= 0 && x.segs[si].seg.Load() == nil {
					ref := x.foot.segments[si]
					x.willNeedGuess(ref, writerLayout(ref).fps+4, fp)
				}
			}
		}
	}
	segs := make([]*segment, len(fps))
	var guesses [][2]uint64  // a few keys': the fingerprints read first
	var wholeDirs []*segment // directories read whole, to be held
	var lastSeg *segment
	for i, fp := range fps {
		found[i] = false
		si := x.find(fp)
		if si < 0 {
			continue
		}
		s, err := x.lookupSegment(si)
		if err != nil {
			return 0, err
		}
		if i > 0 && len(r.keys)+2 > r.limit/2 {
			fps = fps[:i]
			break
		}
		segs[i] = s
		b := fp.bits(s.depth, s.dirBits)
		if r.few && !s.dirEntriesHeld(b) {
			// A few keys whose directory page is not held read where
			// their buckets most likely lie first, alone: a key those
			// fingerprints place needs no directory page, so a single
			// cold lookup reads once, not a directory page and then its
			// bucket.
			if from, to := s.guessWindow(fp); to > from && 16*(to-from) <= maxWindow && len(r.keys)+int(16*(to-from)/PageSize)+2 <= r.limit/2 {
				if guesses == nil {
					guesses = make([][2]uint64, len(fps))
				}
				guesses[i] = [2]uint64{from, to}
				r.ask(s, s.fpsAt+16*from, s.fpsAt+16*to, nil)
				// A segment looked up again and again reads its whole
				// directory once, with a guess, and holds it: its later
				// keys then read their bucket's page or two alone, not
				// a guess's eight.
				if s.guesses.Add(1) == wholeDirAfter && r.askWholeDir(s) {
					wholeDirs = append(wholeDirs, s)
				}
				continue
			}
		}
		// A batch's first key in a segment decides for the segment's
		// keys whether its directory is read whole (wholeDirPays); the
		// directory pages a batch reads one at a time are counted.
		if !r.few && s != lastSeg {
			lastSeg = s
			if r.wholeDirPays(s) && r.askWholeDir(s) {
				wholeDirs = append(wholeDirs, s)
			}
		}
		if n := r.ask(s, s.dirAt+4*b, s.dirAt+4*b+8, func(p uint32) bool { return s.heldDir(uint64(p)) != nil }); n > 0 && !r.few {
			s.dirReads.Add(uint32(n))
		}
	}
	if err := r.read(); err != nil {
		return 0, err
	}
	for _, s := range wholeDirs {
		r.holdDirs(s, s.dirAt, s.dirAt+4*uint64(len(s.dir)))
	}
	if guesses != nil {
		// The keys the guesses placed are answered (their segs entry
		// cleared: nothing more to read); the others' directory pages
		// are read now.
		for i, fp := range fps {
			g, s := guesses[i], segs[i]
			if s == nil || g[1] <= g[0] {
				continue
			}
			win := r.window(g[1] - g[0])
			r.bytesAt(s, s.fpsAt+16*g[0], s.fpsAt+16*g[1], unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(win))), 16*len(win)))
			ok, placed, err := s.searchGuess(fp, win, g[0])
			if err != nil {
				return 0, err
			}
			if placed {
				found[i], segs[i] = ok, nil
				x.guessed.Add(1)
				continue
			}
			x.guessMissed.Add(1)
			b := fp.bits(s.depth, s.dirBits)
			r.ask(s, s.dirAt+4*b, s.dirAt+4*b+8, func(p uint32) bool { return s.heldDir(uint64(p)) != nil })
		}
		if err := r.read(); err != nil {
			return 0, err
		}
	}
	// The buckets, and the fingerprints either side that an "absent"
	// is checked against (absentIn), while they fit the other half.
	bounds := make([][2]uint64, len(fps))
	first := len(r.pages)
	var e [8]byte
	for i, fp := range fps {
		s := segs[i]
		if s == nil {
			continue
		}
		b := fp.bits(s.depth, s.dirBits)
		r.bytesAt(s, s.dirAt+4*b, s.dirAt+4*b+8, e[:])
		lo, hi := uint64(binary.LittleEndian.Uint32(e[:])), uint64(binary.LittleEndian.Uint32(e[4:]))
		if lo > hi || hi > uint64(len(s.fps)) {
			return 0, fmt.Errorf("%w: segment %d at offset %d: directory entries %d and %d at offset %d (%d, %d) point outside its %d fingerprints",
				ErrCorrupt, s.index, s.ref.offset, b, b+1, s.ref.offset+s.dirAt+4*b, lo, hi, len(s.fps))
		}
		bounds[i] = [2]uint64{lo, hi}
		from, to := lo-min(lo, 2), min(hi+2, uint64(len(s.fps)))
		if 16*(to-from) > maxWindow {
			continue
		}
		if i > 0 && len(r.pages)-first+len(r.keys)+int(16*(to-from)/PageSize)+2 > r.limit/2 {
			fps = fps[:i]
			break
		}
		r.ask(s, s.fpsAt+16*from, s.fpsAt+16*to, nil)
	}
	if err := r.read(); err != nil {
		return 0, err
	}
	for i, fp := range fps {
		s := segs[i]
		if s == nil {
			continue
		}
		b := fp.bits(s.depth, s.dirBits)
		r.holdDirs(s, s.dirAt+4*b, s.dirAt+4*b+8)
		lo, hi := bounds[i][0], bounds[i][1]
		from, to := lo-min(lo, 2), min(hi+2, uint64(len(s.fps)))
		if 16*(to-from) > maxWindow {
			ok, err := s.contains(fp)
			if err != nil {
				return 0, err
			}
			found[i] = ok
			continue
		}
		win := r.window(to - from)
		r.bytesAt(s, s.fpsAt+16*from, s.fpsAt+16*to, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(win))), 16*len(win)))
		ok, err := s.searchWindow(fp, win, from, lo, hi)
		if err != nil {
			return 0, err
		}
		found[i] = ok
	}
	return len(fps), nil
}

// window is the round's window of n fingerprints, kept for the next key.
func (r *preadRound) window(n uint64) []Fingerprint {
	r.win = slices.Grow(r.win[:0], int(n))[:n]
	return r.win
}

// willNeedGuess asks for the pages where fp's bucket most likely lies in
// the segment whose fingerprints start at fpsAt in it (guessBucket).
func (x *Index) willNeedGuess(ref segmentRef, fpsAt uint64, fp Fingerprint) {
	from, to := guessBucket(ref, fp)
	at := ref.offset + fpsAt
	x.willNeedRange((at+from)&^(PageSize-1), at+to)
}

// guessBucket is where fp's bucket most likely lies among the segment's
// fingerprints, in bytes from the first: they are hashes, spread evenly
// between its first and last, so the count below fp is binomial around
// its share of the range; guessSpread standard deviations either side.
func guessBucket(ref segmentRef, fp Fingerprint) (from, to uint64) {
	n := float64(ref.count)
	if ref.last.Hi <= ref.first.Hi {
		return 0, 16 * ref.count // none, or all in one 2^-64 of the range
	}
	f := float64(min(max(fp.Hi, ref.first.Hi), ref.last.Hi)-ref.first.Hi) / float64(ref.last.Hi-ref.first.Hi)
	at, spread := f*n, guessSpread*math.Sqrt(n*f*(1-f))+32
	return 16 * uint64(max(at-spread, 0)), 16 * uint64(min(at+spread, n))
}

// guessSpread: a guess misses one key in 22 at 2 standard deviations
// (the directory page and the bucket are then read, one after the
// other); a wider one reads more pages in its one read (a variable: the
// tests make guesses miss).
var guessSpread = 2.0

// wholeDirAfter is the guess in a segment with which its directory is
// read whole: a directory (~0.2 bytes a key) is one read, paid back in
// the bytes and time of a few lookups (a guess reads several pages, a
// bucket one or two). A variable: the tests keep every lookup guessing.
var wholeDirAfter uint32 = 4

// askWholeDir asks for the segment's directory pages not held, if the
// budget can hold them and the round has room for them.
func (r *preadRound) askWholeDir(s *segment) bool {
	dir := 4 * uint64(len(s.dir))
	if r.x.dirBytes.Load()+int64(dir) > r.x.readBuffers/2 || len(r.keys)+int(dir/PageSize)+2 > r.limit/2 {
		return false
	}
	r.ask(s, s.dirAt, s.dirAt+dir, func(p uint32) bool { return s.heldDir(uint64(p)) != nil })
	return true
}

// wholeDirPays reports whether segment s's directory is read whole now,
// and held, rather than a page at a time for a batch's keys: once the
// pages its batches read one at a time before (dirReads) cost as much as
// one read of the whole directory at the device's rates (its bytes at the
// sequential rate, where a page read at random costs 1/rand). A
// rent-or-buy rule: a process that keeps looking keys up reads at most
// about twice the better of the two and then holds the index's top levels
// (issue 47), while a batch in a new process reads only its keys' pages.
// (Deciding on the batch's own keys too read whole directories for a new
// process's batch of 10^3 keys at 2·10^8: 2.4 times the bytes, and
// slower.)
func (r *preadRound) wholeDirPays(s *segment) bool {
	if s.dirWholeHeld() {
		return false
	}
	// The device's rates are asked for a batch that is priced; a
	// smaller one goes by the defaults (MinPricedBatch).
	rand, seq := devrate.Default.Random, devrate.Default.Seq
	if r.priced {
		rand, seq = r.x.deviceRates()
	}
	return float64(s.dirReads.Load()) >= 1+float64(4*len(s.dir))*rand/seq
}

// dirWholeHeld reports whether every page of the segment's directory is
// held.
func (s *segment) dirWholeHeld() bool {
	for p := range s.dirHeld {
		if s.dirHeld[p].Load() == nil {
			return false
		}
	}
	return true
}

// guessWindow is guessBucket's range in whole pages, as indexes of the
// fingerprints wholly in them: what a few keys read before, or instead
// of, their directory pages.
func (s *segment) guessWindow(fp Fingerprint) (from, to uint64) {
	lo, hi := guessBucket(s.ref, fp)
	end := s.fpsAt + 16*uint64(len(s.fps))
	a := max((s.fpsAt+lo)&^(PageSize-1), s.fpsAt)
	b := min((s.fpsAt+hi+PageSize-1)&^(PageSize-1), end)
	if b <= a {
		return 0, 0
	}
	return (a - s.fpsAt + 15) / 16, (b - s.fpsAt) / 16
}

// searchGuess answers whether the segment holds fp from win, a copy of
// its fingerprints from index from on (guessWindow's), if they place fp:
// fp is among them, or they hold the two either side of where it would
// be that an "absent" is checked against (absentIn). placed is false
// when fp lies outside them or at their edge: the directory then says
// where.
func (s *segment) searchGuess(fp Fingerprint, win []Fingerprint, from uint64) (ok, placed bool, err error) {
	at, ok := slices.BinarySearchFunc(win, fp, Fingerprint.Compare)
	if ok {
		return true, true, nil
	}
	q, n, to := from+uint64(at), uint64(len(s.fps)), from+uint64(len(win))
	if q-min(q, 2) < from || min(q+2, n) > to {
		return false, false, nil
	}
	return false, true, s.absentIn(win, from, fp, q)
}

// searchWindow is position's search of bucket [lo, hi) of the segment
// for fp, in win, a copy of the fingerprints from index from on (the
// bucket and the two either side).
func (s *segment) searchWindow(fp Fingerprint, win []Fingerprint, from, lo, hi uint64) (bool, error) {
	if lo == hi {
		return false, s.absentIn(win, from, fp, lo)
	}
	p := lo + (fp.bits(s.depth+s.dirBits, 16)*(hi-lo))>>16
	for p > lo && fp.Less(win[p-from]) {
		p--
	}
	for p < hi-1 && win[p-from].Less(fp) {
		p++
	}
	if win[p-from] == fp {
		return true, nil
	}
	q := p
	if win[p-from].Less(fp) {
		q = p + 1
	}
	return false, s.absentIn(win, from, fp, q)
}

// headerResident reports whether the first page of segment si is in
// memory: a segment not yet opened in a file that is.
func (x *Index) headerResident(si int) bool {
	at := x.foot.segments[si].offset
	if at+PageSize > uint64(len(x.data)) {
		return false
	}
	var vec [1]byte
	in, err := pagecache.Resident(x.data[at:at+PageSize], vec[:])
	return err == nil && in == 1
}

// probeCold tells Contains and small batches whether fp, in segment si,
// is read with pread: whether the page it would read first is not in
// memory. Warm, the test is made for one key in 64 (by its bits: no
// shared counter), a mincore an index's pages are in memory is rare next
// to a lookup of 300 ns; cold, for every key, next to a device read.
func (x *Index) probeCold(si int, fp Fingerprint) bool {
	if !x.preadable() {
		return false
	}
	s := x.segs[si].seg.Load()
	cold := x.coldSingles.Load()
	if !cold && s != nil && fp.Lo&63 != 0 {
		return false
	}
	now := true
	if s == nil {
		now = !x.headerResident(si)
	} else {
		// The directory entries are read from the mapping (planBatch
		// probes outside a batch's guard): a fault says cold, and the
		// lookup that follows says what is wrong.
		_ = x.guard(func() error {
			now = !s.bucketResident(fp)
			return nil
		})
	}
	if now != cold {
		x.coldSingles.Store(now)
	}
	return now
}

// bucketResident reports whether fp's directory entries and bucket are in
// memory (mincore; the directory first, which a cold lookup reads first).
func (s *segment) bucketResident(fp Fingerprint) bool {
	b := fp.bits(s.depth, s.dirBits)
	if !s.mappedResident(s.dirAt+4*b, s.dirAt+4*b+8) {
		return false
	}
	lo, hi := uint64(s.dir[b]), uint64(s.dir[b+1])
	n := uint64(len(s.fps))
	if lo > hi || hi > n {
		return true // the lookup says what is wrong
	}
	return s.mappedResident(s.fpsAt+16*(lo-min(lo, 2)), s.fpsAt+16*min(hi+2, n))
}

// mappedResident reports whether the pages of buf[from:to) are in memory.
func (s *segment) mappedResident(from, to uint64) bool {
	from &^= PageSize - 1
	to = min(to, uint64(len(s.buf)))
	if to <= from {
		return true
	}
	// The buffer starts on a page (Open checks segment offsets).
	var vec [4]byte
	for at := from; at < to; at += 4 * PageSize {
		end := min(at+4*PageSize, to)
		in, err := pagecache.Resident(s.buf[at:end], vec[:])
		if err != nil || uint64(in) < (end-at+PageSize-1)/PageSize {
			return false
		}
	}
	return true
}
