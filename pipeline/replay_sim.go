package pipeline

import (
	"github.com/fpdedup/fpdedup/fpstore"
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
	window   int64
	prevName string
	prevLine int64

	events, firsts, dups, late, windows int64
	wroteHeader                         bool
	sink                                uint64 // the grouped loads' sum, so they are not dead code
}

// replaySystem is one simulated online system: an L1, an L2, or both.
type replaySystem struct {
	l1       *l1Bloom
	l2       *l2Bloom
	pos      []uint64 // the group's L2 bits, K an event
	shard    []uint64 // the group's L2 shards
	st       ReplaySystem
	l1t, l2t ReplayTier
}

// replayGroup is how many events have their memory loaded together before
// they are decided: enough misses in flight to fill the line-fill buffers.
const replayGroup = 16

func newReplayer(opts *ReplayOptions) (*replayer, error) {
	r := &replayer{opts: opts}
	if opts.L1 != nil {
		r.ttl = int64(opts.L1.TTL)
	}
	sizes := []uint64{0}
	if opts.L2 != nil {
		sizes = opts.L2.Bits
	}
	for _, bits := range sizes {
		s := &replaySystem{st: ReplaySystem{L2Bits: bits}}
		r.systems = append(r.systems, s)
		var err error
		if opts.L1 != nil {
			if s.l1, err = newL1Bloom(opts.L1.Bits); err != nil {
				return r, err
			}
		}
		if opts.L2 != nil {
			if s.l2, err = newL2Bloom(opts.L2.Shards, bits, opts.L2.K); err != nil {
				return r, err
			}
			s.pos = make([]uint64, replayGroup*opts.L2.K)
			s.shard = make([]uint64, replayGroup)
		}
	}
	// The exact seen-set gets a third of what the blooms leave of Mem for
	// its table and a third for its bloom once it spills (the Go heap's
	// soft limit, set by the caller, is the last third).
	rest := max(opts.Mem-ReplayBloomBytes(*opts), 16<<20)
	est, err := estimateRecords(opts.Inputs)
	if err != nil {
		return r, err
	}
	t, err := newSeenShard(int(min(est, rest/3/16)), rest/3)
	if err != nil {
		return r, err
	}
	r.truth = &shardSet{table: t, tmpDir: opts.TmpDir, bloomMax: rest / 3}
	return r, nil
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
	name, evs := decodeReplayChunk(out, r.evs)
	r.evs = evs
	if err := r.header(); err != nil {
		return err
	}
	for base := 0; base < len(evs); base += replayGroup {
		g := evs[base:min(base+replayGroup, len(evs))]
		r.load(g)
		for i := range g {
			if err := r.step(name, &g[i], i); err != nil {
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

// load reads the memory the group's events will touch (the seen-set's
// home buckets, the L2 words, the L1 word) so that the misses overlap: Go
// has no prefetch, but independent loads in a short loop run together.
func (r *replayer) load(g []replayEvent) {
	var sink uint64
	if t := r.truth; t.bloom == nil {
		s := t.table
		for i := range g {
			sink += s.slots[s.home(g[i].fp)*slotsPerBucket].Hi
		}
	}
	for _, sys := range r.systems {
		if l2 := sys.l2; l2 != nil {
			k := l2.k
			for i := range g {
				p := sys.pos[i*k : i*k+k]
				sys.shard[i] = l2.positions(g[i].fp, p)
				for _, x := range p {
					sink += l2.words[x>>6]
				}
			}
		}
		if l1 := sys.l1; l1 != nil {
			for i := range g {
				w, _ := l1.bit(g[i].fp)
				sink += l1.words[w]
			}
		}
	}
	r.sink += sink
}

// step replays event e, the i-th of its group.
func (r *replayer) step(name string, e *replayEvent, i int) error {
	t := e.t
	if r.started && t < r.clock {
		if !r.opts.Arrival {
			return &ReplayOrderError{Name: name, Line: e.line, Record: e.record, Time: t, PrevName: r.prevName, PrevLine: r.prevLine, PrevTime: r.clock}
		}
		r.late++
		t = r.clock
	}
	r.clock, r.prevName, r.prevLine = t, name, e.line
	if r.ttl > 0 {
		if w := floorDiv(t, r.ttl); !r.started || w != r.window {
			r.window = w
			r.windows++
			for _, s := range r.systems {
				s.l1.reset()
			}
		}
	}
	r.started = true
	first, err := r.truth.insert(e.fp)
	if err != nil {
		return err
	}
	r.events++
	if first {
		r.firsts++
	} else {
		r.dups++
	}
	for k, s := range r.systems {
		if s.step(e.fp, i, first) && k == 0 && r.opts.Lost != nil {
			if _, err := r.opts.Lost.Write(e.rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// step is the online decision for the i-th event of the group, with key
// fp, a first occurrence or not; it reports whether the event was lost (a
// first occurrence dropped).
func (s *replaySystem) step(fp fpstore.Fingerprint, i int, first bool) bool {
	var w, mask uint64
	if l1 := s.l1; l1 != nil {
		t := &s.l1t
		t.Reached++
		w, mask = l1.bit(fp)
		if first {
			t.FirstsReached++
			t.expected += l1.rateNow()
		}
		if l1.words[w]&mask != 0 {
			t.Dropped++
			s.st.Dropped++
			if first {
				t.FalseDrops++
				s.st.Lost++
			}
			return first
		}
		if !first {
			t.DupsPassed++
		}
	}
	if l2 := s.l2; l2 != nil {
		t := &s.l2t
		t.Reached++
		shard := s.shard[i]
		if first {
			t.FirstsReached++
			t.expected += l2.rateNow(shard)
		}
		if l2.testAndSet(s.pos[i*l2.k : i*l2.k+l2.k]) {
			t.Dropped++
			s.st.Dropped++
			if first {
				t.FalseDrops++
				s.st.Lost++
			}
			return first
		}
		l2.n[shard]++
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
	return false
}

// stats fills in the figures.
func (r *replayer) stats(st *ReplayStats) {
	st.Events, st.FirstOccurrences, st.Duplicates = r.events, r.firsts, r.dups
	st.Late, st.Windows = r.late, r.windows
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
			t.FPRFinal = BloomFormula(float64(l1.peak), float64(l1.mod.m), 1)
			t.rates()
			sys.L1 = &t
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
