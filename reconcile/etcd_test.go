package reconcile

import (
	"context"
	"errors"
	"fmt"
	"github.com/fpdedup/fpdedup/ingest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// compactingSource compacts the etcd member under the first reads of the
// source it wraps, once each has given its first batch.
type compactingSource struct {
	online.Source
	c     *clientv3.Client
	times int // reads to compact under
	reads int
}

func (s *compactingSource) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	s.reads++
	first := s.reads <= s.times
	return s.Source.Read(ctx, st, func(fps []fpstore.Fingerprint) error {
		if first {
			first = false
			p, err := s.c.Put(ctx, "/fpdedup-test-compact-marker", "x")
			if err != nil {
				return err
			}
			if _, err := s.c.Compact(ctx, p.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				return err
			}
		}
		return emit(fps)
	})
}

// A revision compacted under the audit: the comparison is thrown away and
// made again from the start at a new revision, its counts those of the
// last one alone; compacted once more than --retries allows, the run fails
// naming every revision tried.
func TestEtcdCompareAgainAfterCompaction(t *testing.T) {
	reconciletest.PlainOnly(t, "a server of its own compacted and waited for; the read runs under -race in etcdkeys")
	own := reconciletest.StartOwnEtcd(t, false)
	d := reconciletest.NewDataset(t, 20_000)
	p := "/dedupe/sha256/"
	var keys []string
	for _, k := range d.OnlineKeys() {
		keys = append(keys, p+reconciletest.FullHex(k))
	}
	reconciletest.EtcdPut(t, own.Client, keys, nil)
	for _, c := range []struct {
		compactions int
		fail        bool
	}{{1, false}, {2, false}, {3, true}} {
		t.Run(fmt.Sprint(c.compactions), func(t *testing.T) {
			tg, err := ParseURL(reconciletest.EtcdURL([]string{own.Endpoint}, p, "page=100"))
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Index: d.Index, Target: tg, Retries: 2, Timeout: 5 * time.Second, Batch: 100, Conns: 1,
				Mem: 256 << 20, TmpDir: t.TempDir(), Threads: 1, Samples: 10}
			if err := o.check(); err != nil {
				t.Fatal(err)
			}
			rep := &Report{}
			cfg := o.config(nil)
			x, err := openIndex(&o, rep)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			ctx := context.Background()
			src, err := open(ctx, &o, cfg, ingest.RecordOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			diffs, err := compare(ctx, &o, cfg, x, &compactingSource{Source: src, c: own.Client, times: c.compactions}, rep)
			src.(online.Reporter).Report(rep)
			if c.fail {
				var se *SnapshotError
				if err == nil || !errors.As(err, &se) || len(se.Revisions) != 3 || !strings.Contains(err.Error(), "started 3 times") {
					t.Fatalf("compacted 3 times with 2 retries: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer diffs.Close()
			if rep.Counts.Both != 18_000 || rep.Counts.OnlyOffline != 2_000 || rep.Counts.OnlyOnline != 200 || rep.Online.Values != 18_200 {
				t.Fatalf("after %d compactions: %+v, %d values", c.compactions, rep.Counts, rep.Online.Values)
			}
			if e := rep.Etcd; len(e.Compacted) != c.compactions || e.Revision <= e.Compacted[len(e.Compacted)-1] {
				t.Fatalf("etcd report: %+v", e)
			}
		})
	}
}
