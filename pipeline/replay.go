package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// Replay simulates, offline and exactly, what an online dedup of two
// bloom tiers did with a day of events, and compares each event's online
// decision with the truth.
//
// The online system, as simulated, takes the events one at a time in time
// order (ReplayOptions.Arrival: in input order) and for each:
//
//  1. L1, the per-process bloom of SIZE bits with one hash (bit lo mod
//     SIZE), is emptied whenever the event's time enters a new window
//     [w·TTL, (w+1)·TTL), w = ⌊time / TTL⌋ (times in ns since the Unix
//     epoch). If the key's bit is set, the event is dropped by L1.
//  2. Otherwise L2, N shards of M bits with K hashes (shard hi mod N; bits
//     (lo + j·hi) mod 2^64 mod M), is asked: if all K bits of the key are
//     set, the event is dropped by L2.
//  3. Otherwise the event is accepted and its key added to both: its L1
//     bit and its K L2 bits are set. Nothing else adds: a dropped event
//     changes no bit.
//
// With RedisBloom (ReplayOptions.RedisBloom) steps 2 and 3 of L2 are one
// BF.ADD of the event's item to its shard's filter, as the module answers
// it (replay_rbloom.go): 0 drops the event, 1 accepts it (added, the
// filter grown by a sub-filter if its last was full); a refusal (a full
// NONSCALING filter) accepts it without adding it.
//
// Either tier may be absent (L1 nil or L2 nil), not both. (hi, lo) is the
// key's fingerprint (ReplayHashScheme). The truth is exact: an event is a
// first occurrence when no earlier event (in the same order) has its key;
// the others are duplicates. Per tier, a false drop is a first occurrence
// the tier dropped (its bloom's false positive: an event the online system
// lost) and a duplicate passed is a duplicate the tier did not catch (for
// L1, one whose key was not accepted in the current window: TTL expiry);
// the duplicates the whole system let through are those accepted.
//
// The false-positive rate of each tier is measured on the first
// occurrences that reach it (their keys are certainly not in it, and they
// are an unbiased sample), next to BloomFormula averaged over the same
// events at the fill each met: L1 with the keys added in its window so
// far, L2 with the keys added to the shard so far.
//
// L2.Bits may list several sizes: each is a whole simulated system (its L1
// too, since what L1 holds depends on L2's answers), all fed in one pass.
// The first is the primary, whose lost events go to Lost.
//
// The exact truth is the seen-set of dedup (a table of 16 bytes a key,
// spilling to sorted runs in TmpDir beyond its share of Mem). Parsing,
// keying and hashing run on Threads goroutines; the simulation is one
// goroutine, which prefetches the table buckets and bloom words of the
// next 8 events while it decides the current 8, so that their cache misses
// overlap with each other and with the decisions.
func Replay(ctx context.Context, opts ReplayOptions) (ReplayStats, error) {
	start := time.Now()
	opts.Threads, opts.Inputs, opts.Progress = runDefaults(opts.Threads, opts.Inputs, opts.Progress)
	var st ReplayStats
	if err := opts.check(); err != nil {
		return st, err
	}
	r, err := newReplayer(&opts)
	defer r.free()
	if err != nil {
		return st, err
	}
	headers := newHeaders()
	ro := readOptions{Inputs: opts.Inputs, Records: opts.Records, Progress: opts.Progress, Headers: headers, Stdin: opts.Stdin}
	if tf := opts.TimeField; tf != "" && !slices.Contains(opts.Records.Spec.Keys, tf) {
		ro.ExtraKeys = []string{tf} // a Parquet row's time travels in its frame
	}
	r.headers = headers
	err = runOrdered(ctx, ro, opts.Threads, r.newWork(headers), r.consume)
	if err == nil {
		err = r.finish()
	}
	r.stats(&st)
	st.BadRecords = opts.Records.OnBad.Count()
	st.Bytes = opts.Progress.RawBytes.Load()
	st.Seconds = time.Since(start).Seconds()
	return st, err
}

// ReplayL1 is the simulated per-process bloom.
type ReplayL1 struct {
	Bits uint64        // SIZE
	TTL  time.Duration // the window: the bloom is emptied at each multiple of it
}

// ReplayL2 is the simulated sharded bloom.
type ReplayL2 struct {
	Shards uint64   // N
	Bits   []uint64 // M, bits a shard; more than one: a sweep, Bits[0] the primary
	K      int      // bits a key
}

// ReplayRedisBloom is L2 as RedisBloom filters (package rbloom's model):
// one filter a shard, made by BF.RESERVE with these parameters, each
// event's item added to its shard's filter with BF.ADD, whose answer (0:
// already present) is the tier's "seen".
type ReplayRedisBloom struct {
	// Capacity is BF.RESERVE's; more than one: a sweep, Capacity[0] the
	// primary.
	Capacity   []uint64
	Error      float64
	Expansion  uint32 // 0: the module's default
	NonScaling bool
	// Router sends an event's key text to a shard; it may not be RouteAll
	// (an add's answer depends on the one filter it met).
	Router *rbloom.Router
	Item   rbloom.Item
}

// params are BF.RESERVE's for the system of capacity c.
func (rb *ReplayRedisBloom) params(c uint64) rbloom.Params {
	return rbloom.Params{Capacity: c, Error: rb.Error, Expansion: rb.Expansion, NonScaling: rb.NonScaling}
}

// ReplayOptions configure Replay.
type ReplayOptions struct {
	Inputs  []string // none: stdin
	Records ingest.RecordOptions
	// TimeField is the field holding the event time (a csv/tsv column
	// number or header name, a jsonl path: the grammar of --key);
	// TimeUnit the unit of a time written as a number. L1 needs it; without
	// it (L2 alone) the events are taken in input order.
	TimeField string
	TimeUnit  time.Duration
	// Arrival: the events are in arrival order, not necessarily in time
	// order; they are taken in input order, with a clock that is the
	// latest time seen so far (a late event falls in the current window).
	// Without it an event earlier than the one before is a
	// *ReplayOrderError.
	Arrival bool
	L1      *ReplayL1
	L2      *ReplayL2
	// RedisBloom is L2 as RedisBloom filters, instead of L2's bitmaps.
	RedisBloom *ReplayRedisBloom
	// Lost, when set, gets the first occurrences the primary system
	// dropped, bytes unchanged, in input order; a csv/tsv header first.
	Lost     io.Writer
	Threads  int
	Mem      int64 // the exact seen-set's share is what the blooms leave
	TmpDir   string
	Progress *ingest.Progress
	Stdin    io.Reader // read for "-" instead of the process's stdin (tests)
	// decided, when set, is told the primary system's decision on each
	// event, numbered from 0 in the order taken (tests).
	decided func(event int64, d replayDecision)
}

func (o *ReplayOptions) check() error {
	switch {
	case o.L1 == nil && o.L2 == nil && o.RedisBloom == nil:
		return errors.New("replay: no tier to simulate")
	case o.L2 != nil && o.RedisBloom != nil:
		return errors.New("replay: L2 is either bitmaps or RedisBloom filters, not both")
	case o.L1 != nil && (o.L1.Bits == 0 || o.L1.TTL <= 0):
		return errors.New("replay: L1 needs bits and a TTL")
	case o.L2 != nil && (o.L2.Shards == 0 || len(o.L2.Bits) == 0 || o.L2.K < 1 || o.L2.K > maxReplayK):
		return fmt.Errorf("replay: L2 needs shards, bits and 1 to %d hashes", maxReplayK)
	case o.TimeField == "" && o.L1 != nil:
		return errors.New("replay: L1 needs a time field")
	}
	if o.L2 != nil {
		for _, b := range o.L2.Bits {
			if b == 0 {
				return errors.New("replay: an L2 shard of 0 bits")
			}
		}
	}
	if rb := o.RedisBloom; rb != nil {
		if err := rb.Check(); err != nil {
			return err
		}
	}
	if o.TimeUnit <= 0 {
		o.TimeUnit = time.Millisecond
	}
	return nil
}

// maxReplayK bounds K: no bloom is better with more.
const maxReplayK = 32

// ReplayBloomBytes is the memory the simulated blooms of opts take: every
// system of a sweep has its own L1 and L2. RedisBloom filters grow as
// they fill: theirs is the share of Mem they may grow to (the plan's
// Filters).
func ReplayBloomBytes(opts ReplayOptions) int64 {
	p := opts.Plan()
	return p.SimBlooms + p.Filters
}

// replayL1Bytes is the memory of every system's L1.
func replayL1Bytes(opts ReplayOptions) int64 {
	if opts.L1 == nil {
		return 0
	}
	return int64(replaySystems(opts)) * int64((opts.L1.Bits+63)/64*8)
}

// replaySystems is the number of simulated systems: one, or one a size of
// a sweep.
func replaySystems(opts ReplayOptions) int {
	switch {
	case opts.L2 != nil:
		return len(opts.L2.Bits)
	case opts.RedisBloom != nil:
		return len(opts.RedisBloom.Capacity)
	}
	return 1
}

// ReplayMemNeeded is the least Mem that holds the blooms of opts as they
// are before the first event (RedisBloom filters as BF.RESERVE makes
// them) and memplan.ReplayMinRest beside them.
func ReplayMemNeeded(opts ReplayOptions) int64 {
	return memplan.ReplayMemNeeded(opts.planJob(), ReplayReservedBytes(opts))
}

// ReplayStats are the figures of a Replay run.
type ReplayStats struct {
	Events           int64 `json:"events"`
	FirstOccurrences int64 `json:"first_occurrences"`
	Duplicates       int64 `json:"duplicates"`
	// Late counts, with Arrival, the events whose time was behind the
	// clock (they fell in the current window).
	Late    int64 `json:"late,omitempty"`
	Windows int64 `json:"l1_windows,omitempty"` // L1 windows that had events
	// Systems are the simulated systems, the primary first (a sweep has
	// one per L2 size).
	Systems    []ReplaySystem `json:"systems"`
	TruthMode  string         `json:"truth_mode"` // the exact seen-set: memory, or lsm (spilled)
	TruthBytes int64          `json:"truth_table_bytes"`
	TruthRuns  int            `json:"truth_runs,omitempty"`
	BadRecords int64          `json:"bad_records"`
	Bytes      int64          `json:"bytes"` // read from the inputs as stored (compressed); see ingest.Progress.RawBytes
	// SetupSeconds is the first touch of the blooms and the seen-set's
	// table before the first event, part of Seconds, and SetupCPUSeconds
	// the process CPU time it took.
	SetupSeconds    float64 `json:"setup_seconds"`
	SetupCPUSeconds float64 `json:"setup_cpu_seconds"`
	Seconds         float64 `json:"seconds"`
}

// ReplaySystem is what one simulated system did.
type ReplaySystem struct {
	L2Bits     uint64 `json:"l2_bits_per_shard,omitempty"`
	L2Capacity uint64 `json:"l2_capacity,omitempty"` // RedisBloom: BF.RESERVE's
	BloomBytes int64  `json:"bloom_bytes"`           // its L1 and L2
	Accepted   int64  `json:"accepted"`
	Dropped    int64  `json:"dropped"`
	// Lost: first occurrences dropped (the tiers' false drops together);
	// LetThrough: duplicates accepted.
	Lost       int64       `json:"lost"`
	LetThrough int64       `json:"let_through"`
	L1         *ReplayTier `json:"l1,omitempty"`
	L2         *ReplayTier `json:"l2,omitempty"`
}

// ReplayTier is what one tier of a system did.
type ReplayTier struct {
	Bytes      int64 `json:"bytes"`
	Reached    int64 `json:"reached"` // events the tier was asked about
	Dropped    int64 `json:"dropped"` // of them, the tier said "seen"
	FalseDrops int64 `json:"false_drops"`
	DupsPassed int64 `json:"duplicates_passed"`
	// FirstsReached are the first occurrences asked about: the sample of
	// FPRMeasured (FalseDrops / FirstsReached) and FPRFormula (the mean
	// of BloomFormula at each one's fill).
	FirstsReached int64   `json:"first_occurrences_reached"`
	FPRMeasured   float64 `json:"fpr_measured"`
	FPRFormula    float64 `json:"fpr_formula"`
	// FPRFinal is the formula at the end: L2, the final fill (mean over
	// the shards); L1, the fullest window's. Keys is what it is for: L2,
	// the keys it holds; L1, the fullest window's.
	// RedisBloom filters: 1 - Π (1 - the formula) over each shard's
	// sub-filters, mean over the shards; FPRNow is the rate their bits set
	// give (rbloom.Header.FPR), mean over the shards.
	FPRFinal float64 `json:"fpr_formula_final"`
	FPRNow   float64 `json:"fpr_now,omitempty"`
	Keys     uint64  `json:"keys"`
	// Refused: RedisBloom, NONSCALING, adds of new items to a full filter,
	// which the module refuses (the event passes, its item not added).
	Refused  int64         `json:"refused,omitempty"`
	Shards   []ReplayShard `json:"shards,omitempty"` // RedisBloom: each filter
	expected float64       // the sum behind FPRFormula
}

// ReplayShard is one RedisBloom filter at the end, as BF.INFO would show
// it, and what it decided.
type ReplayShard struct {
	Name       string  `json:"name"`        // the router's name of the shard
	Items      uint64  `json:"items"`       // BF.INFO "Number of items inserted": adds answered 1
	SubFilters int     `json:"sub_filters"` // BF.INFO "Number of filters"
	Capacity   uint64  `json:"capacity"`    // BF.INFO "Capacity"
	Bytes      int64   `json:"bytes"`       // BF.INFO "Size"
	Fill       float64 `json:"fill"`        // bits set, of every sub-filter's bits
	FPRNow     float64 `json:"fpr_now"`     // rbloom.Header.FPR: from each sub-filter's bits set
	Reached    int64   `json:"reached"`
	Dropped    int64   `json:"dropped"` // adds answered 0
	FalseDrops int64   `json:"false_drops"`
	DupsPassed int64   `json:"duplicates_passed"`
	Refused    int64   `json:"refused,omitempty"`
}

// ReplayOrderError is an event earlier than the one before it, when
// Replay takes the events in time order. A Parquet row is located as
// ingest.RecordError locates it (row group and row, no line).
type ReplayOrderError struct {
	Name         string
	Line, Record int64
	RowGroup     int   // a Parquet row's row group + 1; 0 in other formats
	Time         int64 // ns since the epoch
	PrevName     string
	PrevLine     int64 // a Parquet row's number
	PrevRowGroup int
	PrevTime     int64
}

func (e *ReplayOrderError) Error() string {
	if e.RowGroup > 0 {
		return fmt.Sprintf("%s: row group %d, row %d: event time %s is earlier than %s, the time of %s: row group %d, row %d; replay takes the events in time order",
			e.Name, e.RowGroup-1, e.Record, formatEventTime(e.Time), formatEventTime(e.PrevTime), e.PrevName, e.PrevRowGroup-1, e.PrevLine)
	}
	return fmt.Sprintf("%s:%d: record %d: event time %s is earlier than %s, the time of %s:%d; replay takes the events in time order",
		e.Name, e.Line, e.Record, formatEventTime(e.Time), formatEventTime(e.PrevTime), e.PrevName, e.PrevLine)
}

// replayEvent is one event on its way from a parser to the simulation.
type replayEvent struct {
	fp           fpstore.Fingerprint
	t            int64
	line, record int64
	rec          []byte // the record's bytes, with Lost only
	// RedisBloom: the item's hash pair and the key's shard, computed by
	// the parsers (MD5 and two MurmurHash64A an event, in parallel).
	rb      rbloom.Hash
	rbShard int
}

// replayEventBytes is an event's fixed part in a chunk's output: hi, lo,
// time, line, record, and the length of the record bytes that follow;
// with RedisBloom, replayRBBytes more (the hash pair and the shard)
// before them.
const (
	replayEventBytes = 5*8 + 4
	replayRBBytes    = 2*8 + 4
)

// newWork is the parsers' work: each chunk's events, keyed, hashed and
// timed, as bytes: the input's name, then the events.
func (r *replayer) newWork(headers *Headers) func() chunkWork {
	return func() chunkWork { return newReplayParser(r.opts, headers).parse }
}

// decode reads a chunk's output back into events (their rec aliases b),
// with the input's name and the row group + 1 of a Parquet chunk's rows;
// rb: the events carry RedisBloom's hash and shard.
func decodeReplayChunk(b []byte, evs []replayEvent, rb bool) (string, int, []replayEvent) {
	n := binary.LittleEndian.Uint32(b)
	name := string(b[4 : 4+n])
	rowGroup := int(binary.LittleEndian.Uint32(b[4+n:]))
	b = b[4+n+4:]
	evs = evs[:0]
	for len(b) >= replayEventBytes {
		e := replayEvent{
			fp:     fpstore.Fingerprint{Hi: binary.LittleEndian.Uint64(b), Lo: binary.LittleEndian.Uint64(b[8:])},
			t:      int64(binary.LittleEndian.Uint64(b[16:])),
			line:   int64(binary.LittleEndian.Uint64(b[24:])),
			record: int64(binary.LittleEndian.Uint64(b[32:])),
		}
		l := int(binary.LittleEndian.Uint32(b[40:]))
		b = b[replayEventBytes:]
		if rb {
			e.rb = rbloom.Hash{A: binary.LittleEndian.Uint64(b), B: binary.LittleEndian.Uint64(b[8:])}
			e.rbShard = int(binary.LittleEndian.Uint32(b[16:]))
			b = b[replayRBBytes:]
		}
		if l > 0 {
			e.rec, b = b[:l:l], b[l:]
		}
		evs = append(evs, e)
	}
	return name, rowGroup, evs
}
