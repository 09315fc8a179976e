package redisbloom

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// MemError is a memory budget too small for an audit: a pass must hold
// some of a filter beside the replies in flight, the truth's bits and the
// marks of a shard's keys.
type MemError struct {
	Need int64 // the least budget that does
}

func (e *MemError) Error() string {
	return fmt.Sprintf("the memory budget is too small for a RedisBloom audit of these filters and keys: it needs at least %s", units.FormatBytes(e.Need))
}

// plan is how an audit spends the memory budget.
type plan struct {
	passBytes int64 // a pass's buffer: the bytes of a filter tested at once
	readAhead int64 // the bytes of BF.SCANDUMP replies asked for at once
}

// minPass is the least pass worth its round trips.
const minPass = 64 << 10

// testBlock is how many keys are tested together, at most.
const testBlock = 16 << 10

// testBlocksBytes is the memory of the audit's two blocks of keys
// (itemBlock): each key's item, where it ends, its view and its hash.
const testBlocksBytes = 2 * (testBlockBytes + testBlock*int64(8+unsafe.Sizeof([]byte(nil))+unsafe.Sizeof(rbloom.Hash{})))

// planAudit divides the memory budget (memplan.Plan.RedisBloomPass):
// replies in flight (a chunk of up to MaxChunk at least), the truth's bits
// (covered, not held: two bits a fingerprint), the largest shard's marks,
// two blocks of keys to test, the spool's buffers, and the rest for a pass.
func (b *Source) planAudit(t *truth) (plan, error) {
	n := int64(t.x.Len())
	var most int64
	for _, c := range t.count {
		most = max(most, c)
	}
	p := plan{readAhead: b.o.Plan.ReadAhead}
	// The largest shard's marks, and a copy of what its first look found
	// when its dump is read again (auditRouted).
	held := 2*memplan.BitsetBytes(n) + rbloom.MarksBytes(int(most))*3/2 + testBlocksBytes
	if b.spec.Router.All() {
		held += memplan.BitsetBytes(most) // the keys any shard holds
	}
	var need int64
	p.passBytes, need = b.o.Plan.RedisBloomPass(held, t.sp != nil, minPass)
	if p.passBytes < minPass {
		return p, &MemError{Need: need}
	}
	return p, nil
}

// auditor is the state of one audit.
type auditor struct {
	b      *Source
	t      *truth
	plan   plan
	rr     *report.RedisBloomReport
	st     *online.ReadStats
	miss   []uint64     // bit r: rank r not held, asked again
	buf    []byte       // a pass's buffer, grown as needed up to plan.passBytes
	spare  []byte       // the next shard's first pass, read ahead (ahead)
	ahead  *ahead       // the next shard's, read while a shard's keys are tested
	blocks [2]itemBlock // keys to test: one read while the other is tested
	read   []*rbloom.Header
}

// Audit reads every shard's filter (its header, then its bits, in passes
// of what the memory budget holds) and tests every truth key in its
// shard as BF.EXISTS would (route=all: in every shard); the keys not
// found are asked again with BF.MEXISTS, a dump not being a snapshot,
// and the header is read again last: a filter deleted or replaced
// meanwhile is a *ChangedError. The keys not held go to missing, in
// order. Shards to rebuild are not audited.
func (b *Source) Audit(ctx context.Context, x *fpstore.Index, st *online.ReadStats, held *int64, missing func(fpstore.Fingerprint) error, rep *report.Report) error {
	rep.Mode = "redisbloom-audit"
	spec := &b.spec
	rr := &report.RedisBloomReport{Template: spec.Template, Route: spec.Router.Route(), Item: spec.Item.String(), TruthFrom: "index", TargetFPR: b.opt.TargetFPR,
		Shards: make([]report.RedisBloomShard, len(b.keys))}
	rep.RedisBloom = rr
	b.rr = rr
	for s := range rr.Shards {
		rr.Shards[s] = report.RedisBloomShard{Shard: spec.Router.Name(s), Key: b.keys[s], Rebuild: b.rebuild[s], SubFilters: []report.RedisBloomSubFilter{}}
	}
	if spec.NeedsKeys() {
		rr.TruthFrom = "records"
	}
	t, err := newTruth(ctx, x, spec, b.o, b.opt.KeyTexts)
	if err != nil {
		return err
	}
	b.truth = t
	rr.Records, rr.RecordsNotInIndex, rr.TruthKeys = t.records, t.notInIndex, t.distinct
	for s := range rr.Shards {
		rr.Shards[s].TruthKeys = t.keys(s)
	}
	p, err := b.planAudit(t)
	if err != nil {
		return err
	}
	b.read = make([]*rbloom.Header, len(b.keys))
	a := &auditor{b: b, t: t, plan: p, rr: rr, st: st, miss: make([]uint64, (x.Len()+63)/64), read: b.read}
	defer a.free()
	if spec.Router.All() {
		err = a.auditAll(ctx)
	} else {
		err = a.auditRouted(ctx)
	}
	if err != nil {
		var fk *FilterKeyError
		var de *DumpError
		var ce *ChangedError
		if errors.As(err, &fk) || errors.As(err, &de) || errors.As(err, &ce) {
			err = fmt.Errorf("%s: %w", b.o.Target, err)
		}
		return err
	}

	b.missed = a.miss
	// The keys not held, in order, to missing.
	var r uint64
	err = x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			switch {
			case !t.isCovered(r):
				rr.Unaudited++
			case a.miss[r>>6]&(1<<(r&63)) != 0:
				rr.Missing++
				if err := missing(fp); err != nil {
					return err
				}
			default:
				rr.Held++
				*held++
			}
			r++
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	return nil
}

// auditRouted audits each shard for the keys routed to it: its passes,
// then its keys not found asked again, then its header read again.
func (a *auditor) auditRouted(ctx context.Context) error {
	for s := range a.b.keys {
		if a.b.rebuild[s] {
			continue
		}
		m, err := a.shard(ctx, s)
		if err != nil {
			return err
		}
		sh := &a.rr.Shards[s]
		found := func(j int, rank uint64, heldNow bool) {
			if heldNow {
				sh.Rechecked++
				a.rr.Rechecked++
				return
			}
			sh.Missing++
			a.miss[rank>>6] |= 1 << (rank & 63)
		}
		notFound := int64(m.Len() - m.Count())
		switch {
		case notFound == 0:
		case readAgainCheaper(a.read[s].Bytes(), int64(m.Len()), notFound):
			sh.AskedAgain = report.AskedAgainDump
			first := slices.Clone(m.Found())
			var grew bool
			if grew, err = a.lookAgain(ctx, s, m); err != nil {
				return err
			}
			// Found by the second look: rechecked. The others are missing,
			// unless the filter grew a sub-filter while it was read (the
			// second look did not test in it): those are asked.
			err = a.t.each(ctx, a.t.bucket(s), func(j int, rank uint64, _ []byte) error {
				if first[j>>6]&(1<<(j&63)) == 0 && (m.Present(j) || !grew) {
					found(j, rank, m.Present(j))
				}
				return nil
			})
			if err == nil && grew {
				sh.AskedAgain = report.AskedAgainDumpMEXISTS
				err = a.recheck(ctx, s, func(j int) bool { return !m.Present(j) }, found)
			}
		default:
			sh.AskedAgain = report.AskedAgainMEXISTS
			err = a.recheck(ctx, s, func(j int) bool { return !m.Present(j) }, found)
		}
		if err != nil {
			return err
		}
		sh.Held = sh.TruthKeys - sh.Missing
		if err := a.unchanged(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// auditAll audits every shard for every key (route=all): a key is held if
// any shard holds it; the keys none holds are asked again of every shard.
func (a *auditor) auditAll(ctx context.Context) error {
	n := a.t.count[0]
	any := make([]uint64, (n+63)/64)
	var audited []int
	for s := range a.b.keys {
		if a.b.rebuild[s] {
			continue
		}
		audited = append(audited, s)
		m, err := a.shard(ctx, s)
		if err != nil {
			return err
		}
		sh := &a.rr.Shards[s]
		for j := range int(n) {
			if m.Present(j) {
				any[j>>6] |= 1 << (j & 63)
				sh.Held++
			}
		}
	}
	if len(audited) == 0 {
		return nil
	}
	err := a.recheckAll(ctx, audited, func(j int) bool { return any[j>>6]&(1<<(j&63)) == 0 }, func(j int, rank uint64, heldNow bool) {
		if heldNow {
			a.rr.Rechecked++
			return
		}
		a.miss[rank>>6] |= 1 << (rank & 63)
	})
	if err != nil {
		return err
	}
	for _, s := range audited {
		if err := a.unchanged(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// shard reads shard s's filter in passes and marks its truth keys found.
func (a *auditor) shard(ctx context.Context, s int) (*rbloom.Marks, error) {
	h, first, err := a.takeAhead(s)
	if err != nil {
		return nil, err
	}
	if h == nil {
		if h, _, err = a.b.readHeader(ctx, s); err != nil {
			return nil, a.gone(s, err)
		}
	}
	a.read[s] = h
	m := rbloom.NewMarks(int(a.t.keys(s)))
	fill := make([]uint64, len(h.Links))
	err = a.look(ctx, s, h, m, a.truthOf(s, true), fill, first)
	a.waitAhead()
	if err != nil {
		return nil, err
	}
	sh := &a.rr.Shards[s]
	describeFilter(sh, h, fill)
	sizeFilter(sh, h, a.b.opt.TargetFPR)
	return m, nil
}

// lookAgain reads shard s's filter a second time and marks the truth keys
// the first look did not find (m) that it finds: added since their bits
// were read, as BF.MEXISTS would find them (a bit set stays set: a key
// held when its bits are read again was held then). The header read
// again must extend the first one's, else the filter was replaced; grew
// says the filter has more sub-filters once read than the look tested.
func (a *auditor) lookAgain(ctx context.Context, s int, m *rbloom.Marks) (grew bool, err error) {
	h, err := a.reread(ctx, s)
	if err != nil {
		return false, err
	}
	if err := a.look(ctx, s, h, m, a.truthOf(s, false), nil, nil); err != nil {
		return false, err
	}
	after, err := a.reread(ctx, s)
	if err != nil {
		return false, err
	}
	return len(after.Links) > len(h.Links), nil
}

// tested is what a look at a filter tests: n items, numbered from 0 in
// the order each gives them (the same at every call).
type tested struct {
	n    int
	each func(ctx context.Context, fn func(item []byte) error) error
	// progress: the look counts its keys in the run's progress.
	progress bool
}

// truthOf is the truth keys of shard s's bucket.
func (a *auditor) truthOf(s int, progress bool) tested {
	k := a.t.bucket(s)
	return tested{n: int(a.t.count[k]), each: func(ctx context.Context, fn func([]byte) error) error {
		return a.t.each(ctx, k, func(_ int, _ uint64, item []byte) error { return fn(item) })
	}, progress: progress}
}

// look reads shard s's filter, whose header is h, in passes of what the
// plan holds, and marks in m the keys of keys found (those m has found
// already are not tested again); fill, unless nil, gets each
// sub-filter's bits set. first, unless nil, is the first pass, read
// already. The first look at a shard reads the next one's header and
// first pass while it tests its last pass's keys (readAhead).
func (a *auditor) look(ctx context.Context, s int, h *rbloom.Header, m *rbloom.Marks, keys tested, fill []uint64, first *rbloom.Window) error {
	sh := &a.rr.Shards[s]
	for p := range h.Plan(a.plan.passBytes) {
		w := first
		if w == nil || w.Pass() != p {
			var err error
			if w, err = a.window(ctx, s, h, p, a.buffer(p.To-p.From)); err != nil {
				return err
			}
		}
		first = nil
		if fill != nil {
			w.Fill(fill)
		}
		if p.To == h.Bytes() && keys.progress {
			a.readAhead(ctx, s)
		}
		if err := a.testAll(ctx, w, m, keys); err != nil {
			return err
		}
		sh.Passes++
		a.rr.Passes++
	}
	return nil
}

// testAll tests keys against w and marks in m those found, a block at a
// time over the machine's cores (MarkItems hashes and tests a block's
// keys there); the next block is read from the spool while one is tested.
func (a *auditor) testAll(ctx context.Context, w *rbloom.Window, m *rbloom.Marks, keys tested) error {
	first, k := 0, 0
	var done chan struct{} // closed when the block in test is marked
	var inTest int
	finish := func() error {
		if done == nil {
			return nil
		}
		<-done
		done = nil
		if a.b.o.Progress != nil && keys.progress {
			a.b.o.Progress.Records.Add(int64(inTest))
		}
		return a.st.Wait(ctx, inTest)
	}
	test := func() error {
		if err := finish(); err != nil {
			return err
		}
		bl := &a.blocks[k]
		items := bl.views()
		inTest, done = len(items), make(chan struct{})
		go func(first int, d chan struct{}) {
			w.MarkItems(m, first, items, bl.hashes)
			close(d)
		}(first, done)
		first += len(items)
		k ^= 1
		a.blocks[k].reset()
		return nil
	}
	a.blocks[k].reset()
	err := keys.each(ctx, func(item []byte) error {
		if a.blocks[k].add(item) {
			return test()
		}
		return nil
	})
	if err == nil && len(a.blocks[k].ends) > 0 {
		err = test()
	}
	if ferr := finish(); err == nil {
		err = ferr
	}
	return err
}

// testBlockBytes bounds a block's items (beside testBlock keys): a block
// ends past it on a whole word of marks (64 keys, which MarkItems shares
// among the cores), so up to 63 items more may pass it.
const testBlockBytes = 1 << 20

// itemBlock is a block of keys to test: their items, one after the other,
// and room for their hashes.
type itemBlock struct {
	arena  []byte
	ends   []int
	items  [][]byte
	hashes []rbloom.Hash
}

func (bl *itemBlock) reset() { bl.arena, bl.ends = bl.arena[:0], bl.ends[:0] }

// add appends item and reports whether the block is full.
func (bl *itemBlock) add(item []byte) bool {
	bl.arena = append(bl.arena, item...)
	bl.ends = append(bl.ends, len(bl.arena))
	n := len(bl.ends)
	return n == testBlock || n%64 == 0 && len(bl.arena) >= testBlockBytes
}

// views is the block's items, and sizes its hashes to them.
func (bl *itemBlock) views() [][]byte {
	bl.items = bl.items[:0]
	from := 0
	for _, to := range bl.ends {
		bl.items = append(bl.items, bl.arena[from:to:to])
		from = to
	}
	bl.hashes = slices.Grow(bl.hashes[:0], len(bl.items))[:len(bl.items)]
	return bl.items
}

// gone is the error of shard s's filter found missing or of another type
// after Open saw it whole: changed during the run.
func (a *auditor) gone(s int, err error) error {
	var fk *FilterKeyError
	if errors.As(err, &fk) && fk.Err == nil {
		return &ChangedError{Shard: fk.Shard, Key: fk.Key, Gone: fk.Type == "none"}
	}
	return err
}

// unchanged reads shard s's header again after its audit: a filter that
// is not the one whose header was read first (deleted, made again,
// loaded anew) is a *ChangedError; one that only grew is the same.
func (a *auditor) unchanged(ctx context.Context, s int) error {
	_, err := a.reread(ctx, s)
	return err
}

// reread is shard s's header read again: one that does not extend the
// header read first (the filter deleted, made again, loaded anew) is a
// *ChangedError.
func (a *auditor) reread(ctx context.Context, s int) (*rbloom.Header, error) {
	h, _, err := a.b.readHeader(ctx, s)
	if err != nil {
		return nil, a.gone(s, err)
	}
	if !h.Extends(a.read[s]) {
		return nil, &ChangedError{Shard: a.b.spec.Router.Name(s), Key: a.b.keys[s]}
	}
	return h, nil
}

// buffer is a pass's buffer of n bytes at least (n <= plan.passBytes).
func (a *auditor) buffer(n uint64) []byte {
	a.waitAhead() // which may be growing spare
	if uint64(len(a.buf)) >= n {
		return a.buf
	}
	if a.spare != nil && int64(n)+int64(len(a.spare)) > a.plan.passBytes {
		a.dropAhead()
	}
	a.buf = grow(a.buf, n)
	return a.buf
}

// grow is buf, or a buffer of n bytes in its place if it is shorter.
func grow(buf []byte, n uint64) []byte {
	if uint64(len(buf)) >= n {
		return buf
	}
	if buf != nil {
		hugemem.Free(buf)
	}
	b, err := hugemem.Alloc(int(n))
	if err != nil {
		b = make([]byte, n)
	}
	return b
}

func (a *auditor) free() {
	if a.ahead != nil {
		a.ahead.cancel() // a failed audit does not wait for its retries
	}
	a.waitAhead()
	for _, b := range [][]byte{a.buf, a.spare} {
		if b != nil {
			hugemem.Free(b)
		}
	}
	a.buf, a.spare = nil, nil
}

// ahead is the next shard's header and first pass, read while a shard's
// keys are tested: the server's time to send a dump is then not the
// audit's. The first pass is read only when it fits in the plan's pass
// beside the pass in test (in spare).
type ahead struct {
	s      int
	done   chan struct{}
	h      *rbloom.Header
	w      *rbloom.Window // nil: the header alone was read
	err    error
	cancel context.CancelFunc
}

// readAhead starts reading the header and first pass of the shard audited
// after s, if any.
func (a *auditor) readAhead(ctx context.Context, s int) {
	next := s + 1
	for next < len(a.b.keys) && a.b.rebuild[next] {
		next++
	}
	if next == len(a.b.keys) || a.ahead != nil {
		return
	}
	room := a.plan.passBytes - int64(len(a.buf))
	ctx, cancel := context.WithCancel(ctx)
	ah := &ahead{s: next, done: make(chan struct{}), cancel: cancel}
	a.ahead = ah
	go func() {
		defer close(ah.done)
		h, _, err := a.b.readHeader(ctx, next)
		if err != nil {
			ah.err = a.gone(next, err)
			return
		}
		ah.h = h
		for p := range h.Plan(a.plan.passBytes) {
			if int64(p.To-p.From) <= room {
				a.spare = grow(a.spare, p.To-p.From)
				a.read[next] = h // what window checks a dump that lies against
				ah.w, ah.err = a.window(ctx, next, h, p, a.spare)
			}
			break
		}
	}()
}

// waitAhead waits for the shard read ahead, if one is being read.
func (a *auditor) waitAhead() {
	if a.ahead != nil {
		<-a.ahead.done
	}
}

// takeAhead is shard s's header and first pass if they were read ahead
// (h nil: they were not), or the error reading them met. The pass's
// buffer becomes the audit's pass buffer.
func (a *auditor) takeAhead(s int) (*rbloom.Header, *rbloom.Window, error) {
	ah := a.ahead
	if ah == nil || ah.s != s {
		return nil, nil, nil
	}
	<-ah.done
	ah.cancel()
	a.ahead = nil
	if ah.w != nil {
		a.buf, a.spare = a.spare, a.buf
	}
	return ah.h, ah.w, ah.err
}

// dropAhead forgets the first pass read ahead (it is read again when its
// shard is audited), to give its memory to the pass in test.
func (a *auditor) dropAhead() {
	a.waitAhead()
	if a.ahead != nil {
		a.ahead.w, a.ahead.err = nil, nil
	}
	if a.spare != nil {
		hugemem.Free(a.spare)
		a.spare = nil
	}
}

// window is pass p of shard s's filter, whose header is h, loaded into
// buf. Chunks that do not fit the header are a lie, or another filter's:
// one made again meanwhile, a *ChangedError then.
func (a *auditor) window(ctx context.Context, s int, h *rbloom.Header, p rbloom.Pass, buf []byte) (*rbloom.Window, error) {
	w, err := h.Window(p, buf)
	if err != nil {
		return nil, err
	}
	if err := a.load(ctx, s, h, p, w); err != nil {
		var de *DumpError
		if errors.As(err, &de) {
			if cerr := a.unchanged(ctx, s); cerr != nil {
				return nil, cerr
			}
		}
		return nil, err
	}
	return w, nil
}

// load reads pass p of shard s's dump into w: BF.SCANDUMP from the pass's
// first byte, a pipeline of as many chunks as plan.readAhead holds, their
// iterators computed from the header as the module computes them (a chunk
// runs to the end of its sub-filter or MaxChunk bytes, whichever is
// less), each answer checked by w before it is used. A pipeline that
// fails is asked again from where the pass got; a filter gone meanwhile
// is a *ChangedError, a dump that lies a *DumpError, neither retried.
func (a *auditor) load(ctx context.Context, s int, h *rbloom.Header, p rbloom.Pass, w *rbloom.Window) error {
	b := a.b
	key := b.keys[s]
	off := linkEnds(h)
	for !w.Done() {
		err := b.o.Retry(ctx, redisconn.Retryable, "reading "+key+" on "+b.o.Target, nil, func() error {
			its := chunkIters(off, uint64(w.Iter()-1), p.To, a.plan.readAhead)
			pipe := b.C.Pipeline()
			cmds := make([]*redis.Cmd, len(its))
			for i, it := range its {
				cmds[i] = pipe.Do(ctx, "BF.SCANDUMP", key, it)
			}
			_, err := pipe.Exec(ctx)
			switch {
			case isNotFound(err):
				return online.Permanent{Err: &ChangedError{Shard: b.spec.Router.Name(s), Key: key, Gone: true}}
			case isWrongType(err):
				return online.Permanent{Err: &ChangedError{Shard: b.spec.Router.Name(s), Key: key}}
			case err != nil:
				return err
			}
			for _, c := range cmds {
				it, data, err := scandump(c)
				if err == nil {
					err = w.Load(it, data)
				}
				if err != nil {
					return online.Permanent{Err: &DumpError{Shard: b.spec.Router.Name(s), Key: key, Err: err}}
				}
				a.rr.BytesRead += int64(len(data))
				if pr := b.o.Progress; pr != nil {
					pr.RawBytes.Add(int64(len(data)))
				}
			}
			return nil
		})
		if err != nil {
			var perm online.Permanent
			var re *redisconn.ReplyError
			switch {
			case errors.As(err, &perm):
				return perm.Err
			case ctx.Err() != nil:
				return err
			case errors.As(err, &re):
				return &DumpError{Shard: b.spec.Router.Name(s), Key: key, Err: err}
			}
			return fmt.Errorf("reading %s on %s failed (%s of the filters read; each read tried %d times): %w; rerun the audit when the server answers",
				key, b.o.Target, units.FormatBytes(a.rr.BytesRead), 1+b.o.Retries, err)
		}
	}
	return nil
}

// linkEnds are the offsets in a dump's data where each sub-filter ends.
func linkEnds(h *rbloom.Header) []uint64 {
	ends := make([]uint64, len(h.Links))
	var o uint64
	for i := range h.Links {
		o += h.Links[i].Bytes
		ends[i] = o
	}
	return ends
}

// chunkIters are the BF.SCANDUMP iterators of the chunks from byte pos of
// the dump's data up to byte to, as many as budget bytes hold (one at
// least, at most 64): iterator pos+1, the chunk running to the end of its
// sub-filter or MaxChunk bytes, whichever comes first.
func chunkIters(ends []uint64, pos, to uint64, budget int64) []int64 {
	var its []int64
	var bytes int64
	k := 0
	for pos < to && len(its) < 64 {
		for k < len(ends) && ends[k] <= pos {
			k++
		}
		if k == len(ends) {
			break
		}
		n := min(ends[k]-pos, rbloom.MaxChunk)
		if len(its) > 0 && bytes+int64(n) > budget {
			break
		}
		its = append(its, int64(pos)+1)
		bytes += int64(n)
		pos += n
	}
	return its
}

// What asking again for the keys of a shard not found in its dump costs,
// each way, measured against a server on loopback: BF.MEXISTS a key (the
// server's hashes and probes, its reply) against reading the filter's dump
// again (a byte) and testing its truth keys offline (a key: decoded,
// hashed, its bits probed). A shard flushed or emptied, whose keys are
// all missing, is read again; a few keys missing in a large filter are
// asked.
const (
	askNanos  = 750
	readNanos = 1
	testNanos = 100
)

// readAgainCheaper reports whether reading again a filter of dump bytes,
// to test its keys offline, beats asking its notFound keys one by one.
func readAgainCheaper(dump uint64, keys, notFound int64) bool {
	return float64(dump)*readNanos+float64(keys)*testNanos < float64(notFound)*askNanos
}

// recheck asks shard s again, with BF.MEXISTS in batches, for each of its
// keys want selects, and tells done what it answered.
func (a *auditor) recheck(ctx context.Context, s int, want func(j int) bool, done func(j int, rank uint64, held bool)) error {
	return a.recheckAll(ctx, []int{s}, want, done)
}

// recheckAll asks every shard of shards (one, or every shard for
// route=all) for the keys want selects, of the bucket they test: a key is
// held if one of them holds it.
func (a *auditor) recheckAll(ctx context.Context, shards []int, want func(j int) bool, done func(j int, rank uint64, held bool)) error {
	b := a.b
	type entry struct {
		j    int
		rank uint64
	}
	var items [][]byte // they alias arena
	var arena []byte
	var entries []entry
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		held := make([]bool, len(entries))
		asks := make([]mexistsAsk, len(shards))
		for i, s := range shards {
			asks[i] = mexistsAsk{key: b.keys[s], items: items}
		}
		err := b.o.Retry(ctx, redisconn.Retryable, "asking "+b.o.Target+" again for the keys not found", nil, func() error {
			answers, err := b.mexists(ctx, asks)
			if err != nil {
				return err
			}
			for _, v := range answers {
				for i, x := range v {
					held[i] = held[i] || x
				}
			}
			return nil
		})
		if err != nil {
			var perm online.Permanent
			if errors.As(err, &perm) {
				return perm.Err
			}
			return err
		}
		for i, e := range entries {
			done(e.j, e.rank, held[i])
		}
		items, entries, arena = items[:0], entries[:0], arena[:0]
		return nil
	}
	err := a.t.each(ctx, a.t.bucket(shards[0]), func(j int, rank uint64, item []byte) error {
		if !want(j) {
			return nil
		}
		n := len(arena)
		arena = append(arena, item...)
		items = append(items, arena[n:len(arena):len(arena)])
		entries = append(entries, entry{j, rank})
		if len(entries) == b.o.Batch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
