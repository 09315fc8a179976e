package redisbloom

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// truth is what the audit tests: each truth key's item, in the bucket of
// the shard the router sends it to (route=all: one bucket, which every
// shard is tested for), numbered by its rank in the index.
//
// Where the items come from: with item=fp and route=all the index alone
// (its fingerprints are the items, and no shard is chosen), read again for
// each pass. Otherwise from the key texts of the records the index was
// made of (Options.KeyTexts): each record whose fingerprint is in the
// index gives its key's item and shard, once (a repeat is skipped), kept
// in a spool; the index's fingerprints no record gave are not audited
// (uncovered).
type truth struct {
	x         *fpstore.Index
	spec      *Spec
	fromIndex bool
	covered   []uint64 // bit r: a record gave rank r's key (records only)
	count     []int64  // truth keys a bucket
	sp        *spool

	records, notInIndex, distinct int64
}

// buckets is the number of buckets: one a shard, or one for route=all.
func (t *truth) bucket(shard int) int {
	if t.spec.Router.All() {
		return 0
	}
	return shard
}

// isCovered reports whether rank r's key is audited.
func (t *truth) isCovered(r uint64) bool {
	return t.fromIndex || t.covered[r>>6]&(1<<(r&63)) != 0
}

// keys is the number of truth keys the audit tests in shard s.
func (t *truth) keys(s int) int64 { return t.count[t.bucket(s)] }

// each gives fn every entry of bucket k in order: its number in the
// bucket, its rank in the index and its item (valid until fn returns).
func (t *truth) each(ctx context.Context, k int, fn func(j int, rank uint64, item []byte) error) error {
	if t.fromIndex {
		var r uint64
		var item []byte
		return t.x.Scan(func(fps []fpstore.Fingerprint) error {
			for _, fp := range fps {
				item = rbloom.AppendFP(item[:0], fp.Hi, fp.Lo)
				if err := fn(int(r), r, item); err != nil {
					return err
				}
				r++
			}
			return ctx.Err()
		})
	}
	return t.sp.each(ctx, k, fn)
}

func (t *truth) close() {
	if t.sp != nil {
		t.sp.close()
	}
}

// newTruth reads what the audit tests (truth's comment says where from).
func newTruth(ctx context.Context, x *fpstore.Index, spec *Spec, o *online.Config, keyTexts func(context.Context, func([]fpstore.Fingerprint, [][]byte) error) error) (*truth, error) {
	t := &truth{x: x, spec: spec}
	buckets := spec.Router.Shards()
	if spec.Router.All() {
		buckets = 1
	}
	t.count = make([]int64, buckets)
	if !spec.NeedsKeys() {
		t.fromIndex = true
		t.count[0] = int64(x.Len())
		t.distinct = int64(x.Len())
		return t, nil
	}
	t.covered = make([]uint64, (x.Len()+63)/64)
	t.sp = newSpool(o.TmpDir, buckets, o.Plan.Spool)
	if err := t.fill(ctx, spec, keyTexts); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// fill reads the records' key texts and keeps each truth key's item in
// its shard's bucket, in three stages, each on its own goroutine, a batch
// in each at once: the records read (one core's work), a batch placed
// (placer: over the cores), a batch kept (one core's: a truth key is kept
// once, in the order the records give it).
func (t *truth) fill(ctx context.Context, spec *Spec, keyTexts func(context.Context, func([]fpstore.Fingerprint, [][]byte) error) error) error {
	const batches = 3 // one a stage
	free := make(chan *textBatch, batches)
	for range batches {
		free <- new(textBatch)
	}
	toPlace, toKeep := make(chan *textBatch, batches), make(chan *textBatch, batches)
	var placeErr, keepErr error // each read once its stage has stopped
	var failed atomic.Bool
	placed, kept := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(placed)
		defer close(toKeep)
		for tb := range toPlace {
			if placeErr == nil {
				if placeErr = tb.pl.place(t.x, spec, tb.fps, tb.keys); placeErr != nil {
					failed.Store(true)
				}
			}
			if placeErr != nil {
				free <- tb
				continue
			}
			toKeep <- tb
		}
	}()
	go func() {
		defer close(kept)
		for tb := range toKeep {
			if keepErr == nil {
				if keepErr = t.keep(tb); keepErr != nil {
					failed.Store(true)
				}
			}
			free <- tb
		}
	}()
	err := keyTexts(ctx, func(fps []fpstore.Fingerprint, keys [][]byte) error {
		tb := <-free
		if failed.Load() {
			free <- tb
			return errStageFailed
		}
		tb.copy(fps, keys)
		toPlace <- tb
		return ctx.Err()
	})
	close(toPlace)
	<-placed
	<-kept
	if err == nil || errors.Is(err, errStageFailed) {
		err = cmp.Or(placeErr, keepErr, err)
	}
	return err
}

// errStageFailed stops the records' reading when a later stage of fill
// failed; fill returns that stage's error instead.
var errStageFailed = errors.New("a stage of the truth's pass failed")

// textBatch is a copy of a batch of records' fingerprints and key texts:
// the reader's own are valid only until it is handed the next.
type textBatch struct {
	fps   []fpstore.Fingerprint
	keys  [][]byte
	arena []byte
	pl    placer // where each record's rank, shard and item are
}

func (tb *textBatch) copy(fps []fpstore.Fingerprint, keys [][]byte) {
	tb.fps = append(tb.fps[:0], fps...)
	tb.arena, tb.keys = tb.arena[:0], tb.keys[:0]
	for _, k := range keys {
		tb.arena = append(tb.arena, k...)
	}
	from := 0
	for _, k := range keys {
		tb.keys = append(tb.keys, tb.arena[from:from+len(k):from+len(k)])
		from += len(k)
	}
}

// keep keeps the items of a placed batch's truth keys not kept yet.
func (t *truth) keep(tb *textBatch) error {
	t.records += int64(len(tb.fps))
	for _, part := range tb.pl.parts {
		from := 0
		for _, e := range part.at {
			if e.shard < 0 {
				t.notInIndex++
				continue
			}
			item := part.items[from:e.to]
			from = int(e.to)
			r := e.rank
			if t.covered[r>>6]&(1<<(r&63)) != 0 {
				continue
			}
			t.covered[r>>6] |= 1 << (r & 63)
			t.distinct++
			if err := t.sp.add(int(e.shard), r, item); err != nil {
				return err
			}
			t.count[e.shard]++
		}
	}
	return nil
}

// placer finds, for a batch of records, each one's rank in the index, its
// shard and its item, over the machine's cores: the index's lookups and
// the router's MD5 are most of the records pass. Which records are new
// is left to the caller, in order.
type placer struct{ parts []placedPart }

type placedPart struct {
	at    []placed
	items []byte // the items, one after the other
	ranks []uint64
	found []bool
	err   error
}

// placed is a record's rank and shard (-1: not in the index), and where
// its item ends in items (16 bytes: a batch holds 1 MiB of records).
type placed struct {
	rank  uint64
	to    uint32
	shard int32
}

// minPlaced is the least share of a batch worth a goroutine.
const minPlaced = 1024

func (pl *placer) place(x *fpstore.Index, spec *Spec, fps []fpstore.Fingerprint, keys [][]byte) error {
	n := max(1, min(runtime.GOMAXPROCS(0), len(fps)/minPlaced))
	if cap(pl.parts) < n {
		pl.parts = make([]placedPart, n)
	}
	pl.parts = pl.parts[:n]
	share := func(p int) {
		lo, hi := len(fps)*p/n, len(fps)*(p+1)/n
		part := &pl.parts[p]
		part.at, part.items, part.err = part.at[:0], part.items[:0], nil
		part.ranks = slices.Grow(part.ranks[:0], hi-lo)[:hi-lo]
		part.found = slices.Grow(part.found[:0], hi-lo)[:hi-lo]
		if part.err = x.RankBatch(fps[lo:hi], part.ranks, part.found); part.err != nil {
			return
		}
		for i := lo; i < hi; i++ {
			e := placed{rank: part.ranks[i-lo], shard: -1}
			if part.found[i-lo] {
				e.shard = 0
				if !spec.Router.All() {
					e.shard = int32(spec.Router.Shard(keys[i]))
				}
				if spec.Item == rbloom.ItemFP {
					part.items = rbloom.AppendFP(part.items, fps[i].Hi, fps[i].Lo)
				} else {
					part.items = spec.Item.AppendKeyItem(part.items, keys[i])
				}
			}
			e.to = uint32(len(part.items))
			part.at = append(part.at, e)
		}
	}
	var wg sync.WaitGroup
	for p := 1; p < n; p++ {
		wg.Go(func() { share(p) })
	}
	share(0)
	wg.Wait()
	for p := range pl.parts {
		if err := pl.parts[p].err; err != nil {
			return err
		}
	}
	return nil
}

// spool keeps entries (a rank and an item) by bucket: each bucket's in a
// buffer of its own, written to a temporary file in blocks as it fills,
// so that a bucket is read back whole without the others.
type spool struct {
	dir     string
	f       *os.File
	off     int64
	pending [][]byte
	blocks  [][]block
	size    int // a block
}

type block struct{ off, n int64 }

// newSpool keeps buckets within about bufs bytes of buffers (the plan's
// Spool; a block a bucket, 4 KiB to 1 MiB).
func newSpool(dir string, buckets int, bufs int64) *spool {
	size := int(min(max(bufs/int64(buckets), 4<<10), 1<<20))
	return &spool{dir: dir, pending: make([][]byte, buckets), blocks: make([][]block, buckets), size: size}
}

func (sp *spool) add(k int, rank uint64, item []byte) error {
	p := binary.AppendUvarint(sp.pending[k], rank)
	p = binary.AppendUvarint(p, uint64(len(item)))
	p = append(p, item...)
	sp.pending[k] = p
	if len(p) >= sp.size {
		return sp.flush(k)
	}
	return nil
}

func (sp *spool) flush(k int) error {
	if sp.f == nil {
		f, err := os.CreateTemp(sp.dir, "fpdedup-redisbloom-*.spool")
		if err != nil {
			return &online.FileError{Op: "make a temp file in", File: online.TempDir, Err: err}
		}
		os.Remove(f.Name()) // nothing but this run reads it
		sp.f = f
	}
	p := sp.pending[k]
	if _, err := sp.f.WriteAt(p, sp.off); err != nil {
		return &online.FileError{Op: "write to", File: online.TempDir, Err: err}
	}
	sp.blocks[k] = append(sp.blocks[k], block{sp.off, int64(len(p))})
	sp.off += int64(len(p))
	sp.pending[k] = p[:0]
	return nil
}

// each decodes bucket k's entries, in the order they were added.
func (sp *spool) each(ctx context.Context, k int, fn func(j int, rank uint64, item []byte) error) error {
	j := 0
	var buf []byte
	for _, bl := range sp.blocks[k] {
		if int64(cap(buf)) < bl.n {
			buf = make([]byte, bl.n)
		}
		buf = buf[:bl.n]
		if _, err := sp.f.ReadAt(buf, bl.off); err != nil && !errors.Is(err, io.EOF) {
			return &online.FileError{Op: "read", File: online.TempDir, Err: err}
		}
		var err error
		if j, err = decode(buf, j, fn); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	_, err := decode(sp.pending[k], j, fn)
	return err
}

func decode(p []byte, j int, fn func(j int, rank uint64, item []byte) error) (int, error) {
	for len(p) > 0 {
		r, n := binary.Uvarint(p)
		l, m := binary.Uvarint(p[max(n, 0):])
		if n <= 0 || m <= 0 || uint64(len(p)-n-m) < l {
			return j, fmt.Errorf("the audit's spool is damaged at entry %d", j)
		}
		p = p[n+m:]
		if err := fn(j, r, p[:l]); err != nil {
			return j, err
		}
		p = p[l:]
		j++
	}
	return j, nil
}

func (sp *spool) close() {
	if sp.f != nil {
		sp.f.Close()
		sp.f = nil
	}
}
