package etcdkeys

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// fixture writes n 64-hex keys under a prefix of the test's own and
// returns their fingerprints in key order.
func fixture(t *testing.T, c *clientv3.Client, n int) (prefix string, want []fpstore.Fingerprint) {
	t.Helper()
	prefix = reconciletest.EtcdPrefix(t, c)
	keys := make([]string, n)
	for i := range keys {
		h := reconciletest.FullHex(reconciletest.Key(i))
		keys[i] = prefix + h
		fp, _ := online.ParseHex(h)
		want = append(want, fp)
	}
	reconciletest.EtcdPut(t, c, keys, nil)
	slices.SortFunc(want, func(a, b fpstore.Fingerprint) int { return a.Compare(b) })
	return prefix, want
}

func openSource(t *testing.T, eps []string, prefix string, retries int) *Source {
	t.Helper()
	spec := Spec{Endpoints: eps, Format: etcdkv.KeyFormat{Prefix: prefix, Hex: etcdkv.Hex64}, Page: 100}
	cfg := &online.Config{Target: "etcd://test/?prefix=" + prefix, Retries: retries, Timeout: 5 * time.Second, Plan: memplan.Reconcile(memplan.ReconcileJob{Mem: 64 << 20, Etcd: true}), Samples: 10}
	s, err := Open(context.Background(), spec, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// read reads s whole; during(n) is called after each batch given, with
// the fingerprints given so far.
func read(s *Source, during func(n int)) ([]fpstore.Fingerprint, error) {
	var got []fpstore.Fingerprint
	err := s.Read(context.Background(), &online.ReadStats{}, func(fps []fpstore.Fingerprint) error {
		got = append(got, fps...)
		if during != nil {
			during(len(got))
		}
		return nil
	})
	return got, err
}

// The revision a read is pinned to compacted under it: the read asks to
// be made again (*online.ReadAgainError) while Config.Retries allows,
// then fails with a *SnapshotError naming every revision tried; the
// report lists them, and a read left alone gives every key once.
func TestSourceCompacted(t *testing.T) {
	own := reconciletest.StartOwnEtcd(t, false)
	prefix, want := fixture(t, own.Client, 10_000)
	s := openSource(t, []string{own.Endpoint}, prefix, 1)
	once := func(n int) {
		if n == 4096 { // the first batch: pages are left to read
			reconciletest.EtcdCompact(t, own.Client)
		}
	}
	_, err := read(s, once)
	var again *online.ReadAgainError
	if !errors.As(err, &again) || !errors.Is(err, ErrCompacted) {
		t.Fatalf("the first read compacted: %v", err)
	}
	_, err = read(s, once)
	var se *SnapshotError
	if !errors.As(err, &se) || len(se.Revisions) != 2 || se.Revisions[0] >= se.Revisions[1] || !strings.Contains(err.Error(), "compacted before it finished") {
		t.Fatalf("the second read compacted, with one retry: %v", err)
	}
	t.Log(err)
	var rep report.Report
	s.Report(&rep)
	if !slices.Equal(rep.Etcd.Compacted, se.Revisions) {
		t.Fatalf("report: compacted %v, error %v", rep.Etcd.Compacted, se.Revisions)
	}

	s = openSource(t, []string{own.Endpoint}, prefix, 1)
	if _, err := read(s, once); !errors.As(err, &again) {
		t.Fatalf("compacted: %v", err)
	}
	got, err := read(s, nil)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("the read made again: %d fingerprints (%v), want %d", len(got), err, len(want))
	}
	s.Report(&rep)
	if e := rep.Etcd; len(e.Compacted) != 1 || e.Revision <= e.Compacted[0] || e.Keys != 10_000 {
		t.Fatalf("report after a read made again: %+v", e)
	}
}

// The leader of the 3-member cluster killed (SIGKILL) mid-read: the
// client fails over, and the read gives every key once, in order, at its
// one revision.
func TestSourceMemberKilledMidRead(t *testing.T) {
	eps := reconciletest.EtcdCluster(t)
	c := reconciletest.EtcdClient(t, eps)
	prefix, want := fixture(t, c, 20_000)
	s := openSource(t, eps, prefix, 3)
	t.Cleanup(func() { reconciletest.EtcdRestart(t, eps) })
	var victim string
	got, err := read(s, func(n int) {
		if victim == "" && n >= 4096 {
			victim = reconciletest.EtcdLeader(t, c, eps)
			reconciletest.EtcdKill(t, victim)
		}
	})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("after %s was killed: %d fingerprints (%v), want %d", victim, len(got), err, len(want))
	}
	var rep report.Report
	s.Report(&rep)
	t.Logf("killed %s after 4096 keys; %+v", victim, *rep.Etcd)
}

// A key another writer created first (between the audit and the write)
// keeps its value: Write counts it as existing, Held finds it present and
// counts it apart, naming it; the key that was free is created once.
func TestSourceWriteNeverOverwrites(t *testing.T) {
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	s := openSource(t, eps, p, 1)
	var items []online.Item
	for i := range 2 {
		d := reconciletest.Digest(reconciletest.Key(i))
		fp, _ := online.ParseHex(reconciletest.FPHex(reconciletest.Key(i)))
		items = append(items, online.Item{FP: fp, Full: d, HasFull: true})
	}
	theirs := p + reconciletest.FullHex(reconciletest.Key(0))
	reconciletest.EtcdPut(t, c, []string{theirs}, []string{"theirs"})
	ctx := context.Background()
	if err := s.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	present := make([]bool, len(items))
	if err := s.Held(ctx, items, present); err != nil || !present[0] || !present[1] {
		t.Fatalf("held %v (%v)", present, err)
	}
	var rep report.Report
	s.Report(&rep)
	if e := rep.Etcd; e.Created != 1 || e.Existed != 1 || e.OtherValue != 1 || len(e.OtherValueSamples) != 1 || !strings.Contains(e.OtherValueSamples[0], theirs) {
		t.Fatalf("report: %+v", e)
	}
	got := reconciletest.EtcdGet(t, c, p)
	if got[theirs] != (reconciletest.EtcdKV{Value: "theirs", Version: 1}) || got[p+reconciletest.FullHex(reconciletest.Key(1))] != (reconciletest.EtcdKV{Value: "", Version: 1}) {
		t.Fatalf("after the write: %+v", got)
	}
}
