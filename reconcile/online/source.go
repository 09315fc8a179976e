package online

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// Item is one key to write online: its fingerprint and, for online sides
// that hold whole SHA-256 digests, the digest (Full, when HasFull); for
// those that route or name a key by its text (RedisBloom filters), the
// key text (Key, from the records), and the shard their router gives it
// plus one (Route; 0: not routed yet, see RouteItems).
type Item struct {
	FP      fpstore.Fingerprint
	Full    [32]byte
	HasFull bool
	Route   int32
	Key     []byte
}

// Router is an online side that sends a key text to a shard by a hash of
// its own (RedisBloom's mod-md5 and ring routers: an MD5 of the key).
type Router interface {
	// Route is the shard of the key text, or -1 for a router that does
	// not say (route=all).
	Route(key []byte) int
}

// RouteItems sets each item's Route once, over the machine's cores: the
// writes, the read-back and its shards then read it instead of hashing
// the key again at each (an MD5 a key each time: a quarter of an --apply
// of 10^7 keys, measured).
func RouteItems(items []Item, r Router) {
	const minShare = 1 << 14
	parts := max(1, min(runtime.GOMAXPROCS(0), len(items)/minShare))
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for i := len(items) * p / parts; i < len(items)*(p+1)/parts; i++ {
				if s := r.Route(items[i].Key); s >= 0 && s < math.MaxInt32 {
					items[i].Route = int32(s) + 1
				}
			}
		})
	}
	wg.Wait()
}

// Source is an opened online side.
type Source interface {
	// Sorted reports whether Read gives fingerprints in ascending order.
	Sorted() bool
	// Read gives every fingerprint the online side holds to emit, in
	// batches (emit copies what it keeps). A value that is not a
	// fingerprint is counted in st, not emitted.
	Read(ctx context.Context, st *ReadStats, emit func([]fpstore.Fingerprint) error) error
	// Probe sets present[i] to whether fps[i] (ascending) is online.
	Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error
	// Wide reports whether the online side holds whole 32-byte digests;
	// known is false when nothing says yet (an empty key space, hex= not
	// given).
	Wide() (wide, known bool)
	// Write writes items online, idempotently (SET NX, SADD, INSERT IGNORE).
	Write(ctx context.Context, items []Item) error
	// Held sets present[i] to whether items[i] (ascending) is online as
	// Write names it, asking with read-only commands (EXISTS,
	// SMISMEMBER, SELECT … IN, GETBIT): what makes a run that wrote say
	// the sides agree.
	Held(ctx context.Context, items []Item, present []bool) error
	// Plan prints, one a line, the commands Write would send.
	Plan(w io.Writer, items []Item) error
	// Retryable tells an error of this source's that may pass with time
	// (a lost connection, a timeout), worth retrying, from an answer of
	// its server (a syntax error, a missing table, wrong credentials) that
	// a retry would only repeat: each store knows its own.
	Retryable(err error) bool
	// Close releases the connections.
	Close() error
}

// An Auditor is a Source that is audited rather than listed (a bloom holds
// bits, not keys): Audit tests every fingerprint of x against what it
// holds, adds those held to *held and gives the others to missing, in
// order, pacing itself by st. It fills rep.Mode and its own section of
// rep. What it holds that x does not is not known.
type Auditor interface {
	Source
	Audit(ctx context.Context, x *fpstore.Index, st *ReadStats, held *int64, missing func(fpstore.Fingerprint) error, rep *report.Report) error
}

// A Sharded source writes each key into one of its shards. The read back
// after the writes reads each shard written whole, besides asking for
// each key: a shard deleted or flushed meanwhile loses keys that the run
// did not write.
type Sharded interface {
	Source
	Shards() uint64
	ShardOf(it Item) uint64
	// ReadBackShards reads the shards touched marks back whole into
	// rep.ReadBack (its Shards, and Short).
	ReadBackShards(ctx context.Context, touched []bool, rep *report.Report) error
}

// A WholeReader is a Sharded source that can also read a shard back
// whole and test the items written to it offline (a bloom filter's dump):
// cheaper than asking for each item (Held) when many were written to a
// shard small beside them.
type WholeReader interface {
	Sharded
	// ReadWhole says which shards to read back whole, given how many
	// items were written to each.
	ReadWhole(ctx context.Context, written []int64) ([]bool, error)
	// HeldWhole reads back whole the shards whole marks and tells held,
	// of each item each gives that is written to one of them, whether it
	// holds it now. each gives every item written, the same at every
	// call; written is how many went to each shard.
	HeldWhole(ctx context.Context, whole []bool, written []int64, each func(fn func(*Item) error) error, held func(it *Item, held bool)) error
}

// A MissingItemer is a Source whose audit kept what it read of the
// records (RedisBloom's spool): it gives the items of the keys it found
// missing for Apply to write, sorted by fingerprint, without the records
// read again; false when it has not them, or they would take more than
// maxBytes.
type MissingItemer interface {
	MissingItems(ctx context.Context, maxBytes int64) ([]Item, bool, error)
}

// Placed is a Source whose keys are served by nodes that a failover can
// change (a Redis Cluster): --apply compares SlotOwners before its writes
// and after its read-back, and a difference makes what it wrote
// uncertain, whatever the read-back found (the old master of a slot that
// moved, told late, takes writes and answers reads its successor never
// has). A Source of one server answers "".
type Placed interface {
	SlotOwners(ctx context.Context) (string, error)
}

// ReadStats are the figures of reading the online side.
type ReadStats struct {
	Values     atomic.Int64 // values read (keys, members, rows), bad ones included
	Bad        int64        // values that are not fingerprints
	BadSamples []string     // the first few of them, quoted
	Retries    int          // reads resumed after a lost connection
	Expected   int64        // what the store said it holds (COUNT(*), SCARD), -1 unknown
	Checked    bool         // Values was compared with Expected in one snapshot
	Note       string       // why the count was not compared, or what it showed
	Narrow     int64        // values of 16 bytes / 32 hex digits
	Full       int64        // values of 32 bytes / 64 hex digits
	Masters    []string     // Redis Cluster: the masters scanned
	// Pace paces reading (Config.ReadRate); nil: no limit.
	Pace *Pacer
	// CheckDistinct, set by a source whose Expected counts distinct
	// values (SCARD), is what a comparison that read got of them (in the
	// index's range or not, and the bad ones) notes: "" when they agree.
	CheckDistinct func(got int64) string
}

// AddBad counts v, a value that is not a fingerprint, and keeps it as a
// sample while there are fewer than samples.
func (st *ReadStats) AddBad(v string, samples int) {
	st.Bad++
	if len(st.BadSamples) < samples {
		if len(v) > 120 {
			v = v[:120] + "…"
		}
		st.BadSamples = append(st.BadSamples, fmt.Sprintf("%q", v))
	}
}

// Wait paces reading n values to Config.ReadRate.
func (st *ReadStats) Wait(ctx context.Context, n int) error {
	if st.Pace == nil {
		return nil
	}
	return st.Pace.Wait(ctx, n)
}

// ParseHex reads 32 or 64 hex digits (either case) as a fingerprint: a
// 64-digit SHA-256 is compared on its first 128 bits.
func ParseHex[T string | []byte](s T) (fp fpstore.Fingerprint, ok bool) {
	if len(s) != 32 && len(s) != 64 {
		return fp, false
	}
	var bad byte
	for i := 0; i < 16; i++ {
		v := unhex[s[i]]
		bad |= v
		fp.Hi = fp.Hi<<4 | uint64(v)
	}
	for i := 16; i < 32; i++ {
		v := unhex[s[i]]
		bad |= v
		fp.Lo = fp.Lo<<4 | uint64(v)
	}
	for i := 32; i < len(s); i++ {
		bad |= unhex[s[i]]
	}
	return fp, bad&0xf0 == 0
}

// IsHex reports whether b holds hex digits only (either case).
func IsHex(b []byte) bool {
	for _, c := range b {
		if unhex[c] == 0xff {
			return false
		}
	}
	return true
}

var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
		t[c-'a'+'A'] = byte(c-'a') + 10
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// Hex is the item's lowercase hex: 64 digits when full, else 32.
func (it *Item) Hex(full bool) string {
	if full {
		var b [64]byte
		for i, c := range it.Full {
			b[2*i], b[2*i+1] = hexDigits[c>>4], hexDigits[c&15]
		}
		return string(b[:])
	}
	return it.FP.String()
}

// AppendHex appends the item's lowercase hex: 64 digits when full.
func (it *Item) AppendHex(dst []byte, full bool) []byte {
	if full {
		for _, c := range it.Full {
			dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
		}
		return dst
	}
	return it.FP.AppendHex(dst)
}

// Bytes is the item's big-endian bytes: 32 when full, else 16.
func (it *Item) Bytes(full bool) []byte {
	if full {
		return append([]byte(nil), it.Full[:]...)
	}
	b := make([]byte, 16)
	for i := 0; i < 8; i++ {
		b[i] = byte(it.FP.Hi >> (56 - 8*i))
		b[8+i] = byte(it.FP.Lo >> (56 - 8*i))
	}
	return b
}
