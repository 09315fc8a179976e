package fpstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/devrate"
	"github.com/fpdedup/fpdedup/internal/failpoint"
	"github.com/fpdedup/fpdedup/internal/pagecache"
	"github.com/fpdedup/fpdedup/internal/prefetch"
)

// Index is an open, memory-mapped index. Lookups are safe for concurrent
// use; Close must not race with them. Each page a lookup reads is checked
// against its CRC once per process; a damaged page is an ErrCorrupt error,
// never a wrong answer. So is damage to the structure a lookup relies on
// (filter, directory, order) in a file whose checksums agree with it, as
// far as lookupcheck.go says; Verify checks all of it.
type Index struct {
	path string
	// rates: the device's, for cold batch plans (deviceRates), from
	// ratesFor (WithRates)
	ratesOnce sync.Once
	rates     devrate.Rates
	ratesFor  func(path string, size int64) devrate.Rates
	size      int64
	data      []byte // the whole file, mapped read-only
	file      *os.File
	foot      footer
	segs      []segSlot

	lutBits uint
	lut     []int32
	segRank []uint64 // fingerprints in the segments before each (Rank)

	// The pread path (pread.go): what it may hold (WithReadBuffers,
	// Set.ShareReadBuffers), one batch at a time, and its descriptor,
	// opened at its first read.
	readBuffers int64
	preadBatch  sync.Mutex
	preadSlabs  [][][]byte // each share's slabs, kept from batch to batch under preadBatch
	// singleRounds: *preadRound of single lookups, kept for the next.
	singleRounds sync.Pool
	preadOnce    sync.Once
	preadF       *os.File
	preadFD      int

	// Written by lookups until readWhole: on a cache line of their own,
	// away from the fields every lookup reads.
	_         cpu.CacheLinePad
	lookups   atomic.Uint64 // counted until readWhole
	whole     atomic.Bool   // readWhole ran
	coldSpent atomic.Uint64 // ns the cold batches read at random are priced at (planBatch)
	more      atomic.Uint64 // keys expected after the batches asked so far (Set.ExpectMore)
	// coldSingles: the last single lookup probed (probeCold) found its
	// pages out of memory; dirBytes: the directory pages held (pread.go)
	coldSingles atomic.Bool
	dirBytes    atomic.Int64
	// The pread path's tallies (pread.go): the reads it made (runs of
	// neighbouring pages), and the few keys the fingerprints read where
	// their buckets most likely lie placed and did not.
	preadRuns, guessed, guessMissed atomic.Uint64
	_                               cpu.CacheLinePad

	// forceCold makes every batch read as a cold one (coldread.go), and
	// forcePath read as the path it names (pread.go) when not
	// pathPlanned: the tests' way to check their answers on files that
	// are in memory.
	forceCold atomic.Bool
	forcePath atomic.Uint32
}

type segSlot struct {
	mu  sync.Mutex
	seg atomic.Pointer[segment]
	err error
	// lookupErr is the segment's failed lookup checks (lookupcheck.go),
	// returned to every later lookup in it.
	lookupErr error
}

// segment is a segment whose page CRC table and FlatBuffers structure have
// been checked. Its slices alias the mapping.
type segment struct {
	ref      segmentRef
	index    int    // in the footer, for messages
	buf      []byte // the FlatBuffers buffer
	crcs     []byte // one CRC-32C per page of buf
	verified []atomic.Uint64
	// unverified counts the pages not yet checked: once it is 0, the
	// checks before each read are one load (see checked).
	unverified atomic.Int64
	dirBits    uint
	depth      uint
	dir        []uint32
	dirAt      uint64      // offset of dir[0] in buf
	filter     [][8]uint64 // blocked bloom
	filterAt   uint64
	fps        []Fingerprint
	fpsAt      uint64
	// lenWords: the filter's and the fingerprints' length words, which
	// loadSegment does not read; checked with the pages that hold them
	// (lengthWordsIn), once set.
	lenWords []lengthWord
	ordered  atomic.Bool // fps's pages and order checked (checkFingerprints)
	// lookupReady: what lookups check of the segment before its first
	// one passed (lookupcheck.go).
	lookupReady atomic.Bool
	// filterSampled: the filter may answer "absent" (trustFilter);
	// sampleErr, under sampleMu, is why not.
	filterSampled atomic.Bool
	sampleMu      sync.Mutex
	sampleErr     error
	// dirHeld: the directory's pages (from page dirFirst of buf) that
	// the pread path read and holds (pread.go); last, away from what
	// every lookup reads
	dirHeld  []atomic.Pointer[[]byte]
	dirFirst uint64
	crcHeld  atomic.Pointer[[]byte] // crcs, copied by the pread path (heldCRCs)
	// guesses: the few keys that read where their buckets most likely
	// lie, the directory not held (pread.go's run); dirReads: the
	// directory pages batches read a page at a time (wholeDirPays).
	guesses  atomic.Uint32
	dirReads atomic.Uint32
}

// An Option configures an index as it is opened.
type Option func(*Index)

// WithRates has a large lookup batch in the index, when it is not in
// memory, priced with the read rates rates gives for the index's path and
// size (its device's: coldread.go), instead of devrate.Default. rates is
// called at most once, when the first such batch is planned, from the
// goroutine that asked for it: the caller decides there whether to
// measure the device (devrate.Measure), which this package never does.
func WithRates(rates func(path string, size int64) devrate.Rates) Option {
	return func(x *Index) { x.ratesFor = rates }
}

// openTail is what Open reads of a file's end at once: the trailer and,
// in an index made by this package's writer, the footer (about 80 bytes a
// segment of up to 2^20 keys at 17 bytes a key: 20 KiB at 2·10^8 keys,
// which this reads as 28). A footer larger than the guess is read after.
// The device's time for a read grows with its size (a 64 KiB read takes
// twice a 4 KiB one here): not much more than the footer.
func openTail(size int64) int64 {
	return min(size, max(4<<10, int64(alignUp(uint64(size>>17+TrailerSize), PageSize))), 1<<20)
}

// openTailOf is openTail (a variable: the tests read footers past it).
var openTailOf = openTail

// Open maps the index at path after checking its header, trailer and footer.
func Open(path string, opts ...Option) (*Index, error) {
	if !littleEndian() {
		return nil, errors.New("fpdedup indexes are little-endian and this machine is not; refusing to read garbage")
	}
	if err := failpoint.Hit(failpoint.Open, path); err != nil {
		return nil, fmt.Errorf("cannot open index %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open index: %w", err)
	}
	// Kept open for streaming reads (Cursor), which must read the file
	// that was mapped even if its name is replaced meanwhile.
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot stat index %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (not a regular file)", path, ErrNotIndex)
	}
	size := st.Size()
	// The header, trailer and footer are a few hundred bytes at either
	// end: read without the kernel's read ahead (16-128 KiB a read, most
	// of what a single cold query read), which the cursors get back after.
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
	defer unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_NORMAL)
	// The header is asked for while the tail is read, and the tail
	// (trailer and footer) is read as one: a cold open waits for one
	// device read, not three in turn.
	_ = unix.Fadvise(int(f.Fd()), 0, HeaderSize, unix.FADV_WILLNEED)
	tail := make([]byte, openTailOf(size))
	if _, err := f.ReadAt(tail, size-int64(len(tail))); err != nil && err != io.EOF {
		return nil, fmt.Errorf("cannot read index %s: %w", path, err)
	}
	head := make([]byte, HeaderSize)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("cannot read index %s: %w", path, err)
	}
	hdr, err := decodeHeader(head[:n])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if size < HeaderSize+TrailerSize {
		return nil, fmt.Errorf("%s: %w: truncated to %d bytes (an index has at least %d)", path, ErrCorrupt, size, HeaderSize+TrailerSize)
	}
	tr, err := decodeTrailer(tail[len(tail)-TrailerSize:], size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if size > 1<<46 || uint64(size) != uint64(int(size)) {
		return nil, fmt.Errorf("%s: %w: size %d beyond what this build maps", path, ErrCorrupt, size)
	}
	// The footer is read, checked and decoded before anything is mapped, so
	// every size the reader later trusts has been checked against the file.
	var fbuf []byte
	if tailAt := uint64(size) - uint64(len(tail)); tr.FooterOffset >= tailAt && tr.FooterOffset+tr.FooterLength <= uint64(size) {
		fbuf = tail[tr.FooterOffset-tailAt:][:tr.FooterLength]
	} else {
		fbuf = make([]byte, tr.FooterLength)
		if _, err := f.ReadAt(fbuf, int64(tr.FooterOffset)); err != nil {
			return nil, fmt.Errorf("cannot read index %s: %w", path, err)
		}
	}
	if got := crc32c(fbuf); got != tr.FooterCRC {
		return nil, fmt.Errorf("%s: %w: footer checksum mismatch at offset %d (crc32c %08x, stored %08x)", path, ErrCorrupt, tr.FooterOffset, got, tr.FooterCRC)
	}
	ft, err := decodeFooter(fbuf, tr.FooterOffset, hdr.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkTrieRule(ft); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("cannot map index %s: %w", path, err)
	}
	// Read page by page until the lookups are enough to touch all of
	// the file (countLookups): a few lookups in a large index that is not
	// in the page cache read a page each, not 2 MiB.
	_ = unix.Madvise(data, unix.MADV_RANDOM)
	x := &Index{path: path, size: size, data: data, file: f, foot: ft}
	for _, o := range opts {
		o(x)
	}
	keep = true
	x.segs = make([]segSlot, len(x.foot.segments))
	x.buildLUT()
	x.segRank = make([]uint64, len(x.foot.segments))
	var below uint64
	for i, r := range x.foot.segments {
		x.segRank[i] = below
		below += r.count
	}
	return x, nil
}

func littleEndian() bool {
	var x uint16 = 1
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// readWhole tells the kernel that most of the file will be read: by a
// whole pass (Scan, Verify) or by lookups many times the file's 2 MiB
// extents. A fault then reads ahead (MADV_NORMAL instead of MADV_RANDOM)
// in huge folios (MADV_HUGEPAGE: one 2 MiB read a fault, mapped with one
// TLB entry). For an index not in the page cache that turns thousands of
// major faults into a handful, for a large query as for verify and dump
// (bench/results/ab-2026-12-03-s15.md). Pages already
// cached in small folios stay as they are. Errors are ignored: the advice
// is only advice (a kernel without transparent huge pages still reads
// ahead).
//
// After cold batches read at random (coldread.go), most 2 MiB extents
// hold a few small pages, around which no huge folio fits: the rest of
// the file is then read in the pieces between them (~85 KiB each after
// 2*10^5 keys in a 10^9-key index: 14 s where a whole read from nothing
// cached takes 6). dropPartial drops such extents' pages first, to be
// read again with their extents.
func (x *Index) readWhole() {
	if x.whole.Load() || x.whole.Swap(true) {
		return
	}
	_ = unix.Madvise(x.data, unix.MADV_NORMAL)
	_ = unix.Madvise(x.data, unix.MADV_HUGEPAGE)
	if x.coldSpent.Load() > 0 {
		x.dropPartial()
	}
}

// dropPartial drops the pages of the extents that are partly in memory:
// MADV_DONTNEED unmaps them here, POSIX_FADV_DONTNEED evicts them (those
// no other process maps; another's read-ahead of the same file goes too,
// to be read again with its extent). Extents wholly in memory stay. An
// access after that faults the same bytes back in, so lookups running
// meanwhile see the file unchanged.
func (x *Index) dropPartial() {
	fd := int(x.file.Fd())
	vec := make([]byte, extentSize/PageSize)
	for at := uint64(0); at < uint64(len(x.data)); at += extentSize {
		end := min(at+extentSize, uint64(len(x.data)))
		in, err := pagecache.Resident(x.data[at:end], vec)
		if err != nil {
			return
		}
		if in > 0 && uint64(in) < (end-at+PageSize-1)/PageSize {
			_ = unix.Madvise(x.data[at:end], unix.MADV_DONTNEED)
			_ = unix.Fadvise(fd, int64(at), int64(end-at), unix.FADV_DONTNEED)
		}
	}
}

// countLookups counts lookups in the file's range (a partition's index
// is not charged for keys outside it) until they are ReadAheadAfter: a
// heuristic for "most extents will be read anyway", after which fewer and
// larger reads (readWhole) cost less than a page a fault. Below it (a few
// keys in a terabyte index) the file is read a page a fault.
func (x *Index) countLookups(n int) {
	if x.whole.Load() {
		return
	}
	if x.lookups.Add(uint64(n)) >= x.ReadAheadAfter() && x.wholeFits() {
		x.readWhole()
	}
}

// ReadAheadAfter is how many lookups in the index's range make it read
// ahead in huge folios instead of a page a fault: four per 2 MiB
// of the file (0 for a file under 512 KiB: read ahead from the first). A
// benchmark of cold single lookups stays below it.
func (x *Index) ReadAheadAfter() uint64 { return 4 * uint64(x.size) / extentSize }

// Close unmaps the file. Slices obtained from the index are invalid after.
func (x *Index) Close() error {
	if x.data == nil {
		return nil
	}
	err := unix.Munmap(x.data)
	x.data = nil
	if cerr := x.file.Close(); err == nil {
		err = cerr
	}
	if x.preadF != nil {
		x.preadF.Close()
	}
	return err
}

// Path is the file the index was opened from.
func (x *Index) Path() string { return x.path }

// Spec is the fingerprint spec recorded in the index.
func (x *Index) Spec() Spec { return x.foot.spec }

// Range is the covered prefix range.
func (x *Index) Range() Range { return x.foot.rng }

// Len is the number of fingerprints.
func (x *Index) Len() uint64 { return x.foot.fingerprints }

// Size is the file size in bytes.
func (x *Index) Size() int64 { return x.size }

// Segments is the number of segments.
func (x *Index) Segments() int { return len(x.foot.segments) }

// Version is the format version of the file.
func (x *Index) Version() uint32 { return x.foot.version }

// guard runs fn with faults on mapped pages turned into errors: a file
// truncated under the mapping or an I/O error must not kill the process
// with SIGBUS, which recover() cannot catch (debug.SetPanicOnFault makes it
// a panic that can be). Any other panic on untrusted bytes is turned into
// ErrCorrupt too: the reader must never crash on an index.
func (x *Index) guard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if re, ok := r.(runtime.Error); ok {
				err = fmt.Errorf("%w: reading %s failed: %v (file truncated or unreadable?)", ErrCorrupt, x.path, re)
				return
			}
			err = fmt.Errorf("%w: reading %s failed: %v", ErrCorrupt, x.path, r)
		}
	}()
	// Damage found in a lookup names the file: with several indexes in a
	// set, the user must know which one to rebuild.
	if err := fn(); err != nil {
		if errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), x.path) {
			return fmt.Errorf("%s: %w", x.path, err)
		}
		return err
	}
	return nil
}

// find returns the segment that would hold fp, or -1: the last segment
// whose prefix is not above fp, if its node contains fp. A table on the
// leading bits narrows the search to the segments that start in fp's
// region, plus the one before them.
func (x *Index) find(fp Fingerprint) int {
	segs := x.foot.segments
	lo, hi := 0, len(segs)
	if x.lutBits > 0 {
		t := fp.Hi >> (64 - x.lutBits)
		lo, hi = max(int(x.lut[t])-1, 0), int(x.lut[t+1])
	}
	var i int
	if hi-lo <= 4 {
		// The table leaves at most four candidates: a short scan
		// mispredicts less, and costs less, than a binary search's
		// closure calls.
		i = lo - 1
		for i+1 < hi && !fp.Less(segs[i+1].node.Prefix) {
			i++
		}
	} else {
		i = lo + sort.Search(hi-lo, func(k int) bool { return fp.Less(segs[lo+k].node.Prefix) }) - 1
	}
	if i < 0 || !segs[i].node.contains(fp) {
		return -1
	}
	return i
}

// buildLUT makes lut[t] the number of segments that start before region t
// of the leading lutBits bits, for t = 0..2^lutBits.
func (x *Index) buildLUT() {
	segs := x.foot.segments
	if len(segs) < 2 {
		return
	}
	bits := uint(1)
	for 1<<bits < 4*len(segs) && bits < 20 {
		bits++
	}
	x.lutBits = bits
	x.lut = make([]int32, (1<<bits)+1)
	k := 0
	for t := range x.lut {
		for k < len(segs) && segs[k].node.Prefix.Hi>>(64-bits) < uint64(t) {
			k++
		}
		x.lut[t] = int32(k)
	}
}

// segment returns segment i, checking its page table and structure on first
// use.
func (x *Index) segment(i int) (*segment, error) {
	slot := &x.segs[i]
	if s := slot.seg.Load(); s != nil {
		return s, nil
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if s := slot.seg.Load(); s != nil {
		return s, nil
	}
	if slot.err != nil {
		return nil, slot.err
	}
	s, err := loadSegment(x.data, x.foot.segments[i])
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			slot.err = fmt.Errorf("segment %d at offset %d: %w", i, x.foot.segments[i].offset, err)
		} else {
			slot.err = fmt.Errorf("%w: segment %d at offset %d: %v", ErrCorrupt, i, x.foot.segments[i].offset, err)
		}
		return nil, slot.err
	}
	s.index = i
	slot.seg.Store(s)
	return s, nil
}

func loadSegment(data []byte, ref segmentRef) (*segment, error) {
	crcs := data[ref.pagesAt():ref.end()]
	if got := crc32c(crcs); got != ref.pagesCRC {
		return nil, fmt.Errorf("page checksum table at offset %d: crc32c %08x, stored %08x", ref.pagesAt(), got, ref.pagesCRC)
	}
	s := &segment{
		ref:      ref,
		buf:      data[ref.offset : ref.offset+ref.length],
		crcs:     crcs,
		verified: make([]atomic.Uint64, (ref.pages()+63)/64),
	}
	s.unverified.Store(int64(ref.pages()))
	// The table, vtable and vector headers sit in the buffer's first pages
	// (the writer builds the big vectors first, so they lie last).
	if err := s.verifyRange(0, min(uint64(len(s.buf)), 256)); err != nil {
		return nil, err
	}
	t, err := rootTable(s.buf)
	if err != nil {
		return nil, err
	}
	if err := s.verifyRange(uint64(t.vtable), uint64(t.vtable)+uint64(t.vlen)); err != nil {
		return nil, err
	}
	if objLen := binary.LittleEndian.Uint16(s.buf[t.vtable+2:]); true {
		if err := s.verifyRange(uint64(t.pos), uint64(t.pos)+uint64(objLen)); err != nil {
			return nil, err
		}
	}
	// Segment fields: 0 prefix_bits, 1 prefix_hi, 2 prefix_lo, 3 count,
	// 4 directory_bits, 5 directory, 6 filter_kind, 7 filter_hashes,
	// 8 filter, 9 fingerprints.
	prefix := node{Bits: t.u8(0, 0), Prefix: Fingerprint{t.u64(1, 0), t.u64(2, 0)}}
	count := t.u64(3, 0)
	s.depth = uint(prefix.Bits)
	s.dirBits = uint(t.u8(4, 0))
	kind := t.u8(6, 0)
	hashes := t.u8(7, 0)
	// The directory's length word lies in the first pages, read above;
	// those of the filter and the fingerprints lie a page each of their
	// own, far in, which a cold lookup would read for that word alone:
	// their lengths follow from the count (the footer's, checked equal
	// below), and the words are checked where their pages are read
	// (lengthWordsIn) and by Verify.
	for _, v := range []struct {
		field int
		at    *uint64
	}{{5, &s.dirAt}, {8, &s.filterAt}, {9, &s.fpsAt}} {
		vecAt, ok := t.target(v.field)
		if !ok {
			return nil, fmt.Errorf("vector field %d missing: %v", v.field, t.err)
		}
		*v.at = uint64(vecAt) + 4
	}
	if err := s.verifyRange(s.dirAt-4, s.dirAt); err != nil {
		return nil, err
	}
	dir := t.vector(5, 4)
	filter := t.vectorOf(8, 1, 64*uint64(BloomBlocks(int(min(count, 1<<40)), bloomBitsPerKey)))
	fps := t.vectorOf(9, 16, count)
	if t.err != nil {
		return nil, t.err
	}
	switch {
	case prefix != ref.node || count != ref.count:
		return nil, fmt.Errorf("prefix or count differs from the footer's")
	case s.dirBits > 24 || uint64(len(dir)) != 4*((1<<s.dirBits)+1):
		return nil, fmt.Errorf("directory of %d bytes for %d bits", len(dir), s.dirBits)
	case kind != 1 || hashes != BloomHashes || len(filter) != 64*BloomBlocks(int(count), bloomBitsPerKey):
		return nil, fmt.Errorf("filter kind %d with %d hashes and %d bytes (want kind 1, %d hashes, %d bytes)", kind, hashes, len(filter), BloomHashes, 64*BloomBlocks(int(count), bloomBitsPerKey))
	case uint64(len(fps)) != 16*count:
		return nil, fmt.Errorf("%d bytes of fingerprints for a count of %d", len(fps), count)
	case s.dirAt%4 != 0 || s.fpsAt%8 != 0 || s.filterAt%64 != 0:
		return nil, fmt.Errorf("misaligned vectors")
	}
	s.lenWords = []lengthWord{{s.filterAt - 4, uint64(len(filter)), "filter"}, {s.fpsAt - 4, count, "fingerprints"}}
	for _, w := range s.lenWords {
		// Those in pages checked already (the first ones, in a small
		// segment).
		if p := w.at / PageSize; s.verified[p/64].Load()&(1<<(p%64)) != 0 {
			if err := s.lengthWordsIn(p, s.buf[p*PageSize:min((p+1)*PageSize, uint64(len(s.buf)))]); err != nil {
				return nil, err
			}
		}
	}
	s.dir = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dir))), len(dir)/4)
	s.fps = unsafe.Slice((*Fingerprint)(unsafe.Pointer(unsafe.SliceData(fps))), count)
	s.filter = unsafe.Slice((*[8]uint64)(unsafe.Pointer(unsafe.SliceData(filter))), len(filter)/64)
	s.dirFirst = s.dirAt / PageSize
	s.dirHeld = make([]atomic.Pointer[[]byte], (s.dirAt+uint64(len(dir))+PageSize-1)/PageSize-s.dirFirst)
	return s, nil
}

// verifyPage checks page p of the segment buffer once per process. It and
// verifyRange are small enough to inline, so that once every page of the
// segment has been checked (soon into a long run of lookups) a check
// before a read is one load rather than a test of bits long set, which
// otherwise is a visible share of a long run's cycles.
func (s *segment) verifyPage(p uint64) error {
	if s.checked() {
		return nil
	}
	return s.checkPage(p)
}

// verifyRange checks the pages holding buf[from:to].
func (s *segment) verifyRange(from, to uint64) error {
	if s.checked() {
		return nil
	}
	return s.checkPages(from, to)
}

// checkRead is the one check of page p's bytes, page, however they were
// read (through the mapping, with pread, by a cursor): their CRC, got,
// against the page CRC table's, want; then the length words they hold.
func (s *segment) checkRead(p uint64, page []byte, got, want uint32) error {
	if got != want {
		return fmt.Errorf("%w: page checksum mismatch at offset %d (segment at %d, page %d)", ErrCorrupt, s.ref.offset+p*PageSize, s.ref.offset, p)
	}
	return s.lengthWordsIn(p, page)
}

// lengthWord is a vector's length word: where it lies in the buffer, the
// length the segment's count gives the vector, and its name.
type lengthWord struct {
	at, want uint64
	what     string
}

// lengthWordsIn checks the length words that page p, whose bytes are page
// and whose checksum was found right, holds: a word that is not the
// length the count gives is damage within the checksums (a writer's).
func (s *segment) lengthWordsIn(p uint64, page []byte) error {
	for _, w := range s.lenWords {
		if w.at/PageSize != p || w.at%PageSize+4 > uint64(len(page)) {
			continue
		}
		if got := binary.LittleEndian.Uint32(page[w.at%PageSize:]); uint64(got) != w.want {
			return fmt.Errorf("%w: the %s vector's length word at offset %d says %d where the count gives %d (segment at %d)", ErrCorrupt, w.what, s.ref.offset+w.at, got, w.want, s.ref.offset)
		}
	}
	return nil
}

// checked reports whether every page of the segment has been checked.
func (s *segment) checked() bool { return s.unverified.Load() == 0 }

func (s *segment) checkPage(p uint64) error {
	word, bit := &s.verified[p/64], uint64(1)<<(p%64)
	if word.Load()&bit != 0 {
		return nil
	}
	start := p * PageSize
	end := min(start+PageSize, uint64(len(s.buf)))
	if err := s.checkRead(p, s.buf[start:end], crc32c(s.buf[start:end]), binary.LittleEndian.Uint32(s.crcs[4*p:])); err != nil {
		return err
	}
	if word.Or(bit)&bit == 0 {
		s.unverified.Add(-1)
	}
	return nil
}

func (s *segment) checkPages(from, to uint64) error {
	if to <= from {
		return nil
	}
	for p := from / PageSize; p <= (to-1)/PageSize; p++ {
		if err := s.checkPage(p); err != nil {
			return err
		}
	}
	return nil
}

// contains answers for one fingerprint of this segment: the filter's block
// and the directory entry are loaded together (independent loads, so their
// cache misses overlap), then, if the filter lets the key through, one
// bucket of fingerprints is searched from an interpolated position, and an
// "absent" is checked where the search stopped (absentAt). The answer
// relies on lookupSegment's checks too (Info's probes, which only
// estimate the filter's rate, do without).
func (s *segment) contains(fp Fingerprint) (bool, error) {
	_, found, err := s.position(fp)
	return found, err
}

// position is contains that also says where in the segment fp is.
func (s *segment) position(fp Fingerprint) (uint64, bool, error) {
	blk := BloomBlock(fp, uint64(len(s.filter)))
	b := fp.bits(s.depth, s.dirBits)
	if err := s.verifyPage((s.filterAt + 64*blk) / PageSize); err != nil {
		return 0, false, err
	}
	if err := s.verifyRange(s.dirAt+4*b, s.dirAt+4*b+8); err != nil {
		return 0, false, err
	}
	lo, hi := uint64(s.dir[b]), uint64(s.dir[b+1])
	if !BloomTest(&s.filter[blk], fp) && !zeroBlock(&s.filter[blk]) {
		return 0, false, s.trustFilter()
	}
	if lo > hi || hi > uint64(len(s.fps)) {
		return 0, false, s.badDirectory(b)
	}
	if lo == hi {
		return 0, false, s.absentAt(fp, lo)
	}
	if err := s.verifyRange(s.fpsAt+16*lo, s.fpsAt+16*hi); err != nil {
		return 0, false, err
	}
	// Fingerprints are uniform within the bucket: start where the next
	// bits say and walk (usually zero or one step, same cache line).
	p := lo + (fp.bits(s.depth+s.dirBits, 16)*(hi-lo))>>16
	for p > lo && fp.Less(s.fps[p]) {
		p--
	}
	for p < hi-1 && s.fps[p].Less(fp) {
		p++
	}
	if s.fps[p] == fp {
		return p, true, nil
	}
	return 0, false, s.absentAt(fp, insertionPoint(s.fps, fp, p))
}

// Rank reports whether fp is in the index and, if so, how many of the
// index's fingerprints are smaller: its position in ascending order, for a
// caller that keeps values for the fingerprints in an array of its own.
// Safe for concurrent use.
func (x *Index) Rank(fp Fingerprint) (rank uint64, found bool, err error) {
	err = x.guard(func() error {
		i := x.find(fp)
		if i < 0 {
			return nil
		}
		x.countLookups(1)
		s, err := x.lookupSegment(i)
		if err != nil {
			return err
		}
		var p uint64
		if p, found, err = s.position(fp); found {
			// A rank counts on the order before fp too: its neighbours
			// at least must be in order (lookupcheck.go).
			if err := s.foundAt(fp, p); err != nil {
				return err
			}
			rank = x.segRank[i] + p
		}
		return err
	})
	return rank, found, err
}

// RankBatch is Rank of each of fps: found[i], and ranks[i] where found
// (0 where not). Its lookups overlap their cache misses (or, cold, their
// reads) as ContainsBatch's do, several times the keys a second of Rank
// one key after another; it looks them up on the calling goroutine, so a
// caller with cores to spare shares its keys among them. Safe for
// concurrent use.
func (x *Index) RankBatch(fps []Fingerprint, ranks []uint64, found []bool) error {
	if len(ranks) < len(fps) || len(found) < len(fps) {
		return fmt.Errorf("fpstore: RankBatch of %d keys given %d ranks and %d answers", len(fps), len(ranks), len(found))
	}
	clear(ranks[:len(fps)])
	// The pread path answers without positions: a batch planned for it
	// reads through the mapping, its pages asked for at once.
	cold := x.planBatch(fps) != pathMapped
	return x.lookupBatch(fps, found[:len(fps)], ranks[:len(fps)], false, cold)
}

// Contains reports whether fp is in the index.
func (x *Index) Contains(fp Fingerprint) (found bool, err error) {
	err = x.guard(func() error {
		i := x.find(fp)
		if i < 0 {
			return nil
		}
		pread := false
		switch readPath(x.forcePath.Load()) {
		case pathPread:
			pread = true
		case pathPlanned:
			pread = x.probeCold(i, fp)
		}
		if pread {
			// One device read once the segment's directory page is
			// held, where the mapping faults page after page: pread.go.
			x.countLookups(1)
			var one [1]bool
			err := x.preadKeys([]Fingerprint{fp}, one[:])
			found = one[0]
			return err
		}
		if x.segs[i].seg.Load() == nil && !x.whole.Load() && !x.preadable() {
			x.willNeedFew([]Fingerprint{fp}) // the first key of a segment: coldread.go
		}
		x.countLookups(1)
		s, err := x.lookupSegment(i)
		if err != nil {
			return err
		}
		found, err = s.contains(fp)
		return err
	})
	return found, err
}

// ContainsBatch answers for each of fps into found (same length), with the
// fault guard paid once per batch. Lookups go in groups whose stages
// (filter slots, directory entries, a guessed bucket position) each
// prefetch the lines they will read for the whole group first, so the CPU
// overlaps the cache misses of a whole group: a per-key binary search is
// memory-latency bound, most of its time waiting in the bucket search. Go
// has no prefetch intrinsic; internal/prefetch issues the instruction from
// assembly.
func (x *Index) ContainsBatch(fps []Fingerprint, found []bool) error {
	return x.containsBatch(fps, found, false)
}

// containsBatch is ContainsBatch, told whether fps are in ascending order
// of their leading bits (a Set's sorted windows), where a key is most
// often in the segment of the key before it.
func (x *Index) containsBatch(fps []Fingerprint, found []bool, sorted bool) error {
	path := x.planBatch(fps)
	if path == pathPread {
		return x.preadKeys(fps, found)
	}
	cold := path == pathAdvised
	if len(fps) >= 2*minSharedBatch { // most batches are not: no scheduler lock for them
		if parts := min(runtime.GOMAXPROCS(0), len(fps)/minSharedBatch); parts > 1 {
			return x.containsShared(fps, found, sorted, parts, cold)
		}
	}
	return x.lookupBatch(fps, found, nil, sorted, cold)
}

// minSharedBatch is the fewest keys a core is given to look up when a
// batch is shared among the cores. In a large index in memory most of a
// lookup in a new process is the kernel mapping the pages the keys touch
// (a fault for each huge page, costly in a VM); in one not in memory, the
// kernel issuing the reads a group asks for (coldread.go). The cores take
// either in parallel, and a cold batch keeps twice the reads in flight. A
// few thousand keys amortize a goroutine.
const minSharedBatch = 2048

// containsShared looks up parts contiguous shares of the batch at once,
// each on its own goroutine (the caller's the first). Keys in order stay
// in order within each share. The error returned is the first share's
// that failed: the one an unshared batch would have stopped at first.
func (x *Index) containsShared(fps []Fingerprint, found []bool, sorted bool, parts int, cold bool) error {
	errs := make([]error, parts)
	share := func(p int) {
		lo, hi := len(fps)*p/parts, len(fps)*(p+1)/parts
		errs[p] = x.lookupBatch(fps[lo:hi], found[lo:hi], nil, sorted, cold)
	}
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { share(p) })
	}
	share(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lookupBatch answers a batch (or a share of one) on the calling
// goroutine, warm or cold as planned; with ranks, each found key's rank
// too (Rank's).
func (x *Index) lookupBatch(fps []Fingerprint, found []bool, ranks []uint64, sorted, cold bool) error {
	return x.guard(func() error {
		if !cold && len(fps) < coldMinBatch && !x.whole.Load() && !x.preadable() {
			// Keys in segments not yet open (coldread.go); with read
			// buffers, planBatch probed them (probeCold) instead.
			x.willNeedFew(fps)
		}
		size := groupSize
		if cold {
			size = coldGroupSize
		}
		g := newLookupGroup(min(size, len(fps)), cold)
		g.useFilter, g.sorted = true, sorted
		for base, end := 0, 0; base < len(fps); base = end {
			if g.cold && x.whole.Load() {
				// Another batch's plan reads the file whole now: pages
				// asked for one by one would break its extents up.
				g.cold, size = false, groupSize
			}
			end = min(base+size, len(fps))
			if g.cold && base == 0 {
				// A first small group tells whether the filter pays
				// (mostly absent keys) before a large one reads a
				// filter page for each of its keys.
				end = min(coldFirstGroup, len(fps))
			}
			if ranks != nil {
				g.ranks = ranks[base:end]
			}
			if err := g.run(x, fps[base:end], found[base:end]); err != nil {
				return err
			}
			// The filter only pays when keys are absent: when most of
			// a group passed it, the next groups go straight to the
			// directory (the answers are exact either way), and every
			// 16th group tries it again: re-enabling it after each group
			// that skipped it would probe every other group for keys
			// that are mostly present.
			if g.useFilter || base/size%16 == 15 {
				g.useFilter = g.passed*4 < (end-base)*3
			}
		}
		return nil
	})
}

// groupSize is how many lookups overlap: about what the CPU's miss
// buffers can have in flight.
const groupSize = 32

type lookupGroup struct {
	useFilter  bool
	sorted     bool // keys come in order: try the segment of the key before
	cold       bool // the pages are read from the device: coldread.go
	passed     int  // keys of the last group that the filter let through
	seg        []*segment
	pos        []int32 // guessed index of the key in its segment
	lo         []int32
	hi         []int32
	addrs      []uintptr // lines to prefetch, two a key
	segsToLoad []int     // cold: segments to read the headers of
	ranks      []uint64  // RankBatch's: the group's keys' ranks
	segRank    []uint64  // the index's: fingerprints before each segment
}

func newLookupGroup(n int, cold bool) *lookupGroup {
	return &lookupGroup{cold: cold, seg: make([]*segment, n), pos: make([]int32, n), lo: make([]int32, n), hi: make([]int32, n), addrs: make([]uintptr, 2*n)}
}

// fetch asks for the lines at addrs before a stage reads them: from the
// CPU's caches when the index is in memory, from the device (all the
// stage's pages at once) when it is cold.
func (g *lookupGroup) fetch(x *Index, addrs []uintptr) {
	if g.cold {
		x.willNeed(addrs)
		return
	}
	prefetch.Addrs(addrs)
}

// run answers a group of lookups in stages, each of which first asks for
// the lines (cold: the pages) it reads, all of the group's at once, so
// that their misses overlap. Each stage takes the group's arrays as locals
// of the group's length: their bounds checks go, and no slice header is
// loaded from g a key.
func (g *lookupGroup) run(x *Index, fps []Fingerprint, found []bool) error {
	g.passed = 0
	if g.cold {
		x.willNeedSegments(g, fps)
	}
	if err := g.findSegments(x, fps, found); err != nil {
		return err
	}
	if g.useFilter {
		if err := g.filter(x, fps); err != nil {
			return err
		}
	}
	if err := g.directory(x, fps); err != nil {
		return err
	}
	g.fetchGuesses(x, len(fps))
	g.segRank = x.segRank
	return g.walk(fps, found)
}

// findSegments is stage 1: each key's segment (nil: none holds its
// range). In sorted keys, a key in the node of the key before it is in
// the same segment (nodes are disjoint, checked at Open), and most keys
// skip find and segment. In keys in no order the test would mostly fail,
// a branch mispredicted for nothing, so it is made only for sorted keys.
func (g *lookupGroup) findSegments(x *Index, fps []Fingerprint, found []bool) error {
	segs := g.seg[:len(fps)]
	found = found[:len(fps)]
	var last *segment
	for i, fp := range fps {
		found[i] = false
		if g.sorted && last != nil && last.ref.node.contains(fp) {
			segs[i] = last
			continue
		}
		segs[i] = nil
		si := x.find(fp)
		if si < 0 {
			continue
		}
		s, err := x.lookupSegment(si)
		if err != nil {
			return err
		}
		segs[i], last = s, s
	}
	return nil
}

// filter is stage 1's second half: the keys the filter rules out leave
// the group (their segment nil); the filter blocks are fetched first.
func (g *lookupGroup) filter(x *Index, fps []Fingerprint) error {
	segs := g.seg[:len(fps)]
	n := 0
	for i, fp := range fps {
		if s := segs[i]; s != nil {
			g.addrs[n] = uintptr(unsafe.Pointer(&s.filter[BloomBlock(fp, uint64(len(s.filter)))]))
			n++
		}
	}
	g.fetch(x, g.addrs[:n])
	for i, fp := range fps {
		s := segs[i]
		if s == nil {
			continue
		}
		ok, err := s.mayContain(fp)
		if err != nil {
			return err
		}
		if !ok {
			segs[i] = nil
			continue
		}
		g.passed++
	}
	return nil
}

// directory is stage 2: each key's directory bucket, and a guess of its
// position inside it from the bits after the directory's: fingerprints
// are uniform. The entries are fetched first: a directory is 4 bytes a
// bucket of ~24 keys, so a large index's does not stay cached.
func (g *lookupGroup) directory(x *Index, fps []Fingerprint) error {
	segs, pos, los, his := g.seg[:len(fps)], g.pos[:len(fps)], g.lo[:len(fps)], g.hi[:len(fps)]
	n := 0
	for i, fp := range fps {
		if s := segs[i]; s != nil {
			g.addrs[n] = uintptr(unsafe.Pointer(&s.dir[fp.bits(s.depth, s.dirBits)]))
			n++
		}
	}
	if g.cold {
		n = x.willNeedDirectories(g, fps, n)
	}
	g.fetch(x, g.addrs[:n])
	for i, fp := range fps {
		s := segs[i]
		if s == nil {
			continue
		}
		b := fp.bits(s.depth, s.dirBits)
		if err := s.verifyRange(s.dirAt+4*b, s.dirAt+4*b+8); err != nil {
			return err
		}
		lo, hi := s.dir[b], s.dir[b+1]
		if lo > hi || uint64(hi) > uint64(len(s.fps)) {
			return s.badDirectory(b)
		}
		los[i], his[i] = int32(lo), int32(hi)
		frac := fp.bits(s.depth+s.dirBits, 16)
		pos[i] = int32(lo + uint32((frac*uint64(hi-lo))>>16))
	}
	return nil
}

// fetchGuesses fetches the lines of the n keys' guesses before the walk:
// with the walk's compares between plain loads, the reorder buffer holds
// two or three misses at a time; a loop of plain loads alone holds the
// group's, but stalls until the last arrives, and a prefetch retires at
// once. (Walking one group while the next one's lines load gains nothing
// more.)
func (g *lookupGroup) fetchGuesses(x *Index, n int) {
	segs, pos, los, his := g.seg[:n], g.pos[:n], g.lo[:n], g.hi[:n]
	k := 0
	for i := range segs {
		if s := segs[i]; s != nil && los[i] < his[i] {
			// The key is nearly always in the guess's line or a
			// neighbour (its rank in the bucket is binomial around the
			// guess), so the neighbour line on the guess's nearer side is
			// fetched too: two lines a key that hold more of the likely
			// places than the guess's line alone or the lines two places
			// either side. (Nearer as the writer lays fingerprints out,
			// 16-byte aligned; the format promises 8, where the choice is
			// only less often the right one.)
			p := min(pos[i], his[i]-1)
			a := uintptr(unsafe.Pointer(&s.fps[p]))
			g.addrs[k] = a
			if a&63 < 32 {
				g.addrs[k+1] = uintptr(unsafe.Pointer(&s.fps[max(p-2, los[i])]))
			} else {
				g.addrs[k+1] = uintptr(unsafe.Pointer(&s.fps[min(p+2, his[i]-1)]))
			}
			k += 2
		}
	}
	g.fetch(x, g.addrs[:k])
}

// walk is stage 3: from each guess to the key, or to where it would be
// (absentAt checks that the order says it is absent).
func (g *lookupGroup) walk(fps []Fingerprint, found []bool) error {
	segs, pos, los, his := g.seg[:len(fps)], g.pos[:len(fps)], g.lo[:len(fps)], g.hi[:len(fps)]
	found = found[:len(fps)]
	for i, fp := range fps {
		s := segs[i]
		if s == nil {
			continue
		}
		lo, hi, p := int(los[i]), int(his[i]), int(pos[i])
		if lo == hi {
			if err := s.absentAt(fp, uint64(lo)); err != nil {
				return err
			}
			continue
		}
		if err := s.verifyRange(s.fpsAt+16*uint64(lo), s.fpsAt+16*uint64(hi)); err != nil {
			return err
		}
		if p >= hi {
			p = hi - 1
		}
		for p > lo && fp.Less(s.fps[p]) {
			p--
		}
		for p < hi-1 && s.fps[p].Less(fp) {
			p++
		}
		if found[i] = s.fps[p] == fp; !found[i] {
			if err := s.absentAt(fp, insertionPoint(s.fps, fp, uint64(p))); err != nil {
				return err
			}
		} else if g.ranks != nil {
			// As Rank: a rank counts on the order before fp too.
			if err := s.foundAt(fp, uint64(p)); err != nil {
				return err
			}
			g.ranks[i] = g.segRank[s.index] + uint64(p)
		}
	}
	return nil
}

// mayContain probes the segment's filter: one block, one cache line, whose
// page is checked first. An all-zero block lets every key through
// (zeroBlock), and the filter's "absent" waits for its sample (trustFilter).
func (s *segment) mayContain(fp Fingerprint) (bool, error) {
	b := BloomBlock(fp, uint64(len(s.filter)))
	if err := s.verifyPage((s.filterAt + 64*b) / PageSize); err != nil {
		return false, err
	}
	if BloomTest(&s.filter[b], fp) || zeroBlock(&s.filter[b]) {
		return true, nil
	}
	return false, s.trustFilter()
}

// Scan calls fn with each segment's fingerprints in ascending order, after
// checking every page of the segment and that its fingerprints are
// strictly ascending from the footer's first to its last (so inside the
// segment's node and the covered range, above the segment before: see
// readcheck.go); a segment that fails is an ErrCorrupt error naming the
// file, segment and offset, and none of its fingerprints reach fn. The
// slice aliases the mapping: valid until Close, and only while fn runs if
// the caller keeps no reference.
func (x *Index) Scan(fn func(fps []Fingerprint) error) error {
	x.readWhole()
	for i := range x.foot.segments {
		err := x.guard(func() error {
			s, err := x.segment(i)
			if err != nil {
				return err
			}
			if err := x.checkFingerprints(i, s); err != nil {
				return err
			}
			return fn(s.fps)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
