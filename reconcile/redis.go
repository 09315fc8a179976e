package reconcile

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fpdedup/fpdedup/fpstore"
)

// redisSource reads keys PREFIX<hex> by SCAN, or the members of a set by
// SSCAN; probes with pipelined EXISTS or SMISMEMBER; writes with pipelined
// SET NX (optionally with a TTL) or SADD.
type redisSource struct {
	t       *Target
	c       *redis.Client
	o       *Options
	narrow  int64 // values of each width seen by Read
	full    int64
	samples int
	raw     *respPool // --apply's writes
}

func openRedis(ctx context.Context, t *Target, o *Options) (*redisSource, error) {
	c := redis.NewClient(&redis.Options{
		Addr:            t.Addr,
		Username:        t.User,
		Password:        o.Password,
		DB:              t.DB,
		Protocol:        2,
		DisableIdentity: true,
		// Redis 7.0 does not know CLIENT MAINT_NOTIFICATIONS.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		DialTimeout:              min(o.Timeout, 5*time.Second),
		ReadTimeout:              o.Timeout,
		WriteTimeout:             o.Timeout,
		PoolSize:                 o.Conns + 2,
		MaxRetries:               1, // ours (retry) are on top, with their own backoff
	})
	r := &redisSource{t: t, c: c, o: o, samples: o.Samples, raw: newRespPool(t.Addr, t.User, o.Password, t.DB, o.Timeout, o.Conns)}
	err := retry(ctx, o.Retries, o.Backoff, nil, func() error { return c.Ping(ctx).Err() })
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cannot reach %s: %w", t.Redacted, err)
	}
	if t.Kind == RedisSet {
		typ, err := c.Type(ctx, t.Set).Result()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", t.Redacted, err)
		}
		if typ != "set" && typ != "none" {
			c.Close()
			return nil, fmt.Errorf("%s: key %q holds a %s, not a set", t.Redacted, t.Set, typ)
		}
	}
	if t.HexDigits == 0 && o.Probe {
		// A probe must know how the keys are named before it asks for
		// them: 32-digit names asked of a store of 64-digit ones would all
		// be "missing". Look at a few names.
		if err := r.sampleWidth(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", t.Redacted, err)
		}
	}
	return r, nil
}

// sampleWidth reads a few names (SRANDMEMBER, or SCAN pages until some
// match) to learn their width.
func (r *redisSource) sampleWidth(ctx context.Context) error {
	var names []string
	if r.t.Kind == RedisSet {
		var err error
		if names, err = r.c.SRandMemberN(ctx, r.t.Set, 16).Result(); err != nil {
			return err
		}
	} else {
		var cursor uint64
		for i := 0; i < 16 && len(names) < 16; i++ {
			keys, next, err := r.c.Scan(ctx, cursor, escapeGlob(r.t.Prefix)+"*", 1000).Result()
			if err != nil {
				return err
			}
			for _, k := range keys {
				names = append(names, k[len(r.t.Prefix):])
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	for _, n := range names {
		if _, ok := parseHex(n); ok {
			if len(n) == 64 {
				r.full++
			} else {
				r.narrow++
			}
		}
	}
	return nil
}

func (r *redisSource) Close() error {
	r.raw.close()
	return r.c.Close()
}

func (r *redisSource) Sorted() bool { return false }

func (r *redisSource) Wide() (bool, bool) {
	switch {
	case r.t.HexDigits != 0:
		return r.t.HexDigits == 64, true
	case r.o.Probe && r.full == 0:
		return false, true // nothing says otherwise: names of 32 digits
	case r.full > 0 && r.narrow == 0:
		return true, true
	case r.narrow > 0 && r.full == 0:
		return false, true
	}
	return false, false
}

// Read walks the key space (or the set) with SCAN/SSCAN. Pages are parsed
// in this goroutine while the next one is on its way. A page that fails is
// asked again with the same cursor (the cursor is valid across
// connections), with bounded retries and backoff.
func (r *redisSource) Read(ctx context.Context, st *ReadStats, emit func([]fpstore.Fingerprint) error) error {
	st.Expected = -1
	if r.t.Kind == RedisSet {
		if n, err := r.c.SCard(ctx, r.t.Set).Result(); err == nil {
			st.Expected = n
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []string, 4)
	errc := make(chan error, 1)
	go func() {
		defer close(pages)
		var cursor uint64
		match := escapeGlob(r.t.Prefix) + "*"
		for {
			var keys []string
			var next uint64
			err := retry(ctx, r.o.Retries, r.o.Backoff, func() { st.Retries++ }, func() error {
				var err error
				if r.t.Kind == RedisSet {
					keys, next, err = r.c.SScan(ctx, r.t.Set, cursor, "", int64(r.t.ScanCount)).Result()
				} else {
					keys, next, err = r.c.Scan(ctx, cursor, match, int64(r.t.ScanCount)).Result()
				}
				return err
			})
			if err != nil {
				errc <- fmt.Errorf("reading %s: %w (after %d values; rerun to read again)", r.t.Redacted, err, st.Values.Load())
				return
			}
			if len(keys) > 0 {
				select {
				case pages <- keys:
				case <-ctx.Done():
					return
				}
			}
			if cursor = next; cursor == 0 {
				errc <- nil
				return
			}
		}
	}()
	buf := make([]fpstore.Fingerprint, 0, 8192)
	plen := len(r.t.Prefix)
	for keys := range pages {
		if err := st.wait(ctx, len(keys)); err != nil {
			return err
		}
		st.Values.Add(int64(len(keys)))
		for _, k := range keys {
			h := k[min(plen, len(k)):]
			fp, ok := parseHex(h)
			if !ok || !strings.HasPrefix(k, r.t.Prefix) {
				st.bad(k, r.samples)
				continue
			}
			if len(h) == 64 {
				r.full++
			} else {
				r.narrow++
			}
			if buf = append(buf, fp); len(buf) == cap(buf) {
				if err := emit(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	select {
	case err := <-errc:
		if err != nil {
			return err
		}
	default:
		return context.Cause(ctx) // the producer stopped on a cancelled context
	}
	st.Narrow, st.Full = r.narrow, r.full
	if len(buf) > 0 {
		return emit(buf)
	}
	return nil
}

// escapeGlob escapes the glob characters of a literal prefix for MATCH.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *redisSource) name(it *Item, full bool) string {
	if r.t.Kind == RedisSet {
		return itemHex(it, full)
	}
	return r.t.Prefix + itemHex(it, full)
}

func (r *redisSource) Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error {
	if wide, _ := r.Wide(); wide {
		return permanent{fmt.Errorf("%s names keys by whole SHA-256 digests (hex=64), which a 128-bit index cannot probe: reconcile without --probe (SCAN and merge-join) instead", r.t.Redacted)}
	}
	if r.t.Kind == RedisSet {
		members := make([]any, len(fps))
		for i, fp := range fps {
			members[i] = fp.String()
		}
		res, err := r.c.SMIsMember(ctx, r.t.Set, members...).Result()
		if err != nil {
			return err
		}
		if len(res) != len(fps) {
			return fmt.Errorf("SMISMEMBER answered %d of %d members", len(res), len(fps))
		}
		copy(present, res)
		return nil
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.IntCmd, len(fps))
	for i, fp := range fps {
		cmds[i] = pipe.Exists(ctx, r.t.Prefix+fp.String())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for i, c := range cmds {
		present[i] = c.Val() > 0
	}
	return nil
}

// Write sends one pipeline: SET PREFIX<hex> 1 NX [EX|PX ttl] per item, or
// one SADD of them all. The replies (set or not) are not used: after a
// retried pipeline they would call this run's own writes "existing"
// (FAULTS.md row 23); only error replies count.
func (r *redisSource) Write(ctx context.Context, items []Item) error {
	full, _ := r.Wide()
	var b []byte
	var hexb [64]byte
	n := 0
	if r.t.Kind == RedisSet {
		b = append(b, '*')
		b = strconv.AppendInt(b, int64(2+len(items)), 10)
		b = append(b, "\r\n"...)
		b = appendBulk(b, "SADD")
		b = appendBulk(b, r.t.Set)
		for i := range items {
			b = appendBulk(b, appendItemHex(hexb[:0], &items[i], full))
		}
		n = 1
	} else {
		var ttl []string
		switch {
		case r.o.TTL <= 0:
		case r.o.TTL%time.Second == 0:
			ttl = []string{"EX", strconv.FormatInt(int64(r.o.TTL/time.Second), 10)}
		default:
			ttl = []string{"PX", strconv.FormatInt(r.o.TTL.Milliseconds(), 10)}
		}
		key := []byte(r.t.Prefix)
		for i := range items {
			b = append(b, '*')
			b = strconv.AppendInt(b, int64(4+len(ttl)), 10)
			b = append(b, "\r\n"...)
			b = appendBulk(b, "SET")
			b = appendBulk(b, appendItemHex(key[:len(r.t.Prefix)], &items[i], full))
			b = appendBulk(b, "1")
			for _, a := range ttl {
				b = appendBulk(b, a)
			}
			b = appendBulk(b, "NX")
		}
		n = len(items)
	}
	return r.raw.pipeline(ctx, b, n)
}

// appendItemHex appends the item's lowercase hex: 64 digits when full.
func appendItemHex(dst []byte, it *Item, full bool) []byte {
	if full {
		for _, c := range it.Full {
			dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
		}
		return dst
	}
	return it.FP.AppendHex(dst)
}

func (r *redisSource) Plan(w io.Writer, items []Item) error {
	full, _ := r.Wide()
	var b []byte
	for i := range items {
		if r.t.Kind == RedisSet {
			b = append(b, "SADD "...)
			b = strconv.AppendQuote(b, r.t.Set)
			b = append(b, ' ')
			b = append(b, itemHex(&items[i], full)...)
		} else {
			b = append(b, "SET "...)
			b = append(b, r.name(&items[i], full)...)
			b = append(b, " 1"...)
			switch {
			case r.o.TTL <= 0:
			case r.o.TTL%time.Second == 0:
				b = append(b, " EX "...)
				b = strconv.AppendInt(b, int64(r.o.TTL/time.Second), 10)
			default:
				b = append(b, " PX "...)
				b = strconv.AppendInt(b, r.o.TTL.Milliseconds(), 10)
			}
			b = append(b, " NX"...)
		}
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}
