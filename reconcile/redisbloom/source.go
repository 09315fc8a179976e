package redisbloom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// Written through a Redis Cluster, --apply checks that no slot changed
// hands meanwhile (online.Placed).
var _ online.Placed = (*Source)(nil)

// Source is the L2 tier as RedisBloom filters, one a shard. It is audited
// whole (Audit: each filter's dump read with BF.SCANDUMP, every truth
// key tested offline as BF.EXISTS tests it), written with BF.INSERT …
// NOCREATE ITEMS (BF.MADD that never makes a filter), and read back with
// BF.MEXISTS and the filters' headers.
type Source struct {
	*redisconn.Client
	o    *online.Config
	spec Spec
	opt  Options
	keys []string // each shard's filter's key
	// heads are the filters' headers as Open read them; nil for a filter
	// missing that is to be rebuilt.
	heads   []*rbloom.Header
	rebuild []bool
	// truth is what the audit tested, kept for the rebuild; read, the
	// headers it read (nil for a shard it did not).
	truth *truth
	read  []*rbloom.Header
	// readWhole marks the shards read back whole after --apply (HeldWhole),
	// readBackBytes the bytes of their dumps.
	readWhole      []bool
	readBackBytes  int64
	readBackPasses int
	// missed is the audit's keys not held, bit r for rank r; keyIsItem:
	// the items to write carry the filter's item, not a key text
	// (MissingItems).
	missed    []uint64
	keyIsItem bool
	rr        *report.RedisBloomReport // the audit's
}

// Options say what a run does with the filters besides auditing them.
type Options struct {
	// Rebuild lists the shards (the router's numbers) to rebuild instead
	// of auditing them: their filters may be missing.
	Rebuild []int
	// TargetFPR is the false-positive rate the audit sizes each shard for
	// (0: its own BF.RESERVE error rate).
	TargetFPR float64
	// Capacity and Error are BF.RESERVE's for the rebuilt filters (0: the
	// live filter's own).
	Capacity uint64
	Error    float64
	// KeyTexts reads the key texts the index was made of (the records),
	// giving fn each batch with its fingerprints (the index's hash):
	// what the audit needs when the spec NeedsKeys. nil: no records.
	KeyTexts func(ctx context.Context, fn func(fps []fpstore.Fingerprint, keys [][]byte) error) error
}

// Open opens the filters spec names on the server or Cluster srv and
// checks each shard's key: a RedisBloom filter whose header the module
// would load (but those to rebuild, which may be missing).
func Open(ctx context.Context, srv redisconn.Server, spec Spec, o *online.Config, opt Options) (*Source, error) {
	if spec.NeedsKeys() && opt.KeyTexts == nil {
		return nil, errors.New("BUG: a RedisBloom audit that needs key texts without them")
	}
	r, err := redisconn.OpenBounded(ctx, srv, o, redisconn.Bounds{Bulk: rbloom.MaxChunk})
	if err != nil {
		return nil, err
	}
	n := spec.Router.Shards()
	b := &Source{Client: r, o: o, spec: spec, opt: opt, keys: make([]string, n), heads: make([]*rbloom.Header, n), rebuild: make([]bool, n)}
	for s := range n {
		b.keys[s] = spec.Key(s)
	}
	for _, s := range opt.Rebuild {
		b.rebuild[s] = true
	}
	if err := b.checkFilters(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", o.Target, err)
	}
	return b, nil
}

// headerBudget is what one filter's header may cost to parse: its
// sub-filters' bookkeeping, a share of the memory budget.
func (b *Source) headerBudget() int64 {
	return b.o.Plan.FilterHeader(len(b.keys))
}

// checkFilters asks TYPE and the header (BF.SCANDUMP key 0) of every
// shard's key, in pipelines, and keeps the headers.
func (b *Source) checkFilters(ctx context.Context) error {
	const batch = 64
	for from := 0; from < len(b.keys); from += batch {
		to := min(from+batch, len(b.keys))
		typs := make([]*redis.StatusCmd, to-from)
		dumps := make([]*redis.Cmd, to-from)
		err := b.o.Retry(ctx, redisconn.Retryable, "checking the RedisBloom filters on "+b.o.Target, nil, func() error {
			pipe := b.C.Pipeline()
			for s := from; s < to; s++ {
				typs[s-from] = pipe.Type(ctx, b.keys[s])
				dumps[s-from] = pipe.Do(ctx, "BF.SCANDUMP", b.keys[s], 0)
			}
			_, err := pipe.Exec(ctx)
			for _, c := range typs {
				if c.Err() != nil {
					return c.Err()
				}
			}
			if err != nil && !isAnswer(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		for s := from; s < to; s++ {
			typ := typs[s-from].Val()
			switch {
			case typ == "none" && b.rebuild[s]:
				continue
			case typ != ModuleType:
				return &FilterKeyError{Shard: b.spec.Router.Name(s), Key: b.keys[s], Type: typ}
			}
			h, _, err := b.parseHeader(s, dumps[s-from])
			var fk *FilterKeyError
			if errors.As(err, &fk) && fk.Err != nil && b.rebuild[s] {
				continue // a header no filter has: rebuilt all the same
			}
			if err != nil {
				return err
			}
			b.heads[s] = h
		}
	}
	return nil
}

// isAnswer reports whether err is a server's answer to one command of a
// pipeline (WRONGTYPE, ERR not found), which the caller reads in that
// command, not a failure of the pipeline.
func isAnswer(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !redisconn.Retryable(err) || isNotFound(err)
}

// isNotFound: the module's answer for a filter that does not exist.
func isNotFound(err error) bool { return err != nil && strings.Contains(err.Error(), "ERR not found") }

// parseHeader reads the answer to BF.SCANDUMP key 0 (iterator 1 and the
// header) as shard s's header; the header's bytes come with a
// *FilterKeyError of a header that does not parse.
func (b *Source) parseHeader(s int, c *redis.Cmd) (*rbloom.Header, []byte, error) {
	it, data, err := scandump(c)
	switch {
	case isNotFound(err):
		return nil, nil, &FilterKeyError{Shard: b.spec.Router.Name(s), Key: b.keys[s], Type: "none"}
	case err != nil:
		return nil, nil, err
	case it != 1:
		return nil, nil, &FilterKeyError{Shard: b.spec.Router.Name(s), Key: b.keys[s], Type: ModuleType,
			Err: fmt.Errorf("%w: BF.SCANDUMP 0 answered iterator %d, not 1", rbloom.ErrBadHeader, it)}
	}
	h, err := rbloom.ParseHeader(data, b.headerBudget())
	if err != nil {
		return nil, data, &FilterKeyError{Shard: b.spec.Router.Name(s), Key: b.keys[s], Type: ModuleType, Err: err}
	}
	return h, data, nil
}

// scandump reads a BF.SCANDUMP answer: the next iterator and the data.
// The data aliases the reply's string, which nothing else holds.
func scandump(c *redis.Cmd) (int64, []byte, error) {
	v, err := c.Slice()
	if err != nil {
		return 0, nil, err
	}
	if len(v) != 2 {
		return 0, nil, fmt.Errorf("%w: BF.SCANDUMP answered %d values, not 2", rbloom.ErrBadDump, len(v))
	}
	it, ok := v[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("%w: BF.SCANDUMP answered an iterator of type %T", rbloom.ErrBadDump, v[0])
	}
	var data []byte
	switch d := v[1].(type) {
	case string:
		data = unsafe.Slice(unsafe.StringData(d), len(d))
	case nil:
	default:
		return 0, nil, fmt.Errorf("%w: BF.SCANDUMP answered data of type %T", rbloom.ErrBadDump, v[1])
	}
	return it, data, nil
}

// readHeader reads shard s's header as it is now.
func (b *Source) readHeader(ctx context.Context, s int) (*rbloom.Header, []byte, error) {
	var c *redis.Cmd
	err := b.o.Retry(ctx, redisconn.Retryable, "reading "+b.keys[s]+" on "+b.o.Target, nil, func() error {
		c = b.C.Do(ctx, "BF.SCANDUMP", b.keys[s], 0)
		if err := c.Err(); err != nil && !isAnswer(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if isWrongType(c.Err()) {
		typ, _ := b.C.Type(ctx, b.keys[s]).Result()
		return nil, nil, &FilterKeyError{Shard: b.spec.Router.Name(s), Key: b.keys[s], Type: typ}
	}
	return b.parseHeader(s, c)
}

func isWrongType(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") }

// Sorted: a filter is never listed (the audit reads it instead).
func (b *Source) Sorted() bool { return true }

// Read is not how a filter is compared: it holds bits, not keys.
func (b *Source) Read(context.Context, *online.ReadStats, func([]fpstore.Fingerprint) error) error {
	return errors.New("a RedisBloom filter holds bits, not keys: it is audited, not listed")
}

// Probe is refused by reconcile's options before a run opens the filters:
// an item and its shard come from the key text, which a fingerprint
// alone does not give.
func (b *Source) Probe(context.Context, []fpstore.Fingerprint, []bool) error {
	return online.Permanent{Err: errors.New("RedisBloom filters are audited from their dumps, not probed a fingerprint at a time")}
}

// Wide: the filters are addressed by key texts or the index's own
// fingerprints, never by whole digests.
func (b *Source) Wide() (wide, known bool) { return false, true }

// Shards is the number of shards.
func (b *Source) Shards() uint64 { return uint64(len(b.keys)) }

// Close releases the connections and the truth's spool.
func (b *Source) Close() error {
	if b.truth != nil {
		b.truth.close()
		b.truth = nil
	}
	return b.Client.Close()
}
