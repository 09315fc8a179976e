package etcdkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/fpstore"
)

// fixture writes n fingerprint keys under a new prefix and returns their
// fingerprints, sorted.
func fixture(t *testing.T, rc *clientv3.Client, f *KeyFormat, n int) []fpstore.Fingerprint {
	t.Helper()
	f.Prefix = testPrefix(t, rc)
	kvs := map[string]string{}
	var fps []fpstore.Fingerprint
	for i := range n {
		d := digest(i)
		kvs[string(f.Append(nil, d[:]))] = fmt.Sprintf(`{"i":%d}`, i)
		fps = append(fps, fpstore.FromBytes(d[:]))
	}
	putAll(t, rc, kvs)
	slices.SortFunc(fps, fpstore.Fingerprint.Compare)
	return fps
}

// scanAll reads a whole scan.
func scanAll(t *testing.T, s *Scanner, each func(Entry)) []fpstore.Fingerprint {
	t.Helper()
	var got []fpstore.Fingerprint
	for s.Next() {
		e := s.Entry()
		got = append(got, e.FP)
		if each != nil {
			each(e)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every fingerprint key comes back once, in order, whatever the page size
// and the split; the bad keys under the prefix are counted and sampled,
// never yielded; a hex=64 key that repeats the first 128 bits of the key
// before it is a repeat; leased keys are counted with their shortest TTL.
func TestScan(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	want := fixture(t, rc, &f, 3000)
	ctx := context.Background()
	h := fmt.Sprintf("%032x", 0)
	bad := map[string]string{
		f.Prefix + strings.ToUpper(want[5].String()) + h: "upper",
		f.Prefix + want[6].String():                      "hex32 under hex=64",
		f.Prefix + "zz":                                  "text",
		f.Prefix + "\xff\xfe" + h + h[2:]:                "invalid UTF-8",
		f.Prefix:                                         "the prefix itself",
		f.Prefix + strings.Repeat("k", 64<<10):           "64 KiB key",
	}
	putAll(t, rc, bad)
	// The same first 128 bits as want[7], another tail: a repeat.
	putAll(t, rc, map[string]string{f.Prefix + want[7].String() + strings.Repeat("f", 32): "repeat"})
	lease, err := rc.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Revoke(ctx, lease.ID)
	leased := map[string]string{}
	for i := 3000; i < 3010; i++ {
		d := digest(i)
		leased[string(f.Append(nil, d[:]))] = "leased"
		want = append(want, fpstore.FromBytes(d[:]))
	}
	putAll(t, rc, leased, clientv3.WithLease(lease.ID))
	// A bad key bound to a lease: bad, not one of the leased keys (those
	// are keys of ours that vanish by design).
	badLeased := f.Prefix + "leased-but-no-fingerprint"
	putAll(t, rc, map[string]string{badLeased: "x"}, clientv3.WithLease(lease.ID))
	bad[badLeased] = "leased, not a fingerprint"
	slices.SortFunc(want, fpstore.Fingerprint.Compare)

	c := dial(t, eps, f.Prefix, nil)
	for _, tc := range []struct {
		page   int
		values bool
		parts  int
	}{{10000, false, 1}, {1000, true, 16}, {100, false, 256}, {7, false, 4096}} {
		t.Run(fmt.Sprintf("page=%d,values=%v", tc.page, tc.values), func(t *testing.T) {
			s := c.Scan(ctx, ScanOptions{Format: f, PageSize: tc.page, Values: tc.values, Samples: 3})
			got := scanAll(t, s, func(e Entry) {
				if tc.values != (len(e.Value) > 0) {
					t.Fatalf("values %v, got %q", tc.values, e.Value)
				}
			})
			if !slices.Equal(got, want) {
				t.Fatalf("%d fingerprints, want %d", len(got), len(want))
			}
			st := s.Stats()
			total := int64(len(want) + len(bad) + 1)
			if st.Keys != total || st.Expected != total || st.Fingerprints != int64(len(want)) || st.Repeats != 1 ||
				st.Bad != int64(len(bad)) || len(st.BadSamples) != 3 || st.Parts != tc.parts {
				t.Fatalf("stats %+v", st)
			}
			if st.Leased != 10 || st.Leases != 1 || st.Expired != 0 || st.MinTTL <= 0 || st.MinTTL > 600 {
				t.Fatalf("lease stats %+v", st)
			}
			if st.Rev == 0 || s.Rev() != st.Rev {
				t.Fatalf("revision %d", st.Rev)
			}
			for _, b := range st.BadSamples {
				if len(b.Key) > sampleLen || b.Len < len(b.Key) || !strings.HasPrefix(b.String(), `"`) {
					t.Fatalf("sample %v", b)
				}
			}
		})
	}
}

// Hex=32 keys: the fingerprint is the whole hex.
func TestScanHex32(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{Hex: Hex32}
	want := fixture(t, rc, &f, 500)
	c := dial(t, eps, f.Prefix, nil)
	s := c.Scan(context.Background(), ScanOptions{Format: f, PageSize: 64})
	if got := scanAll(t, s, nil); !slices.Equal(got, want) {
		t.Fatalf("%d fingerprints, want %d", len(got), len(want))
	}
	// The empty prefix (bare hex keys) is a prefix too: Dial checks it.
	dial(t, eps, "", nil)
}

// A scan is a snapshot: keys added and deleted after its first page do not
// show, those deleted still do.
func TestScanOneRevision(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	want := fixture(t, rc, &f, 2000)
	c := dial(t, eps, f.Prefix, nil)
	ctx := context.Background()
	s := c.Scan(ctx, ScanOptions{Format: f, PageSize: 100})
	var got []fpstore.Fingerprint
	for s.Next() {
		got = append(got, s.Entry().FP)
		if len(got) == 10 {
			// Delete everything, then write new keys: the scan must not see it.
			if _, err := rc.Delete(ctx, f.Prefix, clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			kvs := map[string]string{}
			for i := 5000; i < 5500; i++ {
				d := digest(i)
				kvs[string(f.Append(nil, d[:]))] = "later"
			}
			putAll(t, rc, kvs)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d fingerprints, want %d: not one revision", len(got), len(want))
	}
}

// A compaction of the scan's revision mid-scan is a *CompactedError; a new
// scan (at a new revision) then reads everything.
func TestScanCompacted(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	want := fixture(t, rc, &f, 2000)
	c := dial(t, eps, f.Prefix, nil)
	ctx := context.Background()
	s := c.Scan(ctx, ScanOptions{Format: f, PageSize: 100})
	n := 0
	for s.Next() {
		n++
		if n == 50 {
			// A write so that the current revision is past the scan's, then
			// compact up to it: the scan's revision is gone.
			p, err := rc.Put(ctx, f.Prefix+"marker", "x")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rc.Compact(ctx, p.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				t.Fatal(err)
			}
		}
	}
	var ce *CompactedError
	if err := s.Err(); !errors.As(err, &ce) || !errors.Is(err, ErrCompacted) || ce.Rev != s.Rev() || ce.Keys < 50 {
		t.Fatalf("after a compaction: %v", err)
	}
	t.Log(s.Err())
	s = c.Scan(ctx, ScanOptions{Format: f, PageSize: 100})
	if got := scanAll(t, s, nil); !slices.Equal(got, want) || s.Stats().Bad != 1 {
		t.Fatalf("the rescan: %d fingerprints, want %d; %+v", len(got), len(want), s.Stats())
	}
}

// Large values and keys: pages shrink so that none weighs more than
// MaxRecvBytes, and the scan still reads everything.
func TestScanBoundedPages(t *testing.T) {
	plainOnly(t, "page sizes against memory; the scan runs under -race in TestScan")
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	f.Prefix = testPrefix(t, rc)
	ctx := context.Background()
	big := bytes.Repeat([]byte("v"), 1<<20)
	var want []fpstore.Fingerprint
	for i := range 24 {
		d := digest(i)
		if _, err := rc.Put(ctx, string(f.Append(nil, d[:])), string(big)); err != nil {
			t.Fatal(err)
		}
		want = append(want, fpstore.FromBytes(d[:]))
	}
	if _, err := rc.Put(ctx, f.Prefix+strings.Repeat("k", 64<<10), "64 KiB key"); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, fpstore.Fingerprint.Compare)
	const maxRecv = 5 << 20
	c := dial(t, eps, f.Prefix, func(o *Options) { o.MaxRecvBytes = maxRecv })
	s := c.Scan(ctx, ScanOptions{Format: f, PageSize: 100, PageBytes: 2 << 20, Values: true})
	got := scanAll(t, s, func(e Entry) {
		if !bytes.Equal(e.Value, big) {
			t.Fatalf("value of %d bytes", len(e.Value))
		}
	})
	st := s.Stats()
	if !slices.Equal(got, want) || st.Bad != 1 || st.MaxPageBytes > maxRecv || st.Halved == 0 {
		t.Fatalf("%d of %d; stats %+v", len(got), len(want), st)
	}
	t.Logf("stats %+v", st)
}

// Leases that ended after the scan's revision are counted as expired.
func TestScanExpiredLease(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{}
	f.Prefix = testPrefix(t, rc)
	ctx := context.Background()
	l, err := rc.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	d := digest(1)
	if _, err := rc.Put(ctx, string(f.Append(nil, d[:])), "x", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	c := dial(t, eps, f.Prefix, nil)
	rev := mustRev(t, rc)
	if _, err := rc.Revoke(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	s := c.Scan(ctx, ScanOptions{Format: f, Rev: rev})
	if got := scanAll(t, s, nil); len(got) != 1 {
		t.Fatalf("%d keys at revision %d", len(got), rev)
	}
	if st := s.Stats(); st.Leased != 1 || st.Expired != 1 || st.MinTTL != -1 {
		t.Fatalf("stats %+v", st)
	}
}

func mustRev(t *testing.T, rc *clientv3.Client) int64 {
	t.Helper()
	r, err := rc.Get(context.Background(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}
