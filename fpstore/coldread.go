package fpstore

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/devrate"
	"github.com/fpdedup/fpdedup/internal/pagecache"
	"github.com/fpdedup/fpdedup/internal/sysinfo"
)

// Cold reads. A batch of lookups in an index that is not in memory would
// otherwise read a page a fault, one fault at a time, or the whole file,
// however little of it the batch needs. It is read instead the way a
// device is fastest at random reads, many at once: each stage of a lookup
// group (segment headers, filter blocks, directory entries, the guessed
// fingerprints) asks the kernel for all of its group's pages at once
// (MADV_WILLNEED: reads queued together, in flight in parallel) before it
// touches them, in groups of coldGroupSize keys. Whether that costs less
// than one sequential read of the file is priced with the device's rates
// (Index.deviceRates, which the caller gives: WithRates); answers, order
// and the checks of every page are the warm path's. This is the path of
// an index opened without read buffers; with them, cold batches and
// single lookups read with pread instead (pread.go), and planBatch
// chooses among the mapping, pread and the whole read.

// coldGroupSize is how many keys' pages are asked for at once: enough to
// keep a device's queue full (fio: 4 KiB random reads reach their peak
// near depth 32), few enough that the pages of a group stay cached until
// the group reads them.
const coldGroupSize = 4096

// coldFirstGroup is the size of a cold batch's first group, which learns
// whether the filter pays (lookupGroup.useFilter) for the rest.
const coldFirstGroup = 256

// coldMinBatch is the smallest batch that is planned: below it the pages
// a batch reads are a handful, and a check of their residency costs more
// than it saves.
const coldMinBatch = 64

// MinPricedBatch is the fewest keys a lookup batch asks the device's
// rates (WithRates) for: a caller that looks up fewer at a time never
// has them asked.
const MinPricedBatch = coldMinBatch

// A cold batch read at random is priced in device reads: coldReadsPerKey
// a key (its filter block, its directory entry, its fingerprints; a
// neighbour's read sometimes serves it) and coldReadsPerSegment for each
// segment the batch opens (its checksum table, header and the length
// words of its vectors). Fitted to the reads the scale job counted at
// 10^7-10^9 keys (bench/results/scale-2026-12-06-s27): 1.72 reads a key
// for 10^4 present keys in 1024 segments, 1.14 for 10^5.
const (
	coldReadsPerKey     = 1.1
	coldReadsPerSegment = 5
)

// coldShare is the share of the device's random reads (devrate: 4 KiB,
// 32 in flight) that a cold batch's lookup groups keep busy: they ask for
// a stage's pages, then wait for them. Measured on a 10^9-key index
// (bench/results/query-share-2026-12-06-s27.md, scale-2026-12-06-s28):
// 64% of fio's depth-32 rate, 68% of devrate's.
const coldShare = 0.65

// wholeFits reports whether reading the index whole can pay: only when
// it fits in the machine's memory. A larger one's extents would be
// evicted before the next batch came back to them, and each batch would
// read the 2 MiB around each of its keys again.
func (x *Index) wholeFits() bool { return uint64(x.size) <= memoryForWhole() }

// memoryForWhole is the machine's memory (a variable: the tests set it).
var memoryForWhole = sync.OnceValue(func() uint64 {
	if m := sysinfo.MemTotal(); m > 0 {
		return uint64(m)
	}
	return math.MaxUint64 // unknown: no limit
})

// randomCost is how long reading the pages of n keys at random takes, in
// seconds, on a device doing rand reads a second, in an index of segments
// segments: the segments the keys open are those n keys drawn at random
// reach.
func randomCost(n float64, segments int, rand float64) float64 {
	opened := 0.0
	if segments > 0 {
		s := float64(segments)
		opened = s * -math.Expm1(-n/s)
	}
	return (coldReadsPerKey*n + coldReadsPerSegment*opened) / (coldShare * rand)
}

// wholeCost is how long reading the whole index takes, in seconds.
func wholeCost(size int64, seq float64) float64 { return float64(size) / seq }

// readsWhole reports whether a cold batch that costs batch seconds read at
// random is better served by reading the file whole (whole seconds),
// after spent seconds of cold batches read at random before it, when
// reading it and the keys expected after it at random costs ahead: when
// those cost more than the whole read, or the batches read at random,
// this one included, would have. The second, which alone decides when
// nothing is known of the keys to come, reads a stream of batches none
// of which would pay for the whole file alone once its random reads have
// cost as much (at most twice the better of the two plans), and a batch
// that touches a small part of the file reads only that.
func readsWhole(spent, batch, ahead, whole float64) bool {
	return ahead > whole || spent+batch > whole
}

// deviceRates are the rates of the device under the index: 4 KiB random
// reads a second at depth 32 and bytes a second read whole, asked of the
// caller (WithRates) once, when the first batch is planned.
func (x *Index) deviceRates() (rand, seq float64) {
	x.ratesOnce.Do(func() {
		x.rates = devrate.Default
		if x.ratesFor != nil {
			x.rates = x.ratesFor(x.path, x.size)
		}
	})
	return x.rates.Random, x.rates.Seq
}

// readPath is how a batch reads the index's pages.
type readPath uint32

const (
	pathPlanned readPath = iota // forcePath: none forced
	pathMapped                  // the mapping, a fault a page (warm: no fault)
	pathAdvised                 // the mapping, each stage's pages asked for at once (coldread.go)
	pathPread                   // pread of the pages the keys need (pread.go)
	pathWhole                   // the mapping, read ahead in huge folios (readWhole)
)

// planBatch decides how a batch's pages are read: through the mapping
// (counted: countLookups) for an index in memory (ReadAheadAfter may then
// read the file whole); for a cold index, whole when reading its keys'
// pages at random, with those of the cold batches before it or of the
// keys the caller expects after it (Set.ExpectMore), would take longer
// than reading the file (readsWhole), else with pread (pread.go), or,
// without read buffers, through the mapping with each stage's pages asked
// for at once (pathAdvised). A batch too small for mostlyCold's sample
// is probed as single lookups are (probeCold).
func (x *Index) planBatch(fps []Fingerprint) readPath {
	switch p := readPath(x.forcePath.Load()); {
	case p == pathWhole:
		x.readWhole()
		return pathMapped
	case p != pathPlanned:
		return p
	}
	if x.forceCold.Load() {
		return pathAdvised
	}
	if x.whole.Load() {
		return pathMapped
	}
	n := len(fps)
	if rng := x.foot.rng; !rng.Whole() {
		n = 0
		for _, fp := range fps {
			if rng.Contains(fp) {
				n++
			}
		}
	}
	if n < coldMinBatch {
		x.countLookups(n)
		for _, fp := range fps {
			if si := x.find(fp); si >= 0 && x.probeCold(si, fp) {
				return pathPread
			}
		}
		return pathMapped
	}
	// What the sample says goes for the single lookups after the batch
	// too (probeCold), until one of theirs says otherwise.
	if !x.mostlyCold(fps) {
		if x.coldSingles.Load() {
			x.coldSingles.Store(false)
		}
		x.countLookups(n)
		return pathMapped
	}
	if !x.coldSingles.Load() {
		x.coldSingles.Store(true)
	}
	rand, seq := x.deviceRates()
	batch, path := x.coldCost(float64(n), rand)
	spent := float64(x.coldSpent.Load()) / 1e9
	// The keys still to come, when the caller knows (Set.ExpectMore), are
	// priced with this batch: their segments are opened once.
	ahead, _ := x.coldCost(float64(n)+float64(x.more.Load()), rand)
	if x.wholeFits() && readsWhole(spent, batch, ahead, wholeCost(x.size, seq)) {
		x.readWhole()
		return pathMapped
	}
	x.coldSpent.Add(uint64(batch * 1e9))
	return path
}

// coldCost is how long reading n cold keys at random takes, in seconds,
// on a device doing rand random reads a second, and the path that reads
// them: pread when the index has read buffers (pread.go), else the
// mapping, each stage's pages asked for at once.
func (x *Index) coldCost(n, rand float64) (float64, readPath) {
	if x.preadable() {
		return preadCost(n, len(x.foot.segments), x.dirPages(), rand), pathPread
	}
	return randomCost(n, len(x.foot.segments), rand), pathAdvised
}

// mostlyCold samples where up to 16 of the keys will read (their segment's
// header, or the page their fingerprint is likely on) and reports whether
// a quarter or more of those pages are not in memory (mincore).
func (x *Index) mostlyCold(fps []Fingerprint) bool {
	const samples = 16
	step := max(len(fps)/samples, 1)
	var vec [1]byte
	cold, seen := 0, 0
	for i := 0; i < len(fps) && seen < samples; i += step {
		si := x.find(fps[i])
		if si < 0 {
			continue
		}
		ref := x.foot.segments[si]
		at := ref.offset
		if s := x.segs[si].seg.Load(); s != nil && len(s.fps) > 0 {
			frac := fps[i].bits(s.depth, 32)
			k := uint64(len(s.fps)) * frac >> 32
			at += s.fpsAt + 16*k
		}
		at &^= PageSize - 1
		seen++
		if n := uint64(len(x.data)); at >= n || n-at < PageSize {
			cold++
		} else if in, err := pagecache.Resident(x.data[at:at+PageSize], vec[:]); err != nil || in == 0 {
			cold++
		}
	}
	return seen > 0 && cold*4 >= seen
}

// willNeed asks the kernel to read the pages holding addrs, all at once:
// sorted, each page once, neighbours as one range.
func (x *Index) willNeed(addrs []uintptr) {
	if len(addrs) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(x.data)))
	pages := make([]uint64, 0, len(addrs))
	for _, a := range addrs {
		if a >= base && a < base+uintptr(len(x.data)) {
			pages = append(pages, uint64(a-base)/PageSize)
		}
	}
	slices.Sort(pages)
	pages = slices.Compact(pages)
	for i := 0; i < len(pages); {
		j := i + 1
		for j < len(pages) && pages[j] == pages[j-1]+1 {
			j++
		}
		x.willNeedRange(pages[i]*PageSize, (pages[j-1]+1)*PageSize)
		i = j
	}
}

// willNeedRange asks for data[from:to] (page-aligned from); an error is
// ignored: the advice is only advice, and the read that follows faults
// the page in anyway.
func (x *Index) willNeedRange(from, to uint64) {
	if x.whole.Load() {
		return // pages asked for one by one would break up the whole read's extents
	}
	to = min(to, uint64(len(x.data)))
	if from < to {
		_ = unix.Madvise(x.data[from:to], unix.MADV_WILLNEED)
	}
}

// willNeedDirectories replaces, in g.addrs[:n] (the directory entries the
// group reads), the entries of a segment that the group reads many of by
// the segment's whole directory, asked for at once: one read of a few
// hundred KiB, contiguous, instead of a page for nearly every key
// (~24 keys a bucket, 1024 buckets a page: the keys of a batch spread
// over a large index's segments mostly read pages of their own). It
// returns the entries left.
func (x *Index) willNeedDirectories(g *lookupGroup, fps []Fingerprint, n int) int {
	counts := map[*segment]int{}
	for _, s := range g.seg[:len(fps)] {
		if s != nil {
			counts[s]++
		}
	}
	whole := map[*segment]bool{}
	for s, c := range counts {
		// A directory page per key read alone; the whole directory
		// when its pages are fewer than four times the keys reading it.
		if pages := uint64(len(s.dir)) * 4 / PageSize; pages < 4*uint64(c) {
			whole[s] = true
			from := uint64(uintptr(unsafe.Pointer(&s.dir[0])) - uintptr(unsafe.Pointer(unsafe.SliceData(x.data))))
			x.willNeedRange(from&^(PageSize-1), from+4*uint64(len(s.dir)))
		}
	}
	if len(whole) == 0 {
		return n
	}
	k := 0
	for i, fp := range fps {
		if s := g.seg[i]; s != nil && !whole[s] {
			g.addrs[k] = uintptr(unsafe.Pointer(&s.dir[fp.bits(s.depth, s.dirBits)]))
			k++
		}
	}
	return k
}

// willNeedSegments asks for what opening the segments of fps not yet
// open reads: the page checksum table and the first pages of the buffer
// (the table, and the directory's length word).
func (x *Index) willNeedSegments(g *lookupGroup, fps []Fingerprint) {
	g.segsToLoad = g.segsToLoad[:0]
	for _, fp := range fps {
		si := x.find(fp)
		if si >= 0 && x.segs[si].seg.Load() == nil {
			g.segsToLoad = append(g.segsToLoad, si)
		}
	}
	slices.Sort(g.segsToLoad)
	for _, si := range slices.Compact(g.segsToLoad) {
		x.willNeedHeader(x.foot.segments[si])
	}
}

// willNeedHeader asks for what opening a segment reads first: the first
// pages of its buffer (the table, and the directory's length word) and
// its page checksum table.
func (x *Index) willNeedHeader(ref segmentRef) {
	x.willNeedRange(ref.offset&^(PageSize-1), ref.offset+2*PageSize)
	x.willNeedRange(ref.pagesAt()&^(PageSize-1), ref.end())
}

// A few keys in segments not yet open. Each such lookup reads, one fault
// after the other, the segment's page checksum table and header, its
// filter block, its directory entry and its fingerprints: five reads in a
// row or more, each at the device's depth-1 latency. willNeedFew asks for all of them at once,
// where this package's writer put them (segmentLayout); a header that
// says otherwise (another writer) gets the pages it names asked for as
// soon as it is read. The lookup that follows finds the pages in memory
// or on their way; a guess that missed costs one more read, and an answer
// never depends on a guess.
func (x *Index) willNeedFew(fps []Fingerprint) {
	type asked struct {
		fp    Fingerprint
		si    int
		guess segmentLayout
	}
	var keys [coldMinBatch]asked
	n := 0
	for _, fp := range fps {
		if si := x.find(fp); si >= 0 && x.segs[si].seg.Load() == nil && n < len(keys) {
			ref := x.foot.segments[si]
			x.willNeedHeader(ref)
			keys[n] = asked{fp, si, writerLayout(ref)}
			x.willNeedLookup(ref, keys[n].guess, fp)
			n++
		}
	}
	for _, k := range keys[:n] {
		ref := x.foot.segments[k.si]
		if l, ok := x.headerLayout(ref); ok && l != k.guess {
			x.willNeedLookup(ref, l, k.fp)
		}
	}
}

// segmentLayout is where a segment's vectors start (their length words),
// relative to the segment, and its directory bits.
type segmentLayout struct {
	dir, filter, fps uint64
	dirBits          uint
}

// writerLayout is the layout this package's writer gives a segment of
// ref's length and count (segment_build.go): the table first, then the
// directory, the filter (its data 64-byte aligned from the buffer's end,
// which is the segment's) and the fingerprints, last.
func writerLayout(ref segmentRef) segmentLayout {
	c := ref.count
	l := segmentLayout{dirBits: uint(directoryBits(int(min(c, 1<<40))))}
	fpsData := ref.length - min(ref.length, 16*c)
	l.fps = fpsData - min(fpsData, 4)
	filterData := l.fps - min(l.fps, 64*uint64(BloomBlocks(int(min(c, 1<<40)), bloomBitsPerKey)))
	filterData -= (filterData - ref.length%64) % 64
	l.filter = filterData - min(filterData, 4)
	dirData := l.filter - min(l.filter, 4*((1<<l.dirBits)+1))
	l.dir = dirData - min(dirData, 4)
	return l
}

// headerLayout reads the layout from the segment's header, without the
// checks loading the segment makes (they follow): for addresses only.
func (x *Index) headerLayout(ref segmentRef) (segmentLayout, bool) {
	if n := uint64(len(x.data)); ref.offset > n || ref.length > n-ref.offset {
		return segmentLayout{}, false // Open checked this; a lookup says what is wrong
	}
	t, err := rootTable(x.data[ref.offset : ref.offset+ref.length])
	if err != nil {
		return segmentLayout{}, false
	}
	l := segmentLayout{dirBits: uint(t.u8(4, 0))}
	dir, ok1 := t.target(5)
	filter, ok2 := t.target(8)
	fps, ok3 := t.target(9)
	l.dir, l.filter, l.fps = uint64(dir), uint64(filter), uint64(fps)
	return l, ok1 && ok2 && ok3 && t.err == nil && l.dirBits <= 24
}

// willNeedLookup asks for what the lookup of fp in the segment of ref,
// laid out as l, reads past the header: the directory's length word,
// fp's filter block and directory entries, and the fingerprints around
// fp's likely rank.
func (x *Index) willNeedLookup(ref segmentRef, l segmentLayout, fp Fingerprint) {
	depth, count := uint(ref.node.Bits), ref.count
	var r [4][2]uint64 // byte ranges in the segment
	r[0] = [2]uint64{l.dir, l.dir + 4}
	e := l.filter + 4 + 64*BloomBlock(fp, uint64(BloomBlocks(int(min(count, 1<<40)), bloomBitsPerKey)))
	r[1] = [2]uint64{e, e + 64}
	e = l.dir + 4 + 4*fp.bits(depth, l.dirBits)
	r[2] = [2]uint64{e, e + 8}
	// The key's rank is binomial around count times its place in the
	// segment's range: ±2.5 standard deviations (sqrt(count)/2 at most)
	// hold it 99% of the time, ~40 KiB for a segment of a million keys.
	guess := count * fp.bits(depth, 32) >> 32
	w := uint64(1.25*math.Sqrt(float64(count))) + 8
	from, to := guess-min(guess, w), min(guess+w+1, count)
	r[3] = [2]uint64{l.fps + 4 + 16*from, l.fps + 4 + 16*to}
	// Page ranges in file order, neighbours merged: a request costs the
	// kernel ~20-40 µs to issue here, more than reading a few more pages.
	var pages [len(r)][2]uint64
	for i, b := range r {
		from, to := min(b[0], ref.length), min(b[1], ref.length)
		pages[i] = [2]uint64{(ref.offset + from) &^ (PageSize - 1), ref.offset + to}
	}
	slices.SortFunc(pages[:], func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	cur := pages[0]
	for _, p := range pages[1:] {
		if p[0] <= cur[1]+PageSize {
			cur[1] = max(cur[1], p[1])
			continue
		}
		x.willNeedRange(cur[0], cur[1])
		cur = p
	}
	x.willNeedRange(cur[0], cur[1])
}
