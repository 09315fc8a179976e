package etcdkv

import (
	"context"
	"errors"
	"fmt"

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
}

// Add adds b's figures to s.
func (s *CreateStats) Add(b CreateStats) {
	s.Created += b.Created
	s.Existed += b.Existed
	s.Ambiguous += b.Ambiguous
	s.Txns += b.Txns
	s.Retries += b.Retries
}

// txnOverhead is what a key's compare, put and nested transaction add to
// a request besides the key (twice) and the value: protobuf tags and
// lengths, generously.
const txnOverhead = 64

// Create writes items, each only if its key does not exist yet
// (CreateRevision == 0, etcd's compare-and-create): an existing value is
// never overwritten, so a rerun writes nothing. created[i] (when created
// is not nil; len(items)) says whether items[i] was written by this call.
//
// Keys go several to a transaction, each in a nested transaction of its
// own: If(CreateRevision(k) == 0) Then(Put(k, v)), within the server's
// MaxTxnOps and MaxRequestBytes (measured against etcd 3.4 here, 10^4 keys
// at 4 connections: 64 keys a transaction were 21× the keys per second of
// one key a transaction; see create_bench_test.go). A transaction whose
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
	// etcd 3.4 refuses a transaction of exactly --max-txn-ops nested
	// transactions (128 at its default; 127 pass, and 128 plain reads do):
	// one fewer.
	perTxn := max(1, c.o.MaxTxnOps-1)
	for lo := 0; lo < len(items); {
		hi, size := lo, 0
		for hi < len(items) && hi-lo < perTxn {
			n := 2*len(items[hi].Key) + len(items[hi].Value) + txnOverhead
			if hi > lo && size+n > c.o.MaxRequestBytes {
				break
			}
			size += n
			hi++
		}
		if size > c.o.MaxRequestBytes {
			return st, keyErr(items[lo].Key, fmt.Errorf("%w: %d bytes with its value, over %d (MaxRequestBytes)", ErrTooLarge, size, c.o.MaxRequestBytes))
		}
		var out []bool
		if created != nil {
			out = created[lo:hi]
		}
		if err := c.createTxn(ctx, items[lo:hi], out, &st); err != nil {
			return st, err
		}
		lo = hi
	}
	return st, nil
}

// createTxn commits one transaction of nested compare-and-creates.
func (c *Client) createTxn(ctx context.Context, items []Item, created []bool, st *CreateStats) error {
	ops := make([]clientv3.Op, len(items))
	for i, it := range items {
		k := string(it.Key)
		ops[i] = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(k, string(it.Value))}, nil)
	}
	lost := false
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		resp, err := c.c.Txn(actx).Then(ops...).Commit()
		cancel()
		if err == nil {
			st.Txns++
			if len(resp.Responses) != len(items) {
				return fmt.Errorf("%s: a transaction of %d creates answered %d responses", c.where(), len(items), len(resp.Responses))
			}
			for i, r := range resp.Responses {
				t := r.GetResponseTxn()
				if t == nil {
					return fmt.Errorf("%s: a nested transaction answered %T", c.where(), r.Response)
				}
				if created != nil {
					created[i] = t.Succeeded
				}
				if t.Succeeded {
					st.Created++
				} else {
					st.Existed++
					if lost {
						st.Ambiguous++
					}
				}
			}
			return nil
		}
		if try >= c.o.Retries || !retryable(ctx, err) {
			return c.writeErr(items, try, err)
		}
		lost = true
		st.Retries++
		if err := backoff(ctx, try+1); err != nil {
			return err
		}
	}
}

// writeErr names a failed transaction by its first key.
func (c *Client) writeErr(items []Item, tries int, err error) error {
	switch {
	case errors.Is(rpctypes.Error(err), rpctypes.ErrRequestTooLarge), grpcCode(err) == codes.ResourceExhausted:
		return keyErr(items[0].Key, fmt.Errorf("%w (the server's --max-request-bytes is below MaxRequestBytes): %v", ErrTooLarge, err))
	case retryable(context.Background(), err):
		return &DialError{Endpoints: c.o.Endpoints, Err: fmt.Errorf("create of %d keys from %s, after %d retries: %w", len(items), quoteKey(items[0].Key, len(items[0].Key)), tries, err)}
	}
	return fmt.Errorf("%s: create of %d keys from %s: %w", c.where(), len(items), quoteKey(items[0].Key, len(items[0].Key)), err)
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
	n := c.o.MaxTxnOps
	for lo := 0; lo < len(keys); {
		hi := min(lo+n, len(keys))
		err := c.getTxn(ctx, keys[lo:hi], out[lo:hi])
		if err != nil && grpcCode(err) == codes.ResourceExhausted && hi-lo > 1 {
			n = max(1, (hi-lo)/2)
			continue
		}
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

func (c *Client) getTxn(ctx context.Context, keys [][]byte, out []KV) error {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(string(k))
	}
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		resp, err := c.c.Txn(actx).Then(ops...).Commit()
		cancel()
		if err == nil {
			if len(resp.Responses) != len(keys) {
				return fmt.Errorf("%s: a transaction of %d reads answered %d responses", c.where(), len(keys), len(resp.Responses))
			}
			for i, r := range resp.Responses {
				rr := r.GetResponseRange()
				if rr == nil {
					return fmt.Errorf("%s: a read answered %T", c.where(), r.Response)
				}
				out[i] = KV{}
				if len(rr.Kvs) > 0 {
					kv := rr.Kvs[0]
					out[i] = KV{Found: true, Value: kv.Value, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
				}
			}
			return nil
		}
		if grpcCode(err) == codes.ResourceExhausted || try >= c.o.Retries || !retryable(ctx, err) {
			if grpcCode(err) == codes.ResourceExhausted {
				return err
			}
			if retryable(context.Background(), err) {
				return &DialError{Endpoints: c.o.Endpoints, Err: fmt.Errorf("read back of %d keys from %s, after %d retries: %w", len(keys), quoteKey(keys[0], len(keys[0])), try, err)}
			}
			return fmt.Errorf("%s: read back of %d keys from %s: %w", c.where(), len(keys), quoteKey(keys[0], len(keys[0])), err)
		}
		if err := backoff(ctx, try+1); err != nil {
			return err
		}
	}
}
