package etcdkv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/fpstore"
)

type fingerprint = fpstore.Fingerprint

// The leader of the 3-member cluster killed (SIGKILL) mid-scan: the
// client fails over to the others and the scan reads every key once, at
// its one revision.
func TestClusterMemberKilledMidScan(t *testing.T) {
	plainOnly(t, "members killed and elections: the time is the servers'; Scan's and Create's goroutines are raced by the single-member tests")
	eps := cluster(t)
	dir := needKill(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	want := fixture(t, rc, &f, 20000)
	c := dial(t, eps, f.Prefix, func(o *Options) { o.Timeout = 5 * time.Second })
	t.Cleanup(func() { restartMembers(t, dir, eps) })
	s := c.Scan(context.Background(), ScanOptions{Format: f, PageSize: 500})
	var got []Entry
	var victim string
	for s.Next() {
		got = append(got, s.Entry())
		if len(got) == 5000 {
			victim = leader(t, rc, eps)
			killMember(t, dir, victim)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("after %s was killed: %v", victim, err)
	}
	fps := make([]fingerprint, len(got))
	for i, e := range got {
		fps[i] = e.FP
	}
	if !slices.Equal(fps, want) {
		t.Fatalf("%d fingerprints, want %d", len(fps), len(want))
	}
	t.Logf("killed %s after 5000 keys; stats %+v", victim, s.Stats())
}

// The leader killed mid-write, four writers at once: the writes go on
// through the other members (or stop with a *DialError); once the member
// is back a rerun finishes, and every key was written exactly once
// (Version 1) with its value.
func TestClusterMemberKilledMidWrite(t *testing.T) {
	plainOnly(t, "members killed and elections: the time is the servers'; Scan's and Create's goroutines are raced by the single-member tests")
	eps := cluster(t)
	dir := needKill(t)
	rc := raw(t, eps)
	f := KeyFormat{Prefix: testPrefix(t, rc)}
	all := items(t, f, 0, 20000)
	c := dial(t, eps, f.Prefix, func(o *Options) { o.Timeout = 5 * time.Second })
	t.Cleanup(func() { restartMembers(t, dir, eps) })
	ctx := context.Background()

	var written atomic.Int64
	var signalOnce sync.Once
	killNow, finished := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var first CreateStats
	var errs []error
	var wg sync.WaitGroup
	const batch = 500
	next := atomic.Int64{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(batch)) - batch
				if lo >= len(all) {
					return
				}
				st, err := c.Create(ctx, all[lo:min(lo+batch, len(all))], nil)
				mu.Lock()
				first.Add(st)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				if written.Add(int64(st.Created)) >= 6000 {
					signalOnce.Do(func() { close(killNow) })
				}
			}
		}()
	}
	go func() { wg.Wait(); close(finished) }()
	// The kill from the test's goroutine (t.Fatal may not run elsewhere),
	// while the writers go on.
	var victim string
	select {
	case <-killNow:
		victim = leader(t, rc, eps)
		killMember(t, dir, victim)
	case <-finished:
		t.Fatal("the writers finished before 6000 keys were written")
	}
	<-finished
	for _, err := range errs {
		var de *DialError
		if !errors.As(err, &de) {
			t.Fatalf("a write after %s was killed: %v", victim, err)
		}
	}
	t.Logf("killed %s; first run %+v, %d batches failed", victim, first, len(errs))
	restartMembers(t, dir, eps)

	again, err := c.Create(ctx, all, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rerun %+v", again)
	if first.Created+again.Created > len(all) || first.Created+again.Created+first.Ambiguous+again.Ambiguous < len(all) {
		t.Fatalf("created %d then %d (ambiguous %d, %d) of %d", first.Created, again.Created, first.Ambiguous, again.Ambiguous, len(all))
	}
	if third, err := c.Create(ctx, all, nil); err != nil || third.Created != 0 {
		t.Fatalf("a third run: %+v %v", third, err)
	}
	kvs := make([]KV, len(all))
	if err := c.Get(ctx, keysOf(all), kvs); err != nil {
		t.Fatal(err)
	}
	for i, kv := range kvs {
		if !kv.Found || kv.Version != 1 || string(kv.Value) != string(all[i].Value) {
			t.Fatalf("key %d: %+v", i, kv)
		}
	}
	if r, err := rc.Get(ctx, f.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != int64(len(all)) {
		t.Fatalf("%v keys under the prefix: %v", r, err)
	}
}

// The whole cluster stopped: a scan and a write end, after their retries,
// in a *DialError that names every endpoint.
func TestClusterStopped(t *testing.T) {
	plainOnly(t, "members killed and elections: the time is the servers'; Scan's and Create's goroutines are raced by the single-member tests")
	eps := cluster(t)
	dir := needKill(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	fixture(t, rc, &f, 100)
	c := dial(t, eps, f.Prefix, func(o *Options) { o.Timeout = time.Second; o.Retries = 2 })
	t.Cleanup(func() { restartMembers(t, dir, eps) })
	for _, e := range eps {
		killMember(t, dir, e)
	}
	ctx := context.Background()
	s := c.Scan(ctx, ScanOptions{Format: f})
	for s.Next() {
	}
	_, werr := c.Create(ctx, items(t, f, 1000, 10), nil)
	for _, err := range []error{s.Err(), werr} {
		var de *DialError
		if !errors.As(err, &de) || !errors.Is(err, ErrUnreachable) || strings.Join(de.Endpoints, ",") != strings.Join(eps, ",") {
			t.Fatalf("a stopped cluster: %v", err)
		}
		t.Log(err)
	}
}
