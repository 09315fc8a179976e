package bitmapbloom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// Written through a Redis Cluster, --apply checks that no slot changed
// hands meanwhile (online.Placed).
var _ online.Placed = (*Source)(nil)

// Source is the online L2 tier: plain Redis strings, one a shard (or
// segment of one), laid out as l2bloom says. It is audited whole (Audit:
// every shard read with GETRANGE, every truth key's bits tested in
// memory), probed bit by bit (GETBIT), and written with SETBIT, which only
// ever sets a bit: idempotent, and never clears what the online side set.
type Source struct {
	*redisconn.Client
	o      *online.Config
	layout l2bloom.Layout
	loc    l2bloom.Locator
	keys   l2bloom.Template
	chunk  int64    // GETRANGE bytes a command
	depth  int      // GETRANGE commands a pipeline
	names  []string // the keys of the shards' segments, shard-major (up to 2^16 of them)
	// rebuild marks the shards --rebuild-shard replaces: they are not
	// audited (their keys are all held once the rebuild is done), and
	// their live keys may be missing or short, as a flushed shard's are.
	rebuild []bool
	// targetFPR is the rate the audit sizes the L2 for (0: DefaultTargetFPR).
	targetFPR float64
	// noBitfieldRO: the server does not know BITFIELD_RO (Probe).
	noBitfieldRO atomic.Bool
	// token is this run's, which a rebuild's swap leaves in its mark
	// (swapScript).
	token string
}

// Options say what a run does with the bloom besides auditing it.
type Options struct {
	// Rebuild lists the shards to rebuild (Rebuild) instead of auditing
	// them: they may be missing or short.
	Rebuild []uint64
	// TargetFPR is the false-positive rate the audit sizes the L2 for
	// (0: DefaultTargetFPR).
	TargetFPR float64
}

// rebuilds reports whether shard s is being rebuilt.
func (b *Source) rebuilds(s uint64) bool { return b.rebuild != nil && b.rebuild[s] }

// bloomChunk is the bytes one GETRANGE asks for: under the reply guard's
// string bound (maxString), a divisor of a segment so that no chunk
// straddles two.
const bloomChunk = 512 << 10

// Open opens the bloom spec names on the server srv and checks its shard
// keys: each a string of the layout's length (but those to rebuild, which
// may be missing or short).
func Open(ctx context.Context, srv redisconn.Server, spec Spec, o *online.Config, opt Options) (*Source, error) {
	r, err := redisconn.Open(ctx, srv, o)
	if err != nil {
		return nil, err
	}
	b := &Source{Client: r, o: o, layout: spec.Layout, loc: spec.Locator(), keys: spec.Keys,
		chunk: min(bloomChunk, o.Plan.MaxReply), depth: 8, targetFPR: opt.TargetFPR}
	if len(opt.Rebuild) > 0 {
		b.rebuild = make([]bool, spec.Shards)
		for _, s := range opt.Rebuild {
			b.rebuild[s] = true
		}
	}
	if n := spec.Shards * spec.Segments(); n <= 1<<16 {
		for s := range spec.Shards {
			for seg := range spec.Segments() {
				b.names = append(b.names, spec.Key(spec.Keys, s, seg))
			}
		}
	}
	if err := b.checkShards(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", o.Target, err)
	}
	return b, nil
}

// BloomKeyError is a shard key that is not what the layout says: missing,
// of another type, or of another length.
type BloomKeyError struct {
	Key     string
	Shard   uint64
	Type    string // TYPE's answer
	Len     int64  // STRLEN, for a string
	WantLen int64
}

func (e *BloomKeyError) Error() string {
	switch {
	case e.Type == "none":
		return fmt.Sprintf("bloom shard %d: key %q does not exist (a shard is a string of its full length, made with SETBIT KEY %d 0, before it is audited)", e.Shard, e.Key, e.WantLen*8-1)
	case e.Type != "string":
		return fmt.Sprintf("bloom shard %d: key %q holds a %s, not a bitmap string", e.Shard, e.Key, e.Type)
	}
	return fmt.Sprintf("bloom shard %d: key %q is %d bytes, the layout's shard is %d: is bits= the online side's?", e.Shard, e.Key, e.Len, e.WantLen)
}

// checkShards asks TYPE and STRLEN of every shard key, in pipelines. A
// shard being rebuilt may be missing or shorter than its layout (the
// online side's SETBITs after a flush make it only as long as the highest
// bit they set); never longer, nor of another type.
func (b *Source) checkShards(ctx context.Context) error {
	type probe struct {
		key   string
		shard uint64
		want  int64
		typ   *redis.StatusCmd
		n     *redis.IntCmd
	}
	const batch = 512
	var todo []probe
	flush := func() error {
		if len(todo) == 0 {
			return nil
		}
		err := b.o.Retry(ctx, redisconn.Retryable, "checking the bloom's shard keys on "+b.o.Target, nil, func() error {
			pipe := b.C.Pipeline()
			for i := range todo {
				todo[i].typ = pipe.Type(ctx, todo[i].key)
				todo[i].n = pipe.StrLen(ctx, todo[i].key)
			}
			_, err := pipe.Exec(ctx)
			for i := range todo {
				// STRLEN of another type is a WRONGTYPE error: TYPE says which.
				if e := todo[i].typ.Err(); e != nil {
					return e
				}
				if todo[i].typ.Val() == "string" && todo[i].n.Err() != nil {
					return todo[i].n.Err()
				}
			}
			if err != nil && !isWrongType(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range todo {
			typ, n := p.typ.Val(), p.n.Val()
			if b.rebuilds(p.shard) && (typ == "none" || typ == "string" && n <= p.want) {
				continue
			}
			if typ != "string" || n != p.want {
				return &BloomKeyError{Key: p.key, Shard: p.shard, Type: typ, Len: n, WantLen: p.want}
			}
		}
		todo = todo[:0]
		return nil
	}
	for s := range b.layout.Shards {
		for seg := range b.layout.Segments() {
			todo = append(todo, probe{key: b.layout.Key(b.keys, s, seg), shard: s, want: b.layout.SegmentBytes(seg)})
			if len(todo) == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re.Error()) >= 9 && re.Error()[:9] == "WRONGTYPE"
}

// Sorted: a bloom is never listed (audit reads it instead).
func (b *Source) Sorted() bool { return true }

// Read is not how a bloom is compared: it holds bits, not keys.
func (b *Source) Read(context.Context, *online.ReadStats, func([]fpstore.Fingerprint) error) error {
	return errors.New("a bloom holds bits, not keys: it is audited, not listed")
}

// Wide: a bloom is addressed by the index's own fingerprints.
func (b *Source) Wide() (wide, known bool) { return false, true }

// bit is where bit off of shard s is: its key and the offset in it.
func (b *Source) bit(s, off uint64) (string, int64) {
	seg := off / l2bloom.SegmentBits
	if i := s*b.layout.Segments() + seg; i < uint64(len(b.names)) {
		return b.names[i], int64(off % l2bloom.SegmentBits)
	}
	return b.layout.Key(b.keys, s, seg), int64(off % l2bloom.SegmentBits)
}

// eachBit calls fn with the key and the offset in it of each of fp's K
// bits (pos: room for K positions).
func (b *Source) eachBit(fp fpstore.Fingerprint, pos []uint64, fn func(key string, off int64)) {
	s := b.loc.Shard(fp.Hi)
	b.loc.Bits(fp.Hi, fp.Lo, pos)
	for _, p := range pos {
		fn(b.bit(s, p))
	}
}

// Probe asks for each fingerprint's K bits: present when all are set. The
// bits of a batch are asked a key (a shard's segment) at a time, with one
// BITFIELD_RO GET u1 … each, pipelined: a GETBIT a bit cost the client
// more than the write that set it (1M keys, k=3, 16 shards: 4.0 s against
// the SETBITs' 2.4 s). A server without BITFIELD_RO (Redis before 6.2) is
// asked GETBIT a bit.
func (b *Source) Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error {
	k := b.layout.K
	pos := make([]uint64, k)
	if b.noBitfieldRO.Load() {
		pipe := b.C.Pipeline()
		cmds := make([]*redis.IntCmd, 0, len(fps)*k)
		for _, fp := range fps {
			b.eachBit(fp, pos, func(key string, off int64) { cmds = append(cmds, pipe.GetBit(ctx, key, off)) })
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for i := range fps {
			present[i] = true
			for _, c := range cmds[i*k : (i+1)*k] {
				present[i] = present[i] && c.Val() == 1
			}
		}
		return nil
	}
	type keyBits struct {
		args []any // "u1", offset, …
		bits []int // the index (fingerprint·K + j) of each
		cmd  *redis.IntSliceCmd
	}
	byKey := map[string]*keyBits{}
	var order []*keyBits
	for i, fp := range fps {
		j := 0
		b.eachBit(fp, pos, func(key string, off int64) {
			kb := byKey[key]
			if kb == nil {
				kb = &keyBits{}
				byKey[key] = kb
				order = append(order, kb)
			}
			kb.args = append(kb.args, "u1", off)
			kb.bits = append(kb.bits, i*k+j)
			j++
		})
	}
	pipe := b.C.Pipeline()
	for key, kb := range byKey {
		kb.cmd = pipe.BitFieldRO(ctx, key, kb.args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if strings.Contains(err.Error(), "unknown command") {
			b.noBitfieldRO.Store(true)
			return b.Probe(ctx, fps, present)
		}
		return err
	}
	set := make([]bool, len(fps)*k)
	for _, kb := range order {
		v := kb.cmd.Val()
		if len(v) != len(kb.bits) {
			return fmt.Errorf("BITFIELD_RO answered %d of %d bits", len(v), len(kb.bits))
		}
		for n, at := range kb.bits {
			set[at] = v[n] == 1
		}
	}
	for i := range fps {
		present[i] = !slices.Contains(set[i*k:(i+1)*k], false)
	}
	return nil
}

// Held asks GETBIT of each item's K bits (Probe).
func (b *Source) Held(ctx context.Context, items []online.Item, present []bool) error {
	fps := make([]fpstore.Fingerprint, len(items))
	for i := range items {
		fps[i] = items[i].FP
	}
	return b.Probe(ctx, fps, present)
}

// Write sets each item's K bits with SETBIT, in one pipeline. Setting a
// set bit changes nothing, so a retried batch is harmless. To one server
// the commands are written as RESP by hand (redisconn.Pool): through go-redis's
// pipeline, building and parsing its commands took most of --apply's CPU
// and it wrote 0.64M SETBIT/s where redis-benchmark writes several times
// that (bench/l2bloom.sh); a Cluster needs go-redis's routing by slot.
func (b *Source) Write(ctx context.Context, items []online.Item) error {
	pos := make([]uint64, b.layout.K)
	if b.CC == nil {
		buf := make([]byte, 0, len(items)*len(pos)*48)
		var num [20]byte
		for i := range items {
			b.eachBit(items[i].FP, pos, func(key string, off int64) {
				buf = append(buf, "*4\r\n$6\r\nSETBIT\r\n"...)
				buf = redisconn.AppendBulk(buf, key)
				buf = redisconn.AppendBulk(buf, strconv.AppendInt(num[:0], off, 10))
				buf = append(buf, "$1\r\n1\r\n"...)
			})
		}
		return redisconn.Refusal(b.Raw.Pipeline(ctx, buf, len(items)*len(pos)))
	}
	pipe := b.C.Pipeline()
	for i := range items {
		b.eachBit(items[i].FP, pos, func(key string, off int64) { pipe.SetBit(ctx, key, off, 1) })
	}
	cmds, err := pipe.Exec(ctx)
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil {
			return redisconn.Refusal(cerr)
		}
	}
	return redisconn.Refusal(err)
}

// Plan prints the SETBIT commands Write would send.
func (b *Source) Plan(w io.Writer, items []online.Item) error {
	pos := make([]uint64, b.layout.K)
	var line []byte
	for i := range items {
		b.eachBit(items[i].FP, pos, func(key string, off int64) {
			line = append(line, "SETBIT "...)
			line = append(line, key...)
			line = append(line, ' ')
			line = strconv.AppendInt(line, off, 10)
			line = append(line, " 1\n"...)
		})
	}
	_, err := w.Write(line)
	return err
}

// DefaultTargetFPR is the sizing's rate when Options.TargetFPR is 0.
const DefaultTargetFPR = 0.01

// Audit reads the whole bloom and tests every truth key's bits: one read
// of the bloom, in passes that each hold as much of it as the memory
// budget allows beside a bit a truth key (held or not), and one read of
// the index a pass. The keys not held go to missing, in order.
func (b *Source) Audit(ctx context.Context, x *fpstore.Index, st *online.ReadStats, held *int64, missing func(fpstore.Fingerprint) error, rep *report.Report) error {
	rep.Mode = "bloom-audit"
	l := b.layout
	n := x.Len()
	br := &report.BloomReport{Layout: l.String(), Scheme: l2bloom.Scheme, Keys: string(b.keys), Shards: make([]report.BloomShard, l.Shards)}
	rep.Bloom = br
	for s := range br.Shards {
		br.Shards[s] = report.BloomShard{Shard: uint64(s), Key: l.Key(b.keys, uint64(s), 0), Rebuild: b.rebuilds(uint64(s))}
	}
	unset := make([]uint64, (n+63)/64) // bit i: truth key i has a bit found unset

	// A pass's buffer: what the budget leaves beside the bitset, in whole
	// chunks; at least one.
	free := b.o.Plan.BloomAuditPass(int64(len(unset)) * 8)
	passBytes := max(b.chunk, free/b.chunk*b.chunk)
	passBytes = min(passBytes, ceilTo(l.ShardBytes(), b.chunk)*int64(l.Shards))
	mem, err := hugemem.Alloc(int(passBytes))
	if err != nil {
		return fmt.Errorf("cannot allocate the audit's buffer (%d bytes): %w", passBytes, err)
	}
	defer hugemem.Free(mem)

	spans := make([]bloomSpan, l.Shards) // the part of each shard in this pass
	shardBytes := l.ShardBytes()
	var s uint64
	var at int64 // the next byte of shard s to read
	for {
		for s < l.Shards && at == 0 && b.rebuilds(s) {
			s++
		}
		if s == l.Shards {
			break
		}
		// Plan the pass: shards from s, each as far as the buffer goes.
		clear(spans)
		used := int64(0)
		first := s
		for s < l.Shards && used < passBytes {
			if at == 0 && b.rebuilds(s) {
				s++
				continue
			}
			take := min(shardBytes-at, passBytes-used)
			spans[s] = bloomSpan{on: true, lo: uint64(at) * 8, hi: min(uint64(at+take)*8, l.Bits), buf: mem[used : used+take]}
			used += take
			at += take
			if at == shardBytes {
				s, at = s+1, 0
			}
		}
		last := s
		if at > 0 {
			last = s + 1
		}
		if err := b.readSpans(ctx, spans[first:last], first, br); err != nil {
			return err
		}
		for i := first; i < last; i++ {
			br.Shards[i].SetBits += l2bloom.Count(spans[i].buf, spans[i].hi-spans[i].lo)
		}
		if err := b.testPass(ctx, x, st, spans, unset, br.Passes == 0, br); err != nil {
			return err
		}
		br.Passes++
	}

	// The keys not held, in order, to missing.
	var i uint64
	err = x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			if unset[i>>6]&(1<<(i&63)) != 0 {
				br.Shards[b.loc.Shard(fp.Hi)].Missing++
				if err := missing(fp); err != nil {
					return err
				}
			} else {
				*held++
			}
			i++
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	b.summarise(br, b.targetFPR, n)
	return nil
}

func ceilTo(n, m int64) int64 { return (n + m - 1) / m * m }

// bloomSpan is the part of a shard a pass holds: bits [lo, hi), from
// byte lo/8 of the shard in buf.
type bloomSpan struct {
	on     bool
	lo, hi uint64
	buf    []byte
}

// readSpans reads the spans of shards first… with pipelined GETRANGE
// chunks, each retried as a whole pipeline (a read changes nothing).
func (b *Source) readSpans(ctx context.Context, spans []bloomSpan, first uint64, br *report.BloomReport) error {
	type chunk struct {
		key      string
		from, to int64 // in the key, inclusive
		dst      []byte
	}
	var todo []chunk
	for i := range spans {
		sp := &spans[i]
		if !sp.on {
			continue
		}
		s := first + uint64(i)
		const segBytes = l2bloom.SegmentBits / 8
		for off := int64(0); off < int64(len(sp.buf)); {
			byteInShard := int64(sp.lo/8) + off
			seg, inSeg := uint64(byteInShard/segBytes), byteInShard%segBytes
			size := min(b.chunk, int64(len(sp.buf))-off, segBytes-inSeg) // no chunk straddles two segments
			todo = append(todo, chunk{key: b.layout.Key(b.keys, s, seg), from: inSeg, to: inSeg + size - 1, dst: sp.buf[off : off+size]})
			off += size
		}
	}
	for len(todo) > 0 {
		batch := todo[:min(len(todo), b.depth)]
		todo = todo[len(batch):]
		err := b.o.Retry(ctx, redisconn.Retryable, "reading the bloom on "+b.o.Target, nil, func() error {
			pipe := b.C.Pipeline()
			cmds := make([]*redis.StringCmd, len(batch))
			for i, ch := range batch {
				cmds[i] = pipe.GetRange(ctx, ch.key, ch.from, ch.to)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
			for i, ch := range batch {
				v := cmds[i].Val()
				if int64(len(v)) != ch.to-ch.from+1 {
					return online.Permanent{Err: fmt.Errorf("bloom key %q: GETRANGE %d %d gave %d bytes: the key shrank or was replaced during the audit", ch.key, ch.from, ch.to, len(v))}
				}
				copy(ch.dst, v)
			}
			return nil
		})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("reading the bloom on %s failed at %s (%s of it read; each read tried %d times): %w; rerun the audit when the server answers",
				b.o.Target, batch[0].key, units.FormatBytes(br.BytesRead), 1+b.o.Retries, err)
		}
		for _, ch := range batch {
			br.BytesRead += int64(len(ch.dst))
		}
		if c := b.o.Progress; c != nil {
			c.RawBytes.Store(br.BytesRead)
		}
	}
	return nil
}

// testPass reads the index once and marks in unset each truth key with a
// bit inside this pass's spans that is not set. The first pass also counts
// each shard's truth keys.
func (b *Source) testPass(ctx context.Context, x *fpstore.Index, st *online.ReadStats, spans []bloomSpan, unset []uint64, count bool, br *report.BloomReport) error {
	pos := make([]uint64, b.layout.K)
	var i uint64
	return x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			s := b.loc.Shard(fp.Hi)
			if count {
				br.Shards[s].Keys++
			}
			if sp := &spans[s]; sp.on && unset[i>>6]&(1<<(i&63)) == 0 {
				b.loc.Bits(fp.Hi, fp.Lo, pos)
				for _, p := range pos {
					if p >= sp.lo && p < sp.hi && !l2bloom.IsSet(sp.buf, p-sp.lo) {
						unset[i>>6] |= 1 << (i & 63)
						break
					}
				}
			}
			i++
		}
		if b.o.Progress != nil {
			b.o.Progress.Records.Add(int64(len(fps)))
		}
		if err := st.Wait(ctx, len(fps)); err != nil {
			return err
		}
		return ctx.Err()
	})
}

// summarise fills the rates and the sizing.
func (b *Source) summarise(br *report.BloomReport, target float64, n uint64) {
	l := b.layout
	if target <= 0 {
		target = DefaultTargetFPR
	}
	var now, formula float64
	br.Missing = 0
	for i := range br.Shards {
		sh := &br.Shards[i]
		sh.Fill = float64(sh.SetBits) / float64(l.Bits)
		sh.FPRNow = pow(sh.Fill, l.K)
		sh.FPRFormula = l2bloom.Formula(float64(sh.Keys), float64(l.Bits), l.K)
		now += sh.FPRNow
		formula += sh.FPRFormula
		br.Missing += sh.Missing
	}
	br.Held = int64(n) - br.Missing
	br.FPRNow = now / float64(l.Shards)
	br.FPRFormula = formula / float64(l.Shards)
	need := l2bloom.BitsFor(n, l.Shards, l.K, target)
	br.Sizing = report.Sizing{TargetFPR: target, BitsNeeded: need, BytesNeeded: int64((need+7)/8) * int64(l.Shards),
		BitsLive: l.Bits, BytesLive: l.ShardBytes() * int64(l.Shards),
		LiveFPRTruth: l2bloom.Formula(float64(n)/float64(l.Shards), float64(l.Bits), l.K)}
}

func pow(x float64, k int) float64 {
	r := 1.0
	for range k {
		r *= x
	}
	return r
}

// Shards is the layout's shard count.
func (b *Source) Shards() uint64 { return b.layout.Shards }

// ShardOf is the shard that holds the item's bits.
func (b *Source) ShardOf(it online.Item) uint64 { return b.loc.Shard(it.FP.Hi) }

// ReadBackShards reads back whole the shards written (touched): each must
// be its layout's length and hold at least the bits the audit read before
// (rep.Bloom), since --apply only sets bits.
func (b *Source) ReadBackShards(ctx context.Context, touched []bool, rep *report.Report) error {
	rb := rep.ReadBack
	for s, t := range touched {
		if !t {
			continue
		}
		sh := report.ShardReadBack{Shard: uint64(s), Key: b.layout.Key(b.keys, uint64(s), 0), WantBytes: b.layout.ShardBytes(), WantFrom: "audit"}
		if br := rep.Bloom; br != nil {
			sh.WantBits = br.Shards[s].SetBits
		}
		rb.Shards = append(rb.Shards, sh)
	}
	return b.readBack(ctx, rb)
}

// readBack reads each shard's type, length and set bits (TYPE, STRLEN and
// BITCOUNT of each segment, pipelined, retried: reads change nothing) and
// marks the shards that fall short of what they must hold. rb.Short counts
// them.
func (b *Source) readBack(ctx context.Context, rb *report.ReadBack) error {
	type probe struct {
		sh   *report.ShardReadBack
		key  string
		typ  *redis.StatusCmd
		n    *redis.IntCmd
		bits *redis.IntCmd
	}
	const batch = 256
	var todo []probe
	flush := func() error {
		if len(todo) == 0 {
			return nil
		}
		err := b.o.Retry(ctx, redisconn.Retryable, "reading the bloom back on "+b.o.Target, nil, func() error {
			pipe := b.C.Pipeline()
			for i := range todo {
				todo[i].typ = pipe.Type(ctx, todo[i].key)
				todo[i].n = pipe.StrLen(ctx, todo[i].key)
				todo[i].bits = pipe.BitCount(ctx, todo[i].key, nil)
			}
			_, err := pipe.Exec(ctx)
			for _, p := range todo {
				if e := p.typ.Err(); e != nil {
					return e
				}
			}
			if err != nil && !isWrongType(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range todo {
			switch typ := p.typ.Val(); {
			case typ == "string":
				p.sh.Bytes += p.n.Val()
				p.sh.Bits += p.bits.Val()
			case p.sh.Type == "string":
				p.sh.Type = typ // a segment missing, or of another type
			}
		}
		todo = todo[:0]
		return nil
	}
	for i := range rb.Shards {
		sh := &rb.Shards[i]
		sh.Type, sh.Bytes, sh.Bits = "string", 0, 0
		for seg := range b.layout.Segments() {
			todo = append(todo, probe{sh: sh, key: b.layout.Key(b.keys, sh.Shard, seg)})
			if len(todo) == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	rb.Short = 0
	for i := range rb.Shards {
		sh := &rb.Shards[i]
		sh.Short = sh.Type != "string" || sh.Bytes != sh.WantBytes || sh.Bits < sh.WantBits
		if sh.Short {
			rb.Short++
		}
	}
	return nil
}
