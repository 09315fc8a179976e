package etcdkeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// Source is the keys under an etcd prefix: read in key order at one
// revision (sorted: it merge-joins with the index), written by
// compare-and-create, read back by Get.
type Source struct {
	spec Spec
	o    *online.Config
	c    *etcdkv.Client
	vals *values

	// The reads: how many were made (each after the one before was
	// compacted), and the last one's figures. Read runs on one goroutine
	// at a time, and Report after the comparison.
	reads     int
	scan      etcdkv.ScanStats
	compacted []int64

	// The writes and the read back, from several goroutines.
	write      etcdkv.CreateStats
	writeMu    sync.Mutex
	otherValue atomic.Int64
	samplesMu  sync.Mutex
	samples    []string
}

// Open connects to the members spec names and checks, with one read under
// the prefix, that they answer and let the user read it; value is the
// template of the values written ("" the empty value; CheckValue).
func Open(ctx context.Context, spec Spec, o *online.Config, value string) (*Source, error) {
	if o.Password != "" && spec.User == "" {
		return nil, online.BadURL(o.Target, "a password is given, but no user to go with it: name one, etcd://USER@host:port/…")
	}
	if spec.User != "" && o.Password == "" {
		// etcd authenticates a named user by its password alone: without
		// one the client would connect as nobody, and a server with auth
		// on answers "user name is empty".
		return nil, online.BadURL(o.Target, "the user %q is named, but no password is given for it", spec.User)
	}
	vals, err := newValues(value, o.Plan.Values)
	if err != nil {
		return nil, err
	}
	c, err := etcdkv.Dial(ctx, etcdkv.Options{
		Endpoints: spec.Endpoints, CAFile: spec.CAFile, CertFile: spec.CertFile, KeyFile: spec.KeyFile,
		Username: spec.User, Password: o.Password, Timeout: o.Timeout, Prefix: spec.Format.Prefix,
		// The client's own retries are the run's: it fails over to
		// another member and sends a transaction again safely
		// (compare-and-create), so Retryable adds no layer of its own.
		Retries:      max(o.Retries, 1),
		MaxRecvBytes: int(o.Plan.EtcdRecv),
	})
	var fe *etcdkv.FileError
	switch {
	case errors.As(err, &fe):
		return nil, fmt.Errorf("%s: %w", o.Target, err) // a file of ours, not the members
	case err != nil:
		return nil, fmt.Errorf("cannot reach %s: %w", o.Target, err)
	}
	return &Source{spec: spec, o: o, c: c, vals: vals}, nil
}

// Sorted: etcd's ranges are in key order, which is fingerprint order for
// lowercase hex of one width.
func (s *Source) Sorted() bool { return true }

// Wide: 64-hex keys are whole SHA-256 digests, as the URL says.
func (s *Source) Wide() (wide, known bool) { return s.spec.Format.Hex != etcdkv.Hex32, true }

// Read reads every key under the prefix at one revision, the first page's,
// and gives their fingerprints in order. A key that is not the prefix and
// lowercase hex of the width is counted and sampled, never given. When
// the revision is compacted before the read ends, what was given is no
// snapshot: a *online.ReadAgainError asks for the comparison to be made
// again (at a new revision), up to Config.Retries times; past that the
// error is a *SnapshotError.
func (s *Source) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	s.reads++
	sc := s.c.Scan(ctx, etcdkv.ScanOptions{Format: s.spec.Format, PageSize: s.spec.Page, PageBytes: int(s.o.Plan.EtcdPage), Samples: s.o.Samples})
	batch := make([]fpstore.Fingerprint, 0, 4096)
	var told int64
	flush := func() error {
		keys := sc.Stats().Keys
		st.Values.Add(keys - told)
		told = keys
		if err := st.Wait(ctx, len(batch)); err != nil {
			return err
		}
		err := emit(batch)
		batch = batch[:0]
		return err
	}
	var err error
	for sc.Next() {
		if batch = append(batch, sc.Entry().FP); len(batch) == cap(batch) {
			if err = flush(); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = sc.Err()
	}
	if err == nil {
		err = flush()
	}
	s.scan = sc.Stats()
	st.Values.Store(s.scan.Keys)
	st.Bad, st.BadSamples = s.scan.Bad, st.BadSamples[:0]
	for _, b := range s.scan.BadSamples {
		st.BadSamples = append(st.BadSamples, b.String())
	}
	st.Expected, st.Retries = s.scan.Expected, s.scan.Retries
	if st.Checked = err == nil; st.Checked {
		st.Note = ""
	}
	var ce *etcdkv.CompactedError
	switch {
	case errors.As(err, &ce):
		s.compacted = append(s.compacted, ce.Rev)
		if s.reads <= s.o.Retries {
			return &online.ReadAgainError{Err: err}
		}
		return &SnapshotError{Target: s.o.Target, Revisions: s.compacted, Err: err}
	case err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled):
		return fmt.Errorf("reading %s: %w", s.o.Target, err)
	}
	return err
}

// Probe is not how an etcd prefix is compared: it is read whole, at one
// revision (the facade refuses a probe before it opens anything).
func (s *Source) Probe(ctx context.Context, fps []fpstore.Fingerprint, present []bool) error {
	return online.Permanent{Err: errors.New("an etcd prefix is read whole in key order, not probed")}
}

// ValueFields are the record fields the value template names.
func (s *Source) ValueFields() []string { return s.vals.t.Fields() }

// KeepValue makes and keeps the value of the key digest names, from its
// record's fields.
func (s *Source) KeepValue(digest [32]byte, fields [][]byte) error {
	return s.vals.keep(digest, fields)
}

// kv is item's key and value.
func (s *Source) kv(dst []byte, it *online.Item) (key, val []byte, err error) {
	wide, _ := s.Wide()
	switch {
	case it.HasFull:
		key = s.spec.Format.Append(dst, it.Full[:])
	case wide:
		return nil, nil, online.Permanent{Err: fmt.Errorf("BUG: key %s of %s written without its whole digest", it.FP, s.o.Target)}
	default:
		key = s.spec.Format.Append(dst, it.Bytes(false))
	}
	val, ok := s.vals.of(&it.Full, it.HasFull)
	if !ok {
		return nil, nil, online.Permanent{Err: fmt.Errorf("BUG: no record gave the value of %s", key)}
	}
	return key, val, nil
}

// Write creates every item's key with its value, unless it exists
// (compare-and-create: an existing value is never overwritten, and a
// transaction sent again after a lost member writes nothing twice).
func (s *Source) Write(ctx context.Context, items []online.Item) error {
	its := make([]etcdkv.Item, len(items))
	for i := range items {
		k, v, err := s.kv(nil, &items[i])
		if err != nil {
			return err
		}
		its[i] = etcdkv.Item{Key: k, Value: v}
	}
	st, err := s.c.Create(ctx, its, nil)
	s.writeMu.Lock()
	s.write.Add(st)
	s.writeMu.Unlock()
	var le *etcdkv.LimitError
	switch {
	case err != nil && ctx.Err() == nil && (errors.Is(err, etcdkv.ErrAuth) || errors.As(err, &le)):
		// Credentials or permissions refused, one key over the server's
		// limit: a rerun would be refused the same.
		return online.Refused{Err: err}
	case err != nil && ctx.Err() == nil:
		return online.Permanent{Err: err} // the client's retries were the run's
	}
	return err
}

// WriteRetries is how many transactions the client sent again (after a
// lost member, a leader change or a timeout): the run's retries.
func (s *Source) WriteRetries() int64 {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return int64(s.write.Retries)
}

// KeysWritten is how many keys the compare-and-create transactions
// committed, created or found there.
func (s *Source) KeysWritten() int64 {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return int64(s.write.Created + s.write.Existed)
}

// Held reads the items' keys back with Get: present when they exist. A key
// held with another value than this run writes is present (it is never
// overwritten) and counted apart.
func (s *Source) Held(ctx context.Context, items []online.Item, present []bool) error {
	keys := make([][]byte, len(items))
	want := make([][]byte, len(items))
	for i := range items {
		k, v, err := s.kv(nil, &items[i])
		if err != nil {
			return err
		}
		keys[i], want[i] = k, v
	}
	out := make([]etcdkv.KV, len(keys))
	if err := s.c.Get(ctx, keys, out); err != nil {
		if ctx.Err() == nil {
			return online.Permanent{Err: err}
		}
		return err
	}
	for i, kv := range out {
		present[i] = kv.Found
		if kv.Found && !bytes.Equal(kv.Value, want[i]) {
			s.otherValue.Add(1)
			s.samplesMu.Lock()
			if len(s.samples) < s.o.Samples {
				s.samples = append(s.samples, strconv.Quote(string(keys[i]))) // a key of ours: the prefix and hex
			}
			s.samplesMu.Unlock()
		}
	}
	return nil
}

// Plan prints the compare-and-create transactions Write would send, as
// the client splits them (etcdkv.Client.PlanCreate).
func (s *Source) Plan(w io.Writer, items []online.Item) error {
	its := make([]etcdkv.Item, len(items))
	for i := range items {
		k, v, err := s.kv(nil, &items[i])
		if err != nil {
			return err
		}
		its[i] = etcdkv.Item{Key: k, Value: v}
	}
	return s.c.PlanCreate(w, its)
}

// Retryable: none of the client's errors, which come after its own
// retries (Config.Retries of them).
func (s *Source) Retryable(err error) bool { return false }

// Close releases the connections.
func (s *Source) Close() error { return s.c.Close() }

// Report puts the etcd figures in rep.Etcd.
func (s *Source) Report(rep *report.Report) {
	sc := s.scan
	e := &report.EtcdReport{Prefix: s.spec.Format.Prefix, Hex: s.spec.Format.Hex, Value: s.vals.src,
		Revision: sc.Rev, Compacted: append([]int64{}, s.compacted...), Keys: sc.Keys, Expected: sc.Expected,
		Repeats: sc.Repeats, Pages: sc.Pages, Parts: sc.Parts, Retries: sc.Retries,
		Leased: sc.Leased, Leases: sc.Leases, Expired: sc.Expired, MinTTL: sc.MinTTL}
	if s.reads == 0 {
		e.MinTTL = -1
	}
	s.writeMu.Lock()
	w := s.write
	s.writeMu.Unlock()
	e.Created, e.Existed, e.Ambiguous, e.Txns, e.TxnRetry = int64(w.Created), int64(w.Existed), int64(w.Ambiguous), int64(w.Txns), int64(w.Retries)
	e.OtherValue = s.otherValue.Load()
	s.samplesMu.Lock()
	e.OtherValueSamples = append([]string(nil), s.samples...)
	s.samplesMu.Unlock()
	rep.Etcd = e
}
