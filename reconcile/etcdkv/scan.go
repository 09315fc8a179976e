package etcdkv

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/fpdedup/fpdedup/fpstore"
)

// ScanOptions say what a Scanner reads.
type ScanOptions struct {
	Format KeyFormat
	// PageSize is the most keys a page asks for (etcd's limit); default
	// 10000.
	PageSize int
	// PageBytes is what a page should weigh (keys and values; default 16
	// MiB): after a heavier page the next asks for half as many keys, after
	// a light one for twice as many, up to PageSize.
	PageBytes int
	// Values reads the values too; without it only the keys (and their
	// lease and revisions) come back.
	Values bool
	// Rev is the revision to read at; 0 means the cluster's current one
	// when the scan starts.
	Rev int64
	// Samples is how many bad keys are kept to name in a report (default 10).
	Samples int
}

// An Entry is one fingerprint key. Key and Value alias the page they came
// in: valid until the Scanner's next Next.
type Entry struct {
	FP             fpstore.Fingerprint
	Key, Value     []byte
	Lease          int64 // lease ID, 0 for none
	CreateRevision int64
	ModRevision    int64
}

// A BadKey is a key under the prefix that is not Prefix<lowercase hex of
// the width>: its first bytes and its length.
type BadKey struct {
	Key []byte
	Len int
}

// String quotes the key (cut to its first 120 bytes, invalid UTF-8
// escaped), with its length when cut.
func (b BadKey) String() string { return quoteKey(b.Key, b.Len) }

// ScanStats are the figures of a scan; whole once Next has returned false.
type ScanStats struct {
	Rev          int64    // the revision read at
	Expected     int64    // keys under the prefix at Rev, as etcd counted them (range by range, as read)
	Keys         int64    // keys read (Expected, once the scan has ended well: checked range by range)
	Fingerprints int64    // keys yielded
	Repeats      int64    // hex=64 keys whose first 128 bits equal the key before's
	Bad          int64    // keys that are not Prefix<hex>, not yielded
	BadSamples   []BadKey // the first Samples of them
	Pages        int      // Range requests
	Parts        int      // key ranges the prefix was split into (see Scan)
	Halved       int      // pages asked again in halves, too large to receive
	MaxPageBytes int      // the heaviest page received (keys and values)
	Retries      int      // requests sent again after a lost member or timeout
	Leased       int64    // keys bound to a lease (TTL)
	Leases       int      // distinct leases whose TTL was asked (TimeToLive)
	Expired      int64    // leased keys whose lease had ended when asked
	MinTTL       int64    // the shortest remaining TTL in seconds of a live lease; -1 for none
}

// A Scanner reads every key under a prefix in key order, at one revision.
// Use it from one goroutine:
//
//	s := c.Scan(ctx, opts)
//	for s.Next() {
//		e := s.Entry()
//	}
//	err := s.Err() // a *CompactedError: scan again, at a new revision
type Scanner struct {
	c   *Client
	ctx context.Context
	o   ScanOptions
	st  ScanStats

	started, done bool
	digits        int // hex digits a part adds to the prefix (0: one part)
	part          int
	next          []byte // where the next page of the part starts; nil: the part's start
	partCount     int64  // keys in the part, as etcd counted them on its first page
	partKeys      int64  // keys of the part read
	limit         int
	kvs           []*mvccpb.KeyValue
	i             int
	e             Entry
	prev          fpstore.Fingerprint
	havePrev      bool
	err           error
	ttls          map[int64]int64 // lease ID -> TTL asked, -1 expired
}

// maxLeaseCache bounds the TTLs remembered: past it the cache starts over
// (more TimeToLive calls, never more memory).
const maxLeaseCache = 1 << 16

// Scan returns a Scanner over o.Format.Prefix. Nothing is read until Next.
//
// The scan reads the prefix as 16^d ranges split on the first d hex
// digits, so that each page's range holds about a page of keys: etcd 3.4
// walks a Range's whole [start, end) to count it on every page, so pages
// over the whole prefix would cost it O(n²/page). d comes from a count of
// the keys whose hex starts "00", 1/256 of them since SHA-256 is uniform
// (a whole count would walk the prefix once more: 1-3 s a million keys
// here). The ranges are contiguous, so every key under the prefix (bad
// ones too) is read once, in key order; each range's first page says how
// many keys it holds at the revision, and the scan checks it read as many.
func (c *Client) Scan(ctx context.Context, o ScanOptions) *Scanner {
	if o.PageSize <= 0 {
		o.PageSize = 10000
	}
	if o.PageBytes <= 0 {
		o.PageBytes = 16 << 20
	}
	if o.Samples <= 0 {
		o.Samples = 10
	}
	s := &Scanner{c: c, ctx: ctx, o: o, limit: o.PageSize, ttls: map[int64]int64{}}
	s.st.MinTTL = -1
	if err := o.Format.Check(); err != nil {
		s.err = err
	}
	return s
}

// Next advances to the next fingerprint key; false at the end or on an
// error (see Err).
func (s *Scanner) Next() bool {
	for {
		for s.i < len(s.kvs) {
			kv := s.kvs[s.i]
			s.i++
			s.st.Keys++
			fp, ok := s.o.Format.Parse(kv.Key)
			if ok && kv.Lease != 0 {
				// A key of ours that vanishes by design; a bad key's
				// lease is none of the audit's business.
				if err := s.lease(kv.Lease); err != nil {
					s.err = err
					return false
				}
			}
			if !ok {
				s.st.Bad++
				if len(s.st.BadSamples) < s.o.Samples {
					s.st.BadSamples = append(s.st.BadSamples, BadKey{Key: append([]byte(nil), kv.Key[:min(len(kv.Key), sampleLen)]...), Len: len(kv.Key)})
				}
				continue
			}
			if s.havePrev {
				switch fp.Compare(s.prev) {
				case 0:
					s.st.Repeats++
					continue
				case -1:
					s.err = fmt.Errorf("%s: key %s came after a greater fingerprint %s: etcd's range is not in key order", s.c.where(), quoteKey(kv.Key, len(kv.Key)), s.prev)
					return false
				}
			}
			s.prev, s.havePrev = fp, true
			s.st.Fingerprints++
			s.e = Entry{FP: fp, Key: kv.Key, Value: kv.Value, Lease: kv.Lease, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision}
			return true
		}
		if s.err != nil || s.done {
			return false
		}
		s.kvs, s.i = nil, 0
		if err := s.fetch(); err != nil {
			s.err = err
			return false
		}
	}
}

// Entry is the current key.
func (s *Scanner) Entry() Entry { return s.e }

// Err is what ended the scan, nil at a whole one.
func (s *Scanner) Err() error { return s.err }

// Stats are the scan's figures so far.
func (s *Scanner) Stats() ScanStats { return s.st }

// Rev is the revision the scan reads at (0 before the first Next).
func (s *Scanner) Rev() int64 { return s.st.Rev }

// bounds are part i's [start, end).
func (s *Scanner) bounds(i int) (start, end string) {
	p := s.o.Format.Prefix
	switch {
	case i > 0:
		start = p + fmt.Sprintf("%0*x", s.digits, i)
	case p == "":
		start = "\x00" // etcd has no empty key; "\x00" to "\x00" is every key
	default:
		start = p
	}
	if i+1 < 1<<(4*s.digits) {
		end = p + fmt.Sprintf("%0*x", s.digits, i+1)
	} else {
		end = s.o.Format.End()
	}
	return start, end
}

// fetch reads the next page into s.kvs; at the end it checks the count.
func (s *Scanner) fetch() error {
	if !s.started {
		s.started = true
		if err := s.plan(); err != nil {
			return err
		}
	}
	for {
		start, end := s.bounds(s.part)
		from := start
		if s.next != nil {
			from = string(s.next)
		}
		resp, err := s.rangePage(from, end)
		if err != nil {
			return err
		}
		s.kvs = resp.Kvs
		if s.next == nil {
			s.partCount, s.partKeys = resp.Count, 0
			s.st.Expected += resp.Count
		}
		s.partKeys += int64(len(resp.Kvs))
		if resp.More && len(resp.Kvs) > 0 {
			last := resp.Kvs[len(resp.Kvs)-1].Key
			s.next = append(append(s.next[:0], last...), 0)
		} else {
			if s.partKeys != s.partCount {
				return fmt.Errorf("%s: %d keys read from %s to %s at revision %d, but etcd counted %d there", s.c.where(),
					s.partKeys, quoteKey([]byte(start), len(start)), quoteKey([]byte(end), len(end)), s.st.Rev, s.partCount)
			}
			s.next = nil
			s.part++
			if s.part >= 1<<(4*s.digits) {
				s.done = true
			}
		}
		if len(s.kvs) > 0 || s.done {
			return nil
		}
	}
}

// plan fixes the revision and splits the prefix into parts of about half
// a page each, from the count of 1/256 of the hex space.
func (s *Scanner) plan() error {
	p := s.o.Format.Prefix
	opts := []clientv3.OpOption{clientv3.WithRange(p + "01"), clientv3.WithCountOnly()}
	if s.o.Rev > 0 {
		opts = append(opts, clientv3.WithRev(s.o.Rev))
	}
	resp, err := s.get(p+"00", opts...)
	if err != nil {
		return s.rangeErr(p+"00", err)
	}
	s.st.Rev = s.o.Rev
	if s.st.Rev == 0 {
		s.st.Rev = resp.Header.Revision
	}
	for n := resp.Count << 8; s.digits < 4 && n > int64(s.o.PageSize)/2<<(4*s.digits); {
		s.digits++
	}
	s.st.Parts = 1 << (4 * s.digits)
	return nil
}

// rangePage reads one page of [from, end) at the scan's revision: halved
// while the response is too large to receive, then sized by PageBytes.
func (s *Scanner) rangePage(from, end string) (*clientv3.GetResponse, error) {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithRev(s.st.Rev), clientv3.WithLimit(int64(s.limit))}
		if !s.o.Values {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := s.get(from, opts...)
		if err != nil && grpcCode(err) == codes.ResourceExhausted && s.limit > 1 {
			s.limit /= 2
			s.st.Halved++
			continue
		}
		if err != nil {
			return nil, s.rangeErr(from, err)
		}
		s.st.Pages++
		n := 0
		for _, kv := range resp.Kvs {
			n += len(kv.Key) + len(kv.Value)
		}
		s.st.MaxPageBytes = max(s.st.MaxPageBytes, n)
		switch {
		case n > s.o.PageBytes && s.limit > 1:
			s.limit /= 2
		case n < s.o.PageBytes/4 && s.limit < s.o.PageSize && len(resp.Kvs) == s.limit:
			s.limit = min(s.limit*2, s.o.PageSize)
		}
		return resp, nil
	}
}

// get is one Range, sent again (bounded) after a lost member or an
// attempt's timeout: at a fixed revision any member answers the same.
func (s *Scanner) get(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(s.ctx, s.c.o.Timeout)
		resp, err := s.c.c.Get(ctx, key, opts...)
		cancel()
		if err == nil || try >= s.c.o.Retries || !retryable(s.ctx, err) {
			return resp, err
		}
		s.st.Retries++
		if err := backoff(s.ctx, try+1); err != nil {
			return nil, err
		}
	}
}

// rangeErr names the failed read: a compacted revision is a
// *CompactedError, a cluster that stayed unreachable a *DialError.
func (s *Scanner) rangeErr(from string, err error) error {
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted):
		return &CompactedError{Rev: s.st.Rev, Keys: s.st.Keys, Err: err}
	case grpcCode(err) == codes.ResourceExhausted:
		return keyErr([]byte(from), fmt.Errorf("%w: one key and its value are larger than %d bytes (MaxRecvBytes): %v", ErrTooLarge, s.c.o.MaxRecvBytes, err))
	case retryable(s.ctx, err):
		return &DialError{Endpoints: s.c.o.Endpoints, Err: fmt.Errorf("range from %s at revision %d, after %d retries: %w", quoteKey([]byte(from), len(from)), s.st.Rev, s.c.o.Retries, err)}
	}
	return fmt.Errorf("%s: range from %s at revision %d: %w", s.c.where(), quoteKey([]byte(from), len(from)), s.st.Rev, err)
}

// lease counts a leased key and asks its lease's remaining TTL once.
func (s *Scanner) lease(id int64) error {
	s.st.Leased++
	ttl, ok := s.ttls[id]
	if !ok {
		var resp *clientv3.LeaseTimeToLiveResponse
		var err error
		for try := 0; ; try++ {
			ctx, cancel := context.WithTimeout(s.ctx, s.c.o.Timeout)
			resp, err = s.c.c.TimeToLive(ctx, clientv3.LeaseID(id))
			cancel()
			if err == nil || try >= s.c.o.Retries || !retryable(s.ctx, err) {
				break
			}
			s.st.Retries++
			if err := backoff(s.ctx, try+1); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseNotFound):
			ttl = -1
		case err != nil:
			return fmt.Errorf("%s: time to live of lease %x: %w", s.c.where(), id, err)
		default:
			ttl = resp.TTL
		}
		if len(s.ttls) >= maxLeaseCache {
			clear(s.ttls)
		}
		s.ttls[id] = ttl
		s.st.Leases++
	}
	if ttl < 0 {
		s.st.Expired++
	} else if s.st.MinTTL < 0 || ttl < s.st.MinTTL {
		s.st.MinTTL = ttl
	}
	return nil
}
