// Package memplan shares a job's --mem out: one function per job computes
// every share (the Go heap, the tables, blooms and sort arenas in huge
// pages, the record limit) from --mem and the job's inputs, and every
// allocation site takes its share from the Plan. The Go heap's soft limit
// is set from the same Plan: without one the runtime would count the whole
// of --mem as its own beside the memory the tables take outside it.
//
// The shares within Mem sum to at most Mem once Mem is past Floor; below
// it, the floors (MinHeap, the fixed buffers) are what a job needs
// whatever --mem says, and the README bounds the process by
// max(--mem, Floor) + 16 MiB. RowGroups come on top of Mem (README
// "--mem": a Parquet input's row groups are counted against four times
// --max-record, not against --mem).
//
// The package holds arithmetic only: no allocation, no flags. It is in
// internal/ so that pipeline and reconcile, which must not import each
// other, both take their shares from it.
package memplan

import "fmt"

// Floor is the least memory a job runs in, whatever --mem: about 60 MiB
// of fixed buffers (index writer segments, input chunks, a run being
// written, the runtime). README "--mem".
const Floor = 64 << 20

// Overhead is what the process's anonymous memory may take beyond
// max(--mem, Floor): what no share counts (the runtime's own structures,
// goroutine stacks, the GC's slack past the heap's soft limit). README
// "--mem" and --help state the bound with these figures (Bound).
const Overhead = 16 << 20

// Bound is the README's bound on the process's anonymous memory under
// --mem mem, Parquet's row groups aside.
func Bound(mem int64) int64 { return max(mem, Floor) + Overhead }

// BoundText says Bound as --help and the README do, in MiB: code is how
// --mem is written ("--mem" or "`--mem`"), sep what goes between a figure
// and its unit.
func BoundText(code, sep string) string {
	return fmt.Sprintf("max(%s, %d%sMiB) + %d%sMiB", code, Floor>>20, sep, Overhead>>20, sep)
}

// MinMem is the least --mem taken.
const MinMem = 16 << 20

// MinHeap is the least Go heap limit a job runs under: the fixed buffers
// (chunks in flight, a run being written) need it whatever --mem is.
const MinHeap = 16 << 20

// A Plan is a job's shares of --mem, in bytes. A share a job does not
// have is 0 (and left out of --stats-json).
type Plan struct {
	Job string `json:"-"`         // for messages: the command is in --stats-json already
	Mem int64  `json:"mem_bytes"` // --mem
	// Heap is the Go heap's own share: the runtime, chunks in flight,
	// the record buffers, an index writer's segments.
	Heap int64 `json:"heap_bytes"`
	// Tables are the exact seen-set's hash tables (dedup, replay) or
	// the tally of keys (count, dedup --keep last), in huge pages.
	Tables int64 `json:"tables_bytes,omitempty"`
	// SeenBlooms bound the blooms of the seen-set's bounded mode, once
	// it spills (huge pages).
	SeenBlooms int64 `json:"seen_blooms_bytes,omitempty"`
	// Sorter is a sort arena (mmap): build's collectors, dedup --record's.
	Sorter int64 `json:"sorter_bytes,omitempty"`
	// SimBlooms are replay's simulated L1 and bitmap L2 blooms (huge
	// pages), as large as the flags make them.
	SimBlooms int64 `json:"sim_blooms_bytes,omitempty"`
	// Filters are what replay's RedisBloom filters may grow to, on the
	// Go heap.
	Filters int64 `json:"filters_bytes,omitempty"`
	// Fixed is what does not grow with the data (a run being written,
	// chunks in flight, the --record writer's segments): what the other
	// shares leave of Mem.
	Fixed int64 `json:"fixed_bytes,omitempty"`
	// ReadBuffers are what an index's cold lookups hold on the Go heap
	// (fpstore.WithReadBuffers): the pages a batch reads with pread, and
	// the directory pages read, kept while the index is open.
	ReadBuffers int64 `json:"read_buffers_bytes,omitempty"`
	// RowGroups is, beyond Mem, what a Parquet input holds decoded on the
	// Go heap: a row group's key values and a page of each column, two
	// row groups' copy buffers, within four times MaxRecord.
	RowGroups int64 `json:"row_groups_bytes,omitempty"`
	// MaxRecord is the longest record read (--max-record as resolved): a
	// limit held within Heap, not a share of its own.
	MaxRecord int64 `json:"max_record_bytes,omitempty"`

	// reconcile's shares (Reconcile). BloomPass and RebuildBuffers are
	// off the Go heap (huge pages), one after the other; the rest are
	// limits held within Heap, like MaxRecord.

	// BloomPass is the bitmap bloom audit's pass buffer.
	BloomPass int64 `json:"bloom_pass_bytes,omitempty"`
	// RebuildBuffers are the bitmap bloom rebuild's shard bitmaps (one
	// group built while another is written).
	RebuildBuffers int64 `json:"rebuild_buffers_bytes,omitempty"`
	// Records bound what the records pass keeps of the keys missing
	// online: their whole digests (32 bytes each) or their key texts.
	Records int64 `json:"records_bytes,omitempty"`
	// MaxReply is the most one Redis reply may declare; ReplyStreams the
	// masters of a cluster scanned at once (ReplyBudget).
	MaxReply     int64 `json:"max_reply_bytes,omitempty"`
	ReplyStreams int   `json:"reply_streams,omitempty"`
	// ReadAhead is RedisBloom's replies in flight (BF.SCANDUMP chunks
	// read, BF.LOADCHUNK chunks written); Spool its truth spool's
	// buffers; FilterHeaders what its filters' headers may cost to parse,
	// all together.
	ReadAhead     int64 `json:"read_ahead_bytes,omitempty"`
	Spool         int64 `json:"spool_bytes,omitempty"`
	FilterHeaders int64 `json:"filter_headers_bytes,omitempty"`
	// Values are etcd's --value values of the keys to write; EtcdRecv the
	// largest response accepted, EtcdPage what a page of a scan should
	// weigh.
	Values   int64 `json:"values_bytes,omitempty"`
	EtcdRecv int64 `json:"etcd_recv_bytes,omitempty"`
	EtcdPage int64 `json:"etcd_page_bytes,omitempty"`
}

// HeapLimit is the Go heap's soft limit while the job runs: its own share,
// the shares that live on the heap (the fixed buffers are made with make:
// chunks in flight, a run being written; query's read buffers), and the
// row groups beyond Mem. A limit below what the job keeps live does not
// hold it lower: it makes the collector run without end (dedup --mem
// 64MiB: 80 cycles on 2M records with the fixed buffers left out) and the
// runtime then lets the heap past it anyway.
func (p Plan) HeapLimit() int64 { return p.Heap + p.Fixed + p.Filters + p.ReadBuffers + p.RowGroups }

// Within is the sum of the shares within Mem.
func (p Plan) Within() int64 {
	return p.Heap + p.Tables + p.SeenBlooms + p.Sorter + p.SimBlooms + p.Filters + p.ReadBuffers + p.Fixed + max(p.BloomPass, p.RebuildBuffers)
}

// RecordLimit is the longest record --mem holds: a record is held whole,
// twice while its buffer grows, within a quarter of --mem, so an eighth
// of it (the readers' own limit, 1 GiB, caps it further).
func RecordLimit(mem int64) int64 { return mem / 8 }

// MemForRecord is the least --mem whose RecordLimit is n.
func MemForRecord(n int64) int64 { return 8 * n }

// Parquet says what a job reads, for RowGroups.
type Parquet struct {
	Parquet   bool  // the records are Parquet
	MaxRecord int64 // --max-record as resolved
}

// rowGroups is the Parquet reader's limit (four times MaxRecord: the
// reader refuses an input that needs more), held on the Go heap beside
// the job's share of Mem. Without it in the heap limit the collector ran
// without pause on a Parquet input (673 collections instead of 12).
func (q Parquet) rowGroups() int64 {
	if !q.Parquet {
		return 0
	}
	return ReaderLimit(q.MaxRecord)
}

// ReaderLimit is what a Parquet reader may hold decoded: a page and a row
// group's key values (two row groups': the next is decoded ahead), each
// within the bound a record has in the text formats, four times.
func ReaderLimit(maxRecord int64) int64 { return 4 * maxRecord }

// DedupJob is what the plans of dedup and of dedup --keep last depend on.
type DedupJob struct {
	Mem    int64
	Record bool // --record: a sorter of its own
	// Against: keys are looked up in indexes (--against), whose cold
	// lookups read with pread into ReadBuffers.
	Against bool
	Parquet
}

// dedupParts is how many equal parts dedup shares --mem into.
func (j DedupJob) parts() int64 {
	if j.Record {
		return 5
	}
	return 4
}

// Dedup shares --mem out in equal parts: the exact tables, the blooms of
// the bounded mode, the Go heap, what does not grow with the data (a run
// being written, chunks in flight) and, with Record, its sorter. Against
// takes half the heap's part for the --against indexes' cold reads.
func Dedup(j DedupJob) Plan {
	parts := j.parts()
	p := Plan{Job: "dedup", Mem: j.Mem, Heap: max(j.Mem/parts, MinHeap), Tables: j.Mem / parts, SeenBlooms: j.Mem / parts, RowGroups: j.rowGroups(), MaxRecord: j.MaxRecord}
	if j.Record {
		p.Sorter = j.Mem / parts
	}
	if j.Against {
		// Half the heap's part: the Go heap's limit counts both.
		p.ReadBuffers = j.Mem / parts / 2
		p.Heap = max(j.Mem/parts-p.ReadBuffers, MinHeap)
	}
	p.Fixed = max(j.Mem-p.Within(), 0)
	return p
}

// KeepLast is dedup --keep last: the parts of dedup, the tally of two
// passes taking those of the tables and the blooms.
func KeepLast(j DedupJob) Plan {
	p := Dedup(j)
	p.Tables, p.SeenBlooms, p.Fixed = j.Mem*2/j.parts(), 0, 0
	p.Fixed = max(j.Mem-p.Within(), 0)
	return p
}

// CountJob is what count's plan depends on.
type CountJob struct {
	Mem int64
	Parquet
}

// Count gives three quarters of --mem to the tally of keys (its tables,
// then the counts by position that replace them), the rest to the heap.
func Count(j CountJob) Plan {
	return Plan{Job: "count", Mem: j.Mem, Tables: j.Mem * 3 / 4, Heap: max(j.Mem/4, MinHeap), RowGroups: j.rowGroups(), MaxRecord: j.MaxRecord}
}

// BuildJob is what build's plan depends on.
type BuildJob struct {
	Mem     int64
	Threads int
	// SegmentBytes is what the index writer holds for each segment in
	// flight (fpstore's writer: its fingerprints and its FlatBuffers
	// buffer).
	SegmentBytes int64
	Parquet
}

// BuildPlan is build's Plan and how its index writer runs within it.
type BuildPlan struct {
	Plan
	// Sequential: the writer builds one segment at a time, between the
	// partitions the sorters hand over; else a builder thread pipelines
	// threads+2 segments with the sort.
	Sequential bool
	Writer     int64 // the writer's segments in flight, within Heap
}

// Build gives the sorter's arenas what the writer, the chunk buffers (16
// MiB, 8 MiB a thread) and the runtime leave of --mem, and never less than
// a quarter of it; the Go heap holds the rest. The writer pipelines its
// segments when they take at most a quarter of --mem: pipelining buys a
// shorter build for the memory of the segments in flight
// (bench/results/ab-2026-12-03-s14.md).
func Build(j BuildJob) BuildPlan {
	b := BuildPlan{Sequential: true, Writer: j.SegmentBytes}
	if pipelined := int64(j.Threads+2) * j.SegmentBytes; 4*pipelined <= j.Mem {
		b.Sequential, b.Writer = false, pipelined
	}
	reserve := b.Writer + 16<<20 + int64(j.Threads)*8<<20
	sorter := max(j.Mem-reserve, j.Mem/4)
	b.Plan = Plan{Job: "build", Mem: j.Mem, Sorter: sorter, Heap: max(j.Mem-sorter, MinHeap), RowGroups: j.rowGroups(), MaxRecord: j.MaxRecord}
	return b
}

// Merge holds nothing that grows with --mem (it streams its inputs in
// fixed buffers): the Go heap may have all of it.
func Merge(mem int64) Plan { return Plan{Job: "merge", Mem: mem, Heap: mem} }

// Query's indexes are mapped files, in the page cache; what it holds
// besides is what cold lookups read with pread (ReadBuffers): a quarter
// of --mem, half of it for the directories read (at 0.25 bytes a key,
// those of 5·10^8 keys at 1 GiB), half for a batch's pages (~3 a key at
// most: 10^4 keys a round at 1 GiB). The Go heap has the rest.
func Query(mem int64) Plan {
	p := Plan{Job: "query", Mem: mem, ReadBuffers: mem / 4}
	p.Heap = max(mem-p.ReadBuffers, MinHeap)
	return p
}

// ReplayMinRest is the least of --mem the simulated blooms and filters
// must leave: the exact seen-set and the fixed buffers (chunks in flight,
// a run being written, the runtime: ~60 MiB).
const ReplayMinRest = 64 << 20

// ReplayJob is what replay's plan depends on.
type ReplayJob struct {
	Mem        int64
	L1Bytes    int64 // every system's L1
	L2Bytes    int64 // every system's bitmap L2
	RedisBloom bool  // the L2s are RedisBloom filters, which grow
	MaxRecord  int64
}

// Replay: the simulated blooms take what the flags make them, RedisBloom
// filters may grow to three quarters of what the L1s leave (and never so
// much that less than ReplayMinRest is left), and what remains is shared
// out as dedup shares it: a quarter each for the exact seen-set's table,
// its bloom once it spills, the Go heap and the fixed buffers.
func Replay(j ReplayJob) Plan {
	p := Plan{Job: "replay", Mem: j.Mem, SimBlooms: j.L1Bytes + j.L2Bytes, MaxRecord: j.MaxRecord}
	if j.RedisBloom {
		rest := j.Mem - j.L1Bytes
		p.Filters = max(min(rest/4*3, rest-ReplayMinRest), 0)
	}
	rest := max(j.Mem-p.SimBlooms-p.Filters, 16<<20)
	p.Tables, p.SeenBlooms, p.Heap = rest/4, rest/4, max(rest/4, MinHeap)
	p.Fixed = max(j.Mem-p.Within(), 0)
	return p
}

// ReplayMemNeeded is the least --mem under which Replay leaves
// ReplayMinRest beside the blooms, and, with RedisBloom, holds reserved
// bytes of filters in its Filters share.
func ReplayMemNeeded(j ReplayJob, reserved int64) int64 {
	if j.RedisBloom {
		return j.L1Bytes + max(reserved+ReplayMinRest, 4*((reserved+2)/3))
	}
	return j.L1Bytes + j.L2Bytes + ReplayMinRest
}

// Store is the kind of online side a reconcile reads, for its plan.
type Store int

const (
	// Listed: keys or set members (Redis), a table (MySQL), an export
	// file, an etcd prefix: read whole and joined with the index.
	Listed Store = iota
	// BitmapBloom: the L2 bloom in plain Redis strings.
	BitmapBloom
	// RedisBloom: the L2 as RedisBloom (BF.*) filters.
	RedisBloom
)

// ReconcileJob is what reconcile's plan depends on.
type ReconcileJob struct {
	Mem   int64
	Store Store
	// Unsorted: the online side is read in no order (a SCAN, an export
	// file) and sorted through the external sorter before the join.
	Unsorted bool
	// Etcd: the online side is an etcd prefix (values, response sizes).
	Etcd bool
	// IndexKeys are the truth index's fingerprints: a bitmap bloom audit
	// holds a bit for each beside its pass.
	IndexKeys int64
	// Rebuild: bitmap bloom shards are rebuilt after the audit.
	Rebuild   bool
	MaxRecord int64
}

const (
	// BloomAuditReserve is what a bitmap bloom audit leaves of --mem
	// beside its pass buffer and its bitset: the runtime, the replies in
	// flight (8 GETRANGEs of 512 KiB), the index's pages read.
	BloomAuditReserve = 32 << 20
	// RebuildReserve is what a bitmap bloom rebuild leaves of --mem beside
	// its shard bitmaps: the same, and the SETRANGE pipelines written.
	RebuildReserve = 64 << 20
	// RedisBloomSlack is what a RedisBloom audit or rebuild leaves of
	// --mem for what no one counts: the runtime, go-redis's buffers, the
	// index's pages read.
	RedisBloomSlack = 16 << 20
	// BFChunk is the most data one BF.SCANDUMP reply carries (the module's
	// MAX_SCANDUMP_SIZE, rbloom.MaxChunk): the read-ahead holds one.
	BFChunk = 16 << 20
	// EtcdRecv and EtcdPage are etcd's response bound and a scan page's
	// weight, whatever --mem: a page must fit a response, and a key with
	// its value may take 1.5 MiB (etcd's request limit).
	EtcdRecv = 64 << 20
	EtcdPage = 16 << 20
)

// Reconcile shares --mem out for reconcile:
//   - a listed online side read in no order goes through the external
//     sorter, whose arenas (off the heap) take half of --mem; the Go heap
//     the rest;
//   - a bitmap bloom's audit pass and its rebuild's bitmaps are off the
//     heap: the pass what the bitset (a bit a truth key) and
//     BloomAuditReserve leave, the rebuild's what RebuildReserve leaves;
//     the Go heap what the larger leaves;
//   - RedisBloom's passes and filters are on the Go heap: all of --mem.
//
// Within the heap: the records pass keeps the missing keys' digests or
// texts in half of --mem; a Redis reply is bounded by ReplyBudget; etcd's
// values take a quarter; RedisBloom's read-ahead an eighth (one chunk to
// 64 MiB), its spool a sixteenth (1 to 256 MiB), its filters' headers an
// eighth.
func Reconcile(j ReconcileJob) Plan {
	p := Plan{Job: "reconcile", Mem: j.Mem, Records: j.Mem / 2, MaxRecord: j.MaxRecord}
	p.MaxReply, p.ReplyStreams = ReplyBudget(j.Mem)
	switch j.Store {
	case Listed:
		if j.Unsorted {
			p.Sorter = max(j.Mem/2, 16<<20)
		}
		if j.Etcd {
			p.Values, p.EtcdRecv, p.EtcdPage = j.Mem/4, EtcdRecv, EtcdPage
		}
	case BitmapBloom:
		p.BloomPass = max(p.BloomAuditPass(BitsetBytes(j.IndexKeys)), 0)
		if j.Rebuild {
			p.RebuildBuffers = max(j.Mem-RebuildReserve, 0)
		}
	case RedisBloom:
		p.ReadAhead = min(max(j.Mem/8, BFChunk), 64<<20)
		p.Spool = min(max(j.Mem/16, 1<<20), 256<<20)
		p.FilterHeaders = j.Mem / 8
	}
	p.Heap = max(j.Mem-p.Sorter-max(p.BloomPass, p.RebuildBuffers), MinHeap)
	return p
}

// ReplyBudget is what one Redis reply may declare in all (maxReply: 16
// bytes an array element, strings at their length, lines at theirs) and
// how many masters of a cluster are scanned at once (streams). Reading the
// online side, the replies in flight are the pages queued (4), the one
// being parsed, and two per master scanned (one being read, one waiting
// to be queued): at most 5·maxReply + share, about 2.25 shares, with
// share = max(mem, 64 MiB)/8, while the sorter has half of mem. A legit
// SCAN page of COUNT c takes about 100·c bytes: the 1000 of the default
// is 100 KB; count= up to ~20000 fits the smallest budget.
func ReplyBudget(mem int64) (maxReply int64, streams int) {
	share := max(mem, 64<<20) / 8
	maxReply = min(max(share/4, 2<<20), 8<<20)
	return maxReply, int(max(1, share/(2*maxReply)))
}

// BitsetBytes is a bitset of n bits, in whole words.
func BitsetBytes(n int64) int64 { return (n + 63) / 64 * 8 }

// BloomAuditPass is what a bitmap bloom audit's pass may take beside a
// bitset of bitset bytes (a bit a truth key): less than a chunk (or
// below 0) means a pass of one chunk.
func (p Plan) BloomAuditPass(bitset int64) int64 {
	return p.Mem - bitset - BloomAuditReserve
}

// RebuildMemNeeded is the least --mem a bitmap bloom rebuild of shards of
// shardBytes takes: a shard whole, and RebuildReserve.
func RebuildMemNeeded(shardBytes int64) int64 { return shardBytes + RebuildReserve }

// Digests and KeyBytes are the records pass's bounds: the whole digests
// (32 bytes) it keeps of the keys missing online, at least 65536, and
// their key texts' bytes, at least 1 MiB.
func (p Plan) Digests() int64  { return max(p.Records/32, 1<<16) }
func (p Plan) KeyBytes() int64 { return max(p.Records, 1<<20) }

// RedisBloomPass is what a RedisBloom audit's pass may take beside what
// the truth holds (held: its bits, the largest shard's marks, the keys
// any shard holds) and the plan's read-ahead, spool (if spooled) and
// RedisBloomSlack; need is the least --mem a pass of minPass takes.
func (p Plan) RedisBloomPass(held int64, spooled bool, minPass int64) (pass, need int64) {
	fixed := p.ReadAhead + held + RedisBloomSlack
	if spooled {
		fixed += p.Spool
	}
	return p.Mem - fixed, fixed + minPass
}

// RedisBloomBuild is what a RedisBloom filter rebuilt may take beside its
// shard's marks of marks bytes.
func (p Plan) RedisBloomBuild(marks int64) int64 { return p.Mem - RedisBloomSlack - marks }

// FilterHeader is what one of n RedisBloom filters' headers may cost to
// parse: its share of FilterHeaders, at least 64 KiB.
func (p Plan) FilterHeader(n int) int64 { return max(p.FilterHeaders/int64(n), 64<<10) }
