package etcdkv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
)

// An Item is a key to create with its value.
type Item struct {
	Key, Value []byte
}

// CreateStats are the figures of Create calls.
type CreateStats struct {
	Created   int // keys this call wrote
	Existed   int // keys found already there, left as they were
	Ambiguous int // of Existed: found there on a retry after an attempt whose outcome was lost, so possibly written by that attempt
	Txns      int // transactions committed
	Retries   int // transactions sent again after a lost member, leader change or timeout
	Halved    int // transactions the server refused as too large (its --max-txn-ops, --max-request-bytes), sent again in halves
}

// Add adds b's figures to s.
func (s *CreateStats) Add(b CreateStats) {
	s.Created += b.Created
	s.Existed += b.Existed
	s.Ambiguous += b.Ambiguous
	s.Txns += b.Txns
	s.Retries += b.Retries
	s.Halved += b.Halved
}

// txnOverhead is what a key's compare, put and read add to a request
// besides the key (three times) and the value: protobuf tags and lengths,
// generously.
const txnOverhead = 64

// Create writes items, each only if its key does not exist yet
// (CreateRevision == 0, etcd's compare-and-create): an existing value is
// never overwritten, so a rerun writes nothing. created[i] (when created
// is not nil; len(items)) says whether items[i] was written by this call.
//
// A batch of keys goes in one flat transaction, within the server's
// MaxTxnOps and MaxRequestBytes (halved, down to one key, while the
// server refuses a transaction for its size, and kept so for the
// transactions after): If(CreateRevision(k) == 0 for each k)
// Then(Put(k, v) for each) Else(Get(k) for each). Batches, not one key a
// transaction: against etcd 3.4 here, 10^4 missing keys by 4 writers,
// 21000 keys/s in transactions of 128 keys, 900 keys/s one a transaction
// (BenchmarkCreate; each transaction is a Raft entry and an fsync). When some key exists the
// Else branch says which; they are left as they are and the rest go again
// in a new transaction, until each key is written or found. Not one
// nested transaction a key: etcd 3.4 checks no permission inside nested
// transactions (measured here: a user allowed only to read wrote through
// one), and this way the server's own checks hold. A transaction whose
// outcome was lost (a member killed, a leader change, a timeout) is sent
// again, up to Options.Retries times: a key it had written is then found
// existing (counted Ambiguous), never written twice. A batch that names a
// key twice is refused (ErrDuplicate) before anything is sent.
//
// Safe for concurrent use; each call's transactions are sent one after
// another.
func (c *Client) Create(ctx context.Context, items []Item, created []bool) (CreateStats, error) {
	var st CreateStats
	if created != nil && len(created) != len(items) {
		return st, fmt.Errorf("BUG: Create: %d results for %d items", len(created), len(items))
	}
	if err := noDuplicates(items); err != nil {
		return st, err
	}
	if created == nil {
		created = make([]bool, len(items))
	}
	for lo := 0; lo < len(items); {
		hi, size, err := c.txnEnd(items, lo)
		if err != nil {
			return st, err
		}
		err = c.createBatch(ctx, items[lo:hi], created[lo:hi], &st)
		var re *refusedError
		switch {
		case errors.As(err, &re) && hi-lo > 1:
			// Refused before anything was applied (etcd checks a
			// transaction's operations and size before it proposes it):
			// the same keys again, half as many a transaction.
			c.shrinkTxn(hi - lo)
			st.Halved++
			continue
		case errors.As(err, &re):
			return st, c.limitErr(items[lo], size, re.err)
		case err != nil:
			return st, err
		}
		lo = hi
	}
	return st, nil
}

// PlanCreate prints the transactions Create would send for items, one
// block a transaction, split as Create splits them: a line saying what
// the transaction does, then a line a key, its key and value quoted.
func (c *Client) PlanCreate(w io.Writer, items []Item) error {
	if err := noDuplicates(items); err != nil {
		return err
	}
	var b []byte
	for lo := 0; lo < len(items); {
		hi, _, err := c.txnEnd(items, lo)
		if err != nil {
			return err
		}
		n := "1 key"
		if hi-lo > 1 {
			n = strconv.Itoa(hi-lo) + " keys"
		}
		b = append(b, "TXN of "+n+": IF CREATE_REVISION(key) = 0 for each THEN PUT key value for each ELSE GET each (those not found are sent again)\n"...)
		for _, it := range items[lo:hi] {
			b = append(b, "  "...)
			b = strconv.AppendQuote(b, string(it.Key))
			b = append(b, ' ')
			b = strconv.AppendQuote(b, string(it.Value))
			b = append(b, '\n')
		}
		lo = hi
	}
	_, err := w.Write(b)
	return err
}

// txnEnd is where the transaction that starts at items[lo] ends: as many
// keys as a transaction holds (txnKeys), within MaxRequestBytes; size is
// what they weigh in the request. One key over MaxRequestBytes is
// ErrTooLarge.
func (c *Client) txnEnd(items []Item, lo int) (hi, size int, err error) {
	hi, most := lo, int(c.txnKeys.Load())
	for hi < len(items) && hi-lo < most {
		n := 3*len(items[hi].Key) + len(items[hi].Value) + txnOverhead
		if hi > lo && size+n > c.o.MaxRequestBytes {
			break
		}
		size += n
		hi++
	}
	if size > c.o.MaxRequestBytes {
		return hi, size, keyErr(items[lo].Key, fmt.Errorf("%w: %d bytes with its value, over %d (MaxRequestBytes)", ErrTooLarge, size, c.o.MaxRequestBytes))
	}
	return hi, size, nil
}

// shrinkTxn halves the keys a transaction holds after the server refused
// one of n keys (never below one; another goroutine may have halved it
// already).
func (c *Client) shrinkTxn(n int) {
	for {
		cur := c.txnKeys.Load()
		want := min(cur, int64(max(n/2, 1)))
		if want == cur || c.txnKeys.CompareAndSwap(cur, want) {
			return
		}
	}
}

// A refusedError is a transaction the server refused for its size: too
// many operations (its --max-txn-ops) or too many bytes (its
// --max-request-bytes, or gRPC's limit above it).
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }

func refused(err error) bool {
	e := rpctypes.Error(err)
	return errors.Is(e, rpctypes.ErrTooManyOps) || errors.Is(e, rpctypes.ErrRequestTooLarge) || grpcCode(err) == codes.ResourceExhausted
}

// limitErr is a transaction of one key the server refused: no
// transaction is smaller, so the server's limit is below one key.
func (c *Client) limitErr(it Item, size int, err error) error {
	limit := "--max-request-bytes"
	if errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyOps) {
		limit = "--max-txn-ops"
	}
	return &LimitError{Endpoints: c.o.Endpoints, Limit: limit, Key: keyErr(it.Key, nil), Bytes: size, Err: err}
}

// createBatch writes one batch: a transaction, then another for what was
// not found existing, until every key is settled.
func (c *Client) createBatch(ctx context.Context, items []Item, created []bool, st *CreateStats) error {
	todo := make([]int, len(items))
	for i := range todo {
		todo[i] = i
	}
	lost := false
	for len(todo) > 0 {
		cmps := make([]clientv3.Cmp, len(todo))
		puts := make([]clientv3.Op, len(todo))
		gets := make([]clientv3.Op, len(todo))
		for j, i := range todo {
			k := string(items[i].Key)
			cmps[j] = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
			puts[j] = clientv3.OpPut(k, string(items[i].Value))
			gets[j] = clientv3.OpGet(k, clientv3.WithCountOnly())
		}
		resp, wasLost, err := c.commit(ctx, cmps, puts, gets, items[todo[0]].Key, len(todo), st)
		if err != nil {
			return err
		}
		lost = lost || wasLost
		if resp.Succeeded {
			for _, i := range todo {
				created[i] = true
			}
			st.Created += len(todo)
			return nil
		}
		if len(resp.Responses) != len(todo) {
			return fmt.Errorf("%s: a transaction of %d creates answered %d responses", c.where(), len(todo), len(resp.Responses))
		}
		rest := todo[:0]
		for j, i := range todo {
			r := resp.Responses[j].GetResponseRange()
			if r == nil {
				return fmt.Errorf("%s: a read answered %T", c.where(), resp.Responses[j].Response)
			}
			if r.Count == 0 {
				rest = append(rest, i)
				continue
			}
			created[i] = false
			st.Existed++
			if lost {
				st.Ambiguous++
			}
		}
		if len(rest) == len(todo) {
			return fmt.Errorf("%s: a compare-and-create of %d keys from %s failed, yet none of them exists", c.where(), len(todo), quoteKey(items[todo[0]].Key, len(items[todo[0]].Key)))
		}
		todo = rest
	}
	return nil
}

// commit sends one transaction, again after a lost outcome; lost says
// whether an attempt's outcome was lost.
func (c *Client) commit(ctx context.Context, cmps []clientv3.Cmp, then, els []clientv3.Op, first []byte, n int, st *CreateStats) (resp *clientv3.TxnResponse, lost bool, err error) {
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		resp, err = c.c.Txn(actx).If(cmps...).Then(then...).Else(els...).Commit()
		cancel()
		if err == nil {
			st.Txns++
			return resp, lost, nil
		}
		if refused(err) {
			return nil, lost, &refusedError{err}
		}
		if try >= c.o.Retries || !retryable(ctx, err) {
			return nil, lost, c.writeErr(first, n, try, err)
		}
		lost = true
		st.Retries++
		if err := backoff(ctx, try+1); err != nil {
			return nil, lost, err
		}
	}
}

// writeErr names a failed transaction of n keys by its first key.
func (c *Client) writeErr(first []byte, n, tries int, err error) error {
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied):
		return &PermissionError{Endpoints: c.o.Endpoints, User: c.o.Username, Prefix: c.o.Prefix, Err: err}
	case isAuth(err):
		return fmt.Errorf("%s: create of %d keys from %s: %w: %v", c.where(), n, quoteKey(first, len(first)), ErrAuth, err)
	case retryable(context.Background(), err):
		return &DialError{Endpoints: c.o.Endpoints, Err: fmt.Errorf("create of %d keys from %s, after %d retries: %w", n, quoteKey(first, len(first)), tries, err)}
	}
	return fmt.Errorf("%s: create of %d keys from %s: %w", c.where(), n, quoteKey(first, len(first)), err)
}

// noDuplicates refuses a batch that names a key twice: etcd would refuse
// the whole transaction.
func noDuplicates(items []Item) error {
	seen := make(map[string]struct{}, len(items))
	for _, it := range items {
		if _, ok := seen[string(it.Key)]; ok {
			return keyErr(it.Key, ErrDuplicate)
		}
		seen[string(it.Key)] = struct{}{}
	}
	return nil
}

// A KV is a key read back by Get.
type KV struct {
	Found          bool
	Value          []byte
	CreateRevision int64
	ModRevision    int64
	Version        int64 // puts since it was created: 1 for a key written once
	Lease          int64
}

// Get reads keys back (what makes a write a claim that was checked):
// out[i] (len(keys)) is keys[i]'s value, Found false for a key that does
// not exist. A transaction of reads at a time, within MaxTxnOps and
// MaxRecvBytes (halved while the answer is too large); each transaction
// reads at one revision. Safe for concurrent use.
func (c *Client) Get(ctx context.Context, keys [][]byte, out []KV) error {
	if len(out) != len(keys) {
		return fmt.Errorf("BUG: Get: %d results for %d keys", len(out), len(keys))
	}
	n := int(c.txnKeys.Load())
	for lo := 0; lo < len(keys); {
		hi := min(lo+n, len(keys))
		err := c.getTxn(ctx, keys[lo:hi], out[lo:hi])
		if err != nil && refused(err) && hi-lo > 1 {
			// An answer too large is this read's alone; too many
			// operations is the server's limit, for every transaction.
			if grpcCode(err) != codes.ResourceExhausted {
				c.shrinkTxn(hi - lo)
			}
			n = max(1, (hi-lo)/2)
			continue
		}
		if err != nil {
			return c.readErr(keys[lo], hi-lo, err)
		}
		lo = hi
	}
	return nil
}

// getTxn reads keys in one transaction, sent again after a lost member or
// an attempt's timeout.
func (c *Client) getTxn(ctx context.Context, keys [][]byte, out []KV) error {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(string(k))
	}
	var resp *clientv3.TxnResponse
	var err error
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		resp, err = c.c.Txn(actx).Then(ops...).Commit()
		cancel()
		if err == nil || try >= c.o.Retries || !retryable(ctx, err) {
			break
		}
		if err := backoff(ctx, try+1); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if len(resp.Responses) != len(keys) {
		return fmt.Errorf("a transaction of %d reads answered %d responses", len(keys), len(resp.Responses))
	}
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		if rr == nil {
			return fmt.Errorf("a read answered %T", r.Response)
		}
		out[i] = KV{}
		if len(rr.Kvs) > 0 {
			kv := rr.Kvs[0]
			out[i] = KV{Found: true, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		}
	}
	return nil
}

// readErr names a failed read-back of n keys by its first key.
func (c *Client) readErr(first []byte, n int, err error) error {
	what := fmt.Sprintf("read back of %d keys from %s", n, quoteKey(first, len(first)))
	switch {
	case isAuth(err):
		return fmt.Errorf("%s: %s: %w: %v", c.where(), what, ErrAuth, err)
	case grpcCode(err) == codes.ResourceExhausted:
		return keyErr(first, fmt.Errorf("%w: one key and its value are larger than %d bytes (MaxRecvBytes): %v", ErrTooLarge, c.o.MaxRecvBytes, err))
	case retryable(context.Background(), err):
		return &DialError{Endpoints: c.o.Endpoints, Err: fmt.Errorf("%s, after %d retries: %w", what, c.o.Retries, err)}
	}
	return fmt.Errorf("%s: %s: %w", c.where(), what, err)
}
