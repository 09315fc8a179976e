package pipeline

import (
	"errors"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/prefetch"
	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// replayer is Replay's simulation: the exact seen-set, the clock and the
// simulated systems, fed the events in order by one goroutine.
type replayer struct {
	opts    *ReplayOptions
	headers *Headers
	truth   *shardSet
	systems []*replaySystem // the primary first
	evs     []replayEvent   // the chunk being replayed

	ttl      int64 // ns; 0 without L1
	started  bool
	clock    int64
	winStart int64 // the current L1 window, [winStart, winEnd)
	winEnd   int64
	prevName string
	prevLine int64
	// prevRowGroup is a Parquet row's row group + 1.
	prevRowGroup int

	events, firsts, dups, late, windows int64
	wroteHeader                         bool
	direct                              bool          // the group's inserts go to the table (see replay)
	setup, setupCPU                     time.Duration // the first touch of the blooms and the table (prefault)
	addrs                               []uintptr     // the next group's lines, for prefetch
}

// replaySystem is one simulated online system: an L1, an L2, or both.
type replaySystem struct {
	l1       *l1Bloom
	l2       *l2Bloom
	rb       *rbTier  // L2 as RedisBloom filters, instead of l2
	pos      []uint64 // the chunk's L2 bits, K an event
	shard    []uint64 // the chunk's L2 shards
	st       ReplaySystem
	l1t, l2t ReplayTier
	decision replayDecision // the last event's
}

// replayDecision is what a system did with an event, told to
// ReplayOptions.decided (the tests that hold each decision to the real
// module's answer).
type replayDecision uint8

const (
	decidedNew     replayDecision = iota // accepted: L2 answered "new" (BF.ADD 1), or there is no L2
	decidedL1                            // dropped by L1
	decidedSeen                          // dropped by L2 (BF.ADD 0)
	decidedRefused                       // accepted, L2 refused the add (a NONSCALING filter full)
)

// replayGroup is how many events are prefetched together, one group ahead
// of the events being decided: 8 events are 40 lines (table, L1, 3 L2
// words), more than the core's fill buffers. BenchmarkReplaySim chose it:
// prefetching beats plain loads of a group before deciding it, and groups
// much smaller or larger than 8 do no better.
const replayGroup = 8

func newReplayer(opts *ReplayOptions) (*replayer, error) {
	r := &replayer{opts: opts}
	if opts.L1 != nil {
		r.ttl = int64(opts.L1.TTL)
	}
	plan := opts.Plan()
	budget := &filterBudget{share: plan.Filters, opts: opts}
	for i := range replaySystems(*opts) {
		s := &replaySystem{}
		r.systems = append(r.systems, s)
		var err error
		if opts.L1 != nil {
			if s.l1, err = newL1Bloom(opts.L1.Bits); err != nil {
				return r, err
			}
		}
		if opts.L2 != nil {
			s.st.L2Bits = opts.L2.Bits[i]
			if s.l2, err = newL2Bloom(opts.L2.Shards, s.st.L2Bits, opts.L2.K); err != nil {
				return r, err
			}
		}
		if rb := opts.RedisBloom; rb != nil {
			s.st.L2Capacity = rb.Capacity[i]
			if s.rb, err = newRBTier(rb, s.st.L2Capacity, budget); err != nil {
				return r, err
			}
		}
	}
	// The exact seen-set takes the plan's tables, and its bloom, once it
	// spills, the plan's seen-set blooms.
	est, err := estimateRecords(opts.Inputs, opts.Records.Spec.Format)
	if err != nil {
		return r, err
	}
	t, err := newSeenShard(int(min(est, plan.Tables/16)), plan.Tables)
	if err != nil {
		return r, err
	}
	r.truth = &shardSet{table: t, tmpDir: opts.TmpDir, bloomMax: plan.SeenBlooms}
	r.prefault()
	return r, nil
}

// prefault writes a zero to every page of the blooms and of the seen-set's
// table, on every thread, so that their page faults (costly in a VM, most
// of all on guest memory used for the first time) are paid before the
// first event, and the memory is the process's from the start, as it
// would be a few million events later (the inserts into the table and the
// bits of the blooms land anywhere).
func (r *replayer) prefault() {
	start, cpu := time.Now(), processCPU()
	mems := [][]byte{r.truth.table.mem}
	for _, s := range r.systems {
		if s.l1 != nil {
			mems = append(mems, s.l1.mem)
		}
		if s.l2 != nil {
			mems = append(mems, s.l2.mem)
		}
		if s.rb != nil {
			mems = append(mems, s.rb.mems()...)
		}
	}
	var wg sync.WaitGroup
	threads := max(r.opts.Threads, 1)
	for w := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range mems {
				part := (len(m)/threads + 4095) &^ 4095
				for i := w * part; i < min((w+1)*part, len(m)); i += 4096 {
					m[i] = 0
				}
			}
		}()
	}
	wg.Wait()
	r.setup, r.setupCPU = time.Since(start), processCPU()-cpu
}

func (r *replayer) free() {
	if r.truth != nil {
		r.truth.free()
		r.truth = nil
	}
	for _, s := range r.systems {
		s.l1.free()
		s.l2.free()
	}
	r.systems = nil
}

// consume replays one chunk's events, in input order.
func (r *replayer) consume(out []byte) error {
	name, rowGroup, evs := decodeReplayChunk(out, r.evs, r.opts.RedisBloom != nil)
	r.evs = evs
	if err := r.header(); err != nil {
		return err
	}
	return r.replay(name, rowGroup, evs)
}

// replay decides evs, in order, a group at a time. The memory of the
// next group (the seen-set's home buckets, the L2 words, the L1 word) is
// prefetched before this one is decided, so that its misses are in flight
// while this group's decisions run.
func (r *replayer) replay(name string, rowGroup int, evs []replayEvent) error {
	if len(evs) == 0 {
		return nil
	}
	r.locate(evs)
	r.prefetchRange(evs, 0, min(replayGroup, len(evs)))
	for base := 0; base < len(evs); base += replayGroup {
		end := min(base+replayGroup, len(evs))
		if end < len(evs) {
			r.prefetchRange(evs, end, min(end+replayGroup, len(evs)))
		}
		// In memory mode with room for the group, the table is asked
		// directly (no growth or spill check an event).
		r.direct = r.truth.bloom == nil && !r.truth.table.needsRoom(end-base)
		for i := base; i < end; i++ {
			if err := r.step(name, rowGroup, &evs[i], i); err != nil {
				return err
			}
		}
	}
	return nil
}

// header writes the first input's header to Lost, once.
func (r *replayer) header() error {
	if r.wroteHeader || r.opts.Lost == nil || !r.opts.Records.Spec.Header {
		return nil
	}
	r.wroteHeader = true
	if h := r.headers.First(); h != nil {
		_, err := r.opts.Lost.Write(h)
		return err
	}
	return nil
}

// finish ends the replay: Lost has its header even when nothing was lost.
func (r *replayer) finish() error { return r.header() }

// locate computes the L2 shard and bit positions of every event of the
// chunk.
func (r *replayer) locate(evs []replayEvent) {
	for _, sys := range r.systems {
		l2 := sys.l2
		if l2 == nil {
			continue
		}
		k := l2.k
		sys.pos = slices.Grow(sys.pos[:0], len(evs)*k)[:len(evs)*k]
		sys.shard = slices.Grow(sys.shard[:0], len(evs))[:len(evs)]
		for i := range evs {
			sys.shard[i] = l2.positions(evs[i].fp, sys.pos[i*k:i*k+k])
		}
	}
}

// prefetchRange starts loading the memory events [from, to) will touch.
func (r *replayer) prefetchRange(evs []replayEvent, from, to int) {
	a := r.addrs[:0]
	if t := r.truth; t.bloom == nil {
		s := t.table
		for i := from; i < to; i++ {
			a = append(a, uintptr(unsafe.Pointer(&s.slots[s.home(evs[i].fp)*slotsPerBucket])))
		}
	}
	for _, sys := range r.systems {
		if l2 := sys.l2; l2 != nil {
			words := l2.words
			for _, x := range sys.pos[from*l2.k : to*l2.k] {
				a = append(a, uintptr(unsafe.Pointer(&words[x>>6])))
			}
		}
		if rb := sys.rb; rb != nil {
			for i := from; i < to; i++ {
				a = rb.shards[evs[i].rbShard].prefetchLines(a, evs[i].rb)
			}
		}
		if l1 := sys.l1; l1 != nil {
			for i := from; i < to; i++ {
				w, _ := l1.bit(evs[i].fp)
				a = append(a, uintptr(unsafe.Pointer(&l1.words[w])))
			}
		}
	}
	prefetch.Addrs(a)
	r.addrs = a
}

// step replays event e, the i-th of its chunk.
func (r *replayer) step(name string, rowGroup int, e *replayEvent, i int) error {
	t := e.t
	if r.started && t < r.clock {
		if !r.opts.Arrival {
			return &ReplayOrderError{Name: name, Line: e.line, Record: e.record, RowGroup: rowGroup, Time: t, PrevName: r.prevName, PrevLine: r.prevLine, PrevRowGroup: r.prevRowGroup, PrevTime: r.clock}
		}
		r.late++
		t = r.clock
	}
	r.clock, r.prevName, r.prevLine, r.prevRowGroup = t, name, e.line, rowGroup
	if r.ttl > 0 && (!r.started || t >= r.winEnd || t < r.winStart) {
		r.winStart = floorDiv(t, r.ttl) * r.ttl
		r.winEnd = r.winStart + r.ttl
		if r.winEnd < r.winStart { // the last window before 2262
			r.winEnd = math.MaxInt64
		}
		r.windows++
		for _, s := range r.systems {
			s.l1.reset()
		}
	}
	r.started = true
	var first bool
	if r.direct {
		first = r.truth.table.insert(e.fp)
	} else {
		var err error
		if first, err = r.truth.insert(e.fp); err != nil {
			return err
		}
	}
	r.events++
	if first {
		r.firsts++
	} else {
		r.dups++
	}
	for k, s := range r.systems {
		lost, err := s.step(e, i, first)
		if err != nil {
			return err
		}
		if k == 0 && r.opts.decided != nil {
			r.opts.decided(r.events-1, s.decision)
		}
		if lost && k == 0 && r.opts.Lost != nil {
			if _, err := r.opts.Lost.Write(e.rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// step is the online decision for event e, the i-th of the chunk, a
// first occurrence or not; it reports whether the event was lost (a first
// occurrence dropped).
func (s *replaySystem) step(e *replayEvent, i int, first bool) (bool, error) {
	fp := e.fp
	var w, mask uint64
	s.decision = decidedNew
	if l1 := s.l1; l1 != nil {
		t := &s.l1t
		t.Reached++
		w, mask = l1.bit(fp)
		if first {
			t.FirstsReached++
			t.expected += l1.rate.rate()
		}
		if l1.words[w]&mask != 0 {
			s.decision = decidedL1
			t.Dropped++
			s.st.Dropped++
			if first {
				t.FalseDrops++
				s.st.Lost++
			}
			return first, nil
		}
		if !first {
			t.DupsPassed++
		}
	}
	if s.rb != nil {
		if dropped, err := s.stepRB(e, first); dropped || err != nil {
			return first && dropped, err
		}
	}
	if l2 := s.l2; l2 != nil {
		t := &s.l2t
		t.Reached++
		shard := s.shard[i]
		if first {
			t.FirstsReached++
			t.expected += l2.rates[shard].rate()
		}
		if l2.testAndSet(s.pos[i*l2.k : i*l2.k+l2.k]) {
			s.decision = decidedSeen
			t.Dropped++
			s.st.Dropped++
			if first {
				t.FalseDrops++
				s.st.Lost++
			}
			return first, nil
		}
		l2.n[shard]++
		l2.rates[shard].add()
		if !first {
			t.DupsPassed++
		}
	}
	s.st.Accepted++
	if !first {
		s.st.LetThrough++
	}
	if s.l1 != nil {
		s.l1.set(w, mask)
	}
	return false, nil
}

// stepRB is L2's decision as RedisBloom filters: BF.ADD of e's item to its
// shard's filter; an answer of 0 drops the event. An add the module
// refuses (a NONSCALING filter full) lets the event pass, its item not
// added: the online side got an error, not "seen".
func (s *replaySystem) stepRB(e *replayEvent, first bool) (dropped bool, err error) {
	t, sh := &s.l2t, &s.rb.shards[e.rbShard].st
	t.Reached++
	sh.Reached++
	if first {
		t.FirstsReached++
		t.expected += s.rb.rate(e.rbShard)
	}
	a, err := s.rb.add(e.rbShard, e.rb)
	switch {
	case errors.Is(err, rbloom.ErrFull):
		s.decision = decidedRefused
		t.Refused++
		sh.Refused++
	case err != nil:
		return false, err
	case !a.New:
		s.decision = decidedSeen
		t.Dropped++
		sh.Dropped++
		s.st.Dropped++
		if first {
			t.FalseDrops++
			sh.FalseDrops++
			s.st.Lost++
		}
		return true, nil
	}
	if !first {
		t.DupsPassed++
		sh.DupsPassed++
	}
	return false, nil
}

// stats fills in the figures.
func (r *replayer) stats(st *ReplayStats) {
	st.Events, st.FirstOccurrences, st.Duplicates = r.events, r.firsts, r.dups
	st.Late, st.Windows = r.late, r.windows
	st.SetupSeconds, st.SetupCPUSeconds = r.setup.Seconds(), r.setupCPU.Seconds()
	st.TruthMode = "memory"
	if t := r.truth; t != nil {
		st.TruthBytes = t.table.bytes()
		if t.bloom != nil {
			st.TruthMode = "lsm"
			st.TruthBytes += int64(len(t.bloom.mem))
			st.TruthRuns = len(t.runs)
		}
	}
	for _, s := range r.systems {
		sys := s.st
		if l1 := s.l1; l1 != nil {
			t := s.l1t
			t.Bytes = l1.bytes()
			t.Keys = l1.peak
			t.FPRFinal = BloomFormula(float64(l1.peak), float64(l1.mod.M()), 1)
			t.rates()
			sys.L1 = &t
			sys.BloomBytes += t.Bytes
		}
		if s.rb != nil {
			t := s.l2t
			s.rb.stats(&t)
			t.rates()
			sys.L2 = &t
			sys.BloomBytes += t.Bytes
		}
		if l2 := s.l2; l2 != nil {
			t := s.l2t
			t.Bytes = l2.bytes()
			for _, n := range l2.n {
				t.Keys += n
			}
			t.FPRFinal = l2.finalRate()
			t.rates()
			sys.L2 = &t
			sys.BloomBytes += t.Bytes
		}
		st.Systems = append(st.Systems, sys)
	}
}

func (t *ReplayTier) rates() {
	if t.FirstsReached > 0 {
		t.FPRMeasured = float64(t.FalseDrops) / float64(t.FirstsReached)
		t.FPRFormula = t.expected / float64(t.FirstsReached)
	}
}

// processCPU is the process's CPU time, user and system, all threads.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
