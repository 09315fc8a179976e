package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fpdedup/fpdedup/fpstore"
)

// Item is one key to write online: its fingerprint and, for online sides
// that hold whole SHA-256 digests, the digest (Full, when HasFull).
type Item struct {
	FP      fpstore.Fingerprint
	Full    [32]byte
	HasFull bool
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
	// Close releases the connections.
	Close() error
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
	limiter    *pacer
}

func (st *ReadStats) bad(v string, samples int) {
	st.Bad++
	if len(st.BadSamples) < samples {
		if len(v) > 120 {
			v = v[:120] + "…"
		}
		st.BadSamples = append(st.BadSamples, fmt.Sprintf("%q", v))
	}
}

// wait paces reading to Options.ReadRate.
func (st *ReadStats) wait(ctx context.Context, n int) error {
	if st.limiter == nil {
		return nil
	}
	return st.limiter.wait(ctx, n)
}

// parseHex reads 32 or 64 hex digits (either case) as a fingerprint: a
// 64-digit SHA-256 is compared on its first 128 bits.
func parseHex[T string | []byte](s T) (fp fpstore.Fingerprint, ok bool) {
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

// itemHex is the item's lowercase hex: 64 digits when full, else 32.
func itemHex(it *Item, full bool) string {
	if full {
		var b [64]byte
		for i, c := range it.Full {
			b[2*i], b[2*i+1] = hexDigits[c>>4], hexDigits[c&15]
		}
		return string(b[:])
	}
	return it.FP.String()
}

// itemBytes is the item's big-endian bytes: 32 when full, else 16.
func itemBytes(it *Item, full bool) []byte {
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

// A Wait is a retry about to be made: what failed, on which try of how
// many, why, and how long until the next (Options.Waiting).
type Wait struct {
	What       string // "reaching redis://…", "reading mysql://…"
	Try, Tries int
	Err        error
	Next       time.Duration
}

// waiting is the retry hook that tells o.Waiting, if set, of each retry of
// what, and counts it in n, if set.
func (o *Options) waiting(what string, n *atomic.Int64) func(Wait) {
	return func(w Wait) {
		if n != nil {
			n.Add(1)
		}
		if o.Waiting != nil {
			w.What = what
			o.Waiting(w)
		}
	}
}

// retry runs fn up to 1+retries times with exponential backoff (capped at
// 5 s) while it fails with a retryable error and ctx is live; onRetry, if
// set, is told of each retry before its backoff.
func retry(ctx context.Context, retries int, backoff time.Duration, onRetry func(Wait), fn func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = fn(); err == nil || ctx.Err() != nil || attempt >= retries || !retryable(err) {
			return err
		}
		d := backoff << attempt
		if d > 5*time.Second {
			d = 5 * time.Second
		}
		if onRetry != nil {
			onRetry(Wait{Try: attempt + 1, Tries: retries + 1, Err: err, Next: d})
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
	}
}

// retryable tells a lost connection or a timeout, worth retrying, from an
// answer of the server (a syntax error, a missing table, wrong credentials)
// that a retry would only repeat.
func retryable(err error) bool {
	var perm permanent
	var re *ReplyError
	if errors.As(err, &perm) || errors.As(err, &re) {
		return false // a server that sent a reply past its bounds would send it again
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		// An answer of a live server: only these pass with time.
		switch me.Number {
		case 1040, // too many connections
			1053, // server shutdown in progress
			1205, // lock wait timeout
			1213, // deadlock
			1317, // query execution was interrupted
			1927: // connection was killed
			return true
		}
		return false
	}
	s := err.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "WRONGTYPE", "NOPERM", "ERR unknown command"} {
		if strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// permanent marks an error that no retry can fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }
