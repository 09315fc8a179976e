package memplan

import "testing"

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// mems are the --mem values every plan is checked at: the 16 MiB minimum,
// around the floor, the defaults of small and large machines.
var mems = []int64{16 * mib, 24 * mib, 63 * mib, Floor, 100 * mib, 256 * mib, gib, 12 * gib, 1 << 40}

// checkPlan: the shares within Mem sum to at most Mem, or the floor below
// it; every share is at least 0, the heap's at least MinHeap; the heap
// limit is the heap's shares and the row groups.
func checkPlan(t *testing.T, p Plan) {
	t.Helper()
	for name, n := range map[string]int64{"heap": p.Heap, "tables": p.Tables, "seen blooms": p.SeenBlooms, "sorter": p.Sorter, "sim blooms": p.SimBlooms, "filters": p.Filters, "fixed": p.Fixed, "read buffers": p.ReadBuffers, "row groups": p.RowGroups} {
		if n < 0 {
			t.Errorf("%s at --mem %d MiB: %s share %d", p.Job, p.Mem/mib, name, n)
		}
	}
	if p.Heap < MinHeap {
		t.Errorf("%s at --mem %d MiB: heap %d MiB, below the %d MiB floor", p.Job, p.Mem/mib, p.Heap/mib, MinHeap/mib)
	}
	if w := p.Within(); w > max(p.Mem, Floor) {
		t.Errorf("%s at --mem %d MiB: the shares take %d bytes, more than max(--mem, %d MiB)", p.Job, p.Mem/mib, w, Floor/mib)
	}
	if p.Mem >= Floor && p.Within() > p.Mem {
		t.Errorf("%s at --mem %d MiB: the shares take %d bytes", p.Job, p.Mem/mib, p.Within())
	}
	if got := p.HeapLimit(); got != p.Heap+p.Fixed+p.Filters+p.ReadBuffers+p.RowGroups {
		t.Errorf("%s: heap limit %d", p.Job, got)
	}
}

func TestPlansWithinMem(t *testing.T) {
	for _, mem := range mems {
		for _, j := range []DedupJob{
			{Mem: mem}, {Mem: mem, Record: true},
			{Mem: mem, Parquet: Parquet{Parquet: true, MaxRecord: min(mem/8, 64*mib)}},
		} {
			checkPlan(t, Dedup(j))
			checkPlan(t, KeepLast(j))
		}
		checkPlan(t, Count(CountJob{Mem: mem}))
		for _, threads := range []int{1, 2, 8, 64} {
			b := Build(BuildJob{Mem: mem, Threads: threads, SegmentBytes: 34 * mib})
			checkPlan(t, b.Plan)
			if b.Sorter < mem/4 {
				t.Errorf("build at --mem %d MiB, %d threads: sorter %d MiB, less than a quarter", mem/mib, threads, b.Sorter/mib)
			}
			// Past the writer's and the buffers' reserve, the heap is
			// given just that; the sorter the rest.
			if reserve := b.Writer + 16*mib + int64(threads)*8*mib; 4*reserve <= 3*mem && b.Heap != reserve {
				t.Errorf("build at --mem %d MiB, %d threads: heap %d MiB, reserve %d MiB", mem/mib, threads, b.Heap/mib, reserve/mib)
			}
		}
		checkPlan(t, Merge(mem))
		checkPlan(t, Query(mem))
		for _, j := range []ReplayJob{
			{Mem: mem, L1Bytes: 8 * mib}, {Mem: mem, L2Bytes: 40 * mib}, {Mem: mem, L1Bytes: 8 * mib, L2Bytes: 40 * mib},
			{Mem: mem, RedisBloom: true}, {Mem: mem, L1Bytes: 8 * mib, RedisBloom: true},
		} {
			if ReplayMemNeeded(j, 10*mib) > mem {
				continue // refused before any work
			}
			p := Replay(j)
			checkPlan(t, p)
			if rest := p.Mem - p.SimBlooms - p.Filters; rest < ReplayMinRest {
				t.Errorf("replay at --mem %d MiB: the blooms leave %d MiB", mem/mib, rest/mib)
			}
		}
	}
}

// TestPlanShares: the shares as the allocation sites took them before
// there was a plan (the figures of every golden and benchmark).
func TestPlanShares(t *testing.T) {
	for _, c := range []struct {
		name string
		got  Plan
		want Plan
	}{
		{"dedup 1GiB", Dedup(DedupJob{Mem: gib}),
			Plan{Job: "dedup", Mem: gib, Heap: gib / 4, Tables: gib / 4, SeenBlooms: gib / 4, Fixed: gib / 4}},
		{"dedup 16MiB", Dedup(DedupJob{Mem: 16 * mib}),
			Plan{Job: "dedup", Mem: 16 * mib, Heap: MinHeap, Tables: 4 * mib, SeenBlooms: 4 * mib}},
		{"dedup --record 1000MiB", Dedup(DedupJob{Mem: 1000 * mib, Record: true}),
			Plan{Job: "dedup", Mem: 1000 * mib, Heap: 200 * mib, Tables: 200 * mib, SeenBlooms: 200 * mib, Sorter: 200 * mib, Fixed: 200 * mib}},
		{"dedup --keep last --record 1000MiB", KeepLast(DedupJob{Mem: 1000 * mib, Record: true}),
			Plan{Job: "dedup", Mem: 1000 * mib, Heap: 200 * mib, Tables: 400 * mib, Sorter: 200 * mib, Fixed: 200 * mib}},
		{"dedup --keep last 16MiB", KeepLast(DedupJob{Mem: 16 * mib}),
			Plan{Job: "dedup", Mem: 16 * mib, Heap: MinHeap, Tables: 8 * mib}},
		{"dedup --against 1GiB", Dedup(DedupJob{Mem: gib, Against: true}),
			Plan{Job: "dedup", Mem: gib, Heap: gib / 8, ReadBuffers: gib / 8, Tables: gib / 4, SeenBlooms: gib / 4, Fixed: gib / 4}},
		{"dedup --against 16MiB", Dedup(DedupJob{Mem: 16 * mib, Against: true}),
			Plan{Job: "dedup", Mem: 16 * mib, Heap: MinHeap, ReadBuffers: 2 * mib, Tables: 4 * mib, SeenBlooms: 4 * mib}},
		{"dedup --keep last --against 1000MiB", KeepLast(DedupJob{Mem: 1000 * mib, Against: true}),
			Plan{Job: "dedup", Mem: 1000 * mib, Heap: 125 * mib, ReadBuffers: 125 * mib, Tables: 500 * mib, Fixed: 250 * mib}},
		{"dedup parquet 256MiB", Dedup(DedupJob{Mem: 256 * mib, Parquet: Parquet{Parquet: true, MaxRecord: 32 * mib}}),
			Plan{Job: "dedup", Mem: 256 * mib, Heap: 64 * mib, Tables: 64 * mib, SeenBlooms: 64 * mib, Fixed: 64 * mib, RowGroups: 128 * mib, MaxRecord: 32 * mib}},
		{"count 1GiB", Count(CountJob{Mem: gib}),
			Plan{Job: "count", Mem: gib, Heap: gib / 4, Tables: gib / 4 * 3}},
		{"count 32MiB", Count(CountJob{Mem: 32 * mib}),
			Plan{Job: "count", Mem: 32 * mib, Heap: MinHeap, Tables: 24 * mib}},
		// 2 threads: 4 segments pipelined (136 MiB) fit a quarter of 1 GiB.
		{"build 1GiB", Build(BuildJob{Mem: gib, Threads: 2, SegmentBytes: 34 * mib}).Plan,
			Plan{Job: "build", Mem: gib, Heap: 168 * mib, Sorter: gib - 168*mib}},
		{"build 256MiB", Build(BuildJob{Mem: 256 * mib, Threads: 2, SegmentBytes: 34 * mib}).Plan,
			Plan{Job: "build", Mem: 256 * mib, Heap: 66 * mib, Sorter: 190 * mib}},
		{"build 64MiB", Build(BuildJob{Mem: 64 * mib, Threads: 2, SegmentBytes: 34 * mib}).Plan,
			Plan{Job: "build", Mem: 64 * mib, Heap: 48 * mib, Sorter: 16 * mib}},
		{"replay 1GiB, L1 64MiB", Replay(ReplayJob{Mem: gib, L1Bytes: 64 * mib}),
			Plan{Job: "replay", Mem: gib, SimBlooms: 64 * mib, Heap: 240 * mib, Tables: 240 * mib, SeenBlooms: 240 * mib, Fixed: 240 * mib}},
		{"replay redisbloom 1GiB, L1 64MiB", Replay(ReplayJob{Mem: gib, L1Bytes: 64 * mib, RedisBloom: true}),
			Plan{Job: "replay", Mem: gib, SimBlooms: 64 * mib, Filters: 720 * mib, Heap: 60 * mib, Tables: 60 * mib, SeenBlooms: 60 * mib, Fixed: 60 * mib}},
		{"replay redisbloom 128MiB", Replay(ReplayJob{Mem: 128 * mib, RedisBloom: true}),
			Plan{Job: "replay", Mem: 128 * mib, Filters: 64 * mib, Heap: 16 * mib, Tables: 16 * mib, SeenBlooms: 16 * mib, Fixed: 16 * mib}},
		{"merge", Merge(gib), Plan{Job: "merge", Mem: gib, Heap: gib}},
		{"query", Query(gib), Plan{Job: "query", Mem: gib, Heap: 768 * mib, ReadBuffers: 256 * mib}},
		{"query 32MiB", Query(32 * mib), Plan{Job: "query", Mem: 32 * mib, Heap: 24 * mib, ReadBuffers: 8 * mib}},
	} {
		if c.got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, c.got, c.want)
		}
	}
}

// TestBuildWriter: the writer pipelines its segments when they take at
// most a quarter of --mem.
func TestBuildWriter(t *testing.T) {
	for _, c := range []struct {
		threads    int
		mem        int64
		sequential bool
		writer     int64
	}{
		{2, 12 * gib, false, 136 * mib}, {2, 544 * mib, false, 136 * mib}, {2, 543 * mib, true, 34 * mib},
		{8, 2 * gib, false, 340 * mib}, {8, gib, true, 34 * mib}, {1, 16 * mib, true, 34 * mib},
	} {
		b := Build(BuildJob{Mem: c.mem, Threads: c.threads, SegmentBytes: 34 * mib})
		if b.Sequential != c.sequential || b.Writer != c.writer {
			t.Errorf("threads %d, --mem %d MiB: sequential %v, writer %d MiB; want %v, %d MiB", c.threads, c.mem/mib, b.Sequential, b.Writer/mib, c.sequential, c.writer/mib)
		}
	}
}

// TestReplayMemNeeded: the least --mem a replay needs is the least under
// which its plan holds the filters reserved and leaves ReplayMinRest.
func TestReplayMemNeeded(t *testing.T) {
	for _, j := range []ReplayJob{{L1Bytes: 8 * mib, L2Bytes: 100 * mib}, {L1Bytes: 8 * mib, RedisBloom: true}, {RedisBloom: true}} {
		for _, reserved := range []int64{0, 1, mib, 300*mib + 7} {
			need := ReplayMemNeeded(j, reserved)
			j.Mem = need
			p := Replay(j)
			if p.Filters < reserved && j.RedisBloom {
				t.Errorf("%+v, reserved %d: at --mem %d the filters get %d", j, reserved, need, p.Filters)
			}
			if p.Mem-p.SimBlooms-p.Filters < ReplayMinRest {
				t.Errorf("%+v: at --mem %d the blooms leave %d", j, need, p.Mem-p.SimBlooms-p.Filters)
			}
			j.Mem = need - 1
			if j.RedisBloom && Replay(j).Filters >= reserved && reserved > 0 && j.Mem-j.L1Bytes-Replay(j).Filters >= ReplayMinRest {
				t.Errorf("%+v, reserved %d: %d is not the least", j, reserved, need)
			}
		}
	}
}

func TestRecordLimit(t *testing.T) {
	for _, mem := range mems {
		if r := RecordLimit(mem); MemForRecord(r) > mem || MemForRecord(r+1) <= mem {
			t.Errorf("--mem %d: record limit %d", mem, r)
		}
	}
}

// TestReconcilePlan: reconcile's shares are those its sites took of
// --mem before there was a plan (every golden and figure unchanged), the
// shares off the heap leave the heap the rest, and every reconcile job's
// plan is within --mem.
func TestReconcilePlan(t *testing.T) {
	for _, mem := range mems {
		for _, j := range []ReconcileJob{
			{Mem: mem}, {Mem: mem, Unsorted: true}, {Mem: mem, Etcd: true},
			{Mem: mem, Store: BitmapBloom, IndexKeys: 1 << 20}, {Mem: mem, Store: BitmapBloom, IndexKeys: 1 << 30, Rebuild: true},
			{Mem: mem, Store: RedisBloom},
		} {
			p := Reconcile(j)
			checkPlan(t, p)
			// Before the plan: the sorter max(mem/2, 16 MiB), the records'
			// digests max(mem/2/32, 1<<16) and key texts max(mem/2, 1 MiB),
			// the bloom audit's pass mem - bitset - 32 MiB, the rebuild's
			// buffers mem - 64 MiB, RedisBloom's read-ahead
			// min(max(mem/8, 16 MiB), 64 MiB), spool min(max(mem/16, 1 MiB),
			// 256 MiB), etcd's values mem/4.
			if j.Unsorted && p.Sorter != max(mem/2, 16<<20) || !j.Unsorted && p.Sorter != 0 {
				t.Errorf("%+v: sorter %d", j, p.Sorter)
			}
			if p.Digests() != max(mem/2/32, 1<<16) || p.KeyBytes() != max(mem/2, 1<<20) {
				t.Errorf("%+v: digests %d, key bytes %d", j, p.Digests(), p.KeyBytes())
			}
			bitset := int64(len(make([]uint64, (j.IndexKeys+63)/64))) * 8
			if got := p.BloomAuditPass(bitset); got != mem-bitset-32<<20 {
				t.Errorf("%+v: audit pass %d", j, got)
			}
			if j.Store == BitmapBloom && p.BloomPass != max(mem-bitset-32<<20, 0) {
				t.Errorf("%+v: declared audit pass %d", j, p.BloomPass)
			}
			if want := max(mem-64<<20, 0); j.Rebuild && p.RebuildBuffers != want {
				t.Errorf("%+v: rebuild buffers %d, want %d", j, p.RebuildBuffers, want)
			}
			if j.Store == RedisBloom && (p.ReadAhead != min(max(mem/8, 16<<20), 64<<20) || p.Spool != min(max(mem/16, 1<<20), 256<<20) || p.FilterHeader(3) != max(mem/8/3, 64<<10)) {
				t.Errorf("%+v: read-ahead %d, spool %d", j, p.ReadAhead, p.Spool)
			}
			if j.Etcd && p.Values != mem/4 {
				t.Errorf("%+v: values %d", j, p.Values)
			}
			if want := max(mem-p.Sorter-max(p.BloomPass, p.RebuildBuffers), MinHeap); p.Heap != want {
				t.Errorf("%+v: heap %d, want %d", j, p.Heap, want)
			}
		}
	}
	// The RedisBloom audit's pass and the least --mem it needs, as
	// planAudit reckoned them: mem - (read-ahead + held + 16 MiB [+ spool]).
	p := Reconcile(ReconcileJob{Mem: gib, Store: RedisBloom})
	if pass, need := p.RedisBloomPass(10*mib, true, 64<<10); pass != gib-64*mib-10*mib-16*mib-64*mib || need != 64*mib+10*mib+16*mib+64*mib+64<<10 {
		t.Errorf("RedisBloom pass %d, need %d", pass, need)
	}
	if got := p.RedisBloomBuild(mib); got != gib-16*mib-mib {
		t.Errorf("RedisBloom build %d", got)
	}
	if RebuildMemNeeded(mib) != 65*mib {
		t.Errorf("rebuild needs %d", RebuildMemNeeded(mib))
	}
}
