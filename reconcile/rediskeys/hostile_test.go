package rediskeys_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
)

// A broken or hostile Redis (issue 27 item 3): a reply that declares
// gigabytes, a string that drips, a cursor that never ends, garbage. Run
// against the fake server (fakeredis_test.go) must end by itself, with a
// typed error, having allocated little: it used to die of "fatal error:
// runtime: out of memory" on "*2000000000" (go-redis made a []string of
// the declared count), grow to gigabytes on a dripped "$4000000000", and
// run forever on a cursor that never came back to 0.

// allocLimit is what a run against a hostile server may allocate in all
// (runtime.MemStats.TotalAlloc, which counts every allocation, freed or
// not: no sampling to miss a peak). The servers below claim gigabytes.
const allocLimit = 256 << 20

// hostileIndex writes an index of n SHA-256 fingerprints, and returns it
// with the key names (fp:<32 hex digits>) of the fingerprints, in order.
func hostileIndex(t *testing.T, n int) (string, []string) {
	t.Helper()
	fps := make([]fpstore.Fingerprint, n)
	for i := range fps {
		d := sha256.Sum256([]byte("key" + strconv.Itoa(i)))
		fp, _ := online.ParseHex(fmt.Sprintf("%x", d[:16]))
		fps[i] = fp
	}
	slices.SortFunc(fps, func(a, b fpstore.Fingerprint) int { return a.Compare(b) })
	path := filepath.Join(t.TempDir(), "truth.fpx")
	reconciletest.WriteIndex(t, path, "sha256", fps)
	names := make([]string, n)
	for i, fp := range fps {
		names[i] = "fp:" + fp.String()
	}
	return path, names
}

// hostileRun runs Run against f with the URL's query (the address is
// f's) and what mod changes; it fails the test unless Run ends by itself
// (within minutes, where a fixed run takes a second: no timing is
// asserted) having allocated less than allocLimit. Timeout 2 s, one retry.
func hostileRun(t *testing.T, f *fakeRedis, index, query string, mod func(*reconcile.Options)) (*reconcile.Report, error) {
	t.Helper()
	tg, err := reconcile.ParseURL("redis://" + f.addr + "/" + query)
	if err != nil {
		t.Fatal(err)
	}
	o := reconcile.Options{Index: index, Target: tg, Timeout: 2 * time.Second, Retries: 1, Backoff: 10 * time.Millisecond,
		TmpDir: t.TempDir(), Mem: 64 << 20, Samples: 3}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := reconcile.Run(ctx, o)
	runtime.ReadMemStats(&after)
	if ctx.Err() != nil {
		t.Fatalf("Run did not end by itself in 3 minutes (it ended with %v)", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > allocLimit {
		t.Errorf("Run allocated %d MiB against a server that claims more (limit %d MiB); it ended with %v", got>>20, allocLimit>>20, err)
	}
	return rep, err
}

// wantReplyError fails unless err is a *ReplyError of the problem, from
// f, answering cmd.
func wantReplyError(t *testing.T, err error, f *fakeRedis, problem reconcile.ReplyProblem, cmd string) *reconcile.ReplyError {
	t.Helper()
	re, ok := errAs[*reconcile.ReplyError](err)
	if !ok {
		t.Fatalf("Run ended with %v, want a *ReplyError", err)
	}
	if re.Problem != problem || re.Server != f.addr || re.Command != cmd {
		t.Fatalf("ReplyError %+v, want problem %d from %s answering %s\n%v", re, problem, f.addr, cmd, err)
	}
	for _, s := range []string{f.addr, cmd} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%q does not name %q", err, s)
		}
	}
	return re
}

// scanHead is the start of a SCAN reply, up to its page's array header.
const scanHead = "*2\r\n$1\r\n0\r\n"

// Each command Run reads, answered with a reply past a bound: the error
// names the server and the command, and nothing near the declared size
// is allocated.
func TestHostileRedisReplies(t *testing.T) {
	drip := func(header string) func(c *fakeConn, _ []string) bool {
		return func(c *fakeConn, _ []string) bool { return c.raw(header) && c.drip('x', 20*time.Millisecond) }
	}
	flood := func(head string) func(c *fakeConn, _ []string) bool {
		return func(c *fakeConn, _ []string) bool {
			if !c.raw(head) {
				return false
			}
			chunk := strings.Repeat("a", 64<<10)
			for sent := 0; sent < 1<<30; sent += len(chunk) {
				if !c.raw(chunk) {
					return false
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		name    string
		query   string // the URL's path and query
		cmd     string // the command answered badly
		hook    func(c *fakeConn, args []string) bool
		problem reconcile.ReplyProblem
		limit   int64 // the bound said, when not the reply budget
		probe   bool  // reconcile.Options.Probe
	}{
		// The issue's: the page's header claims 2e9 elements (32 GB as a
		// []string). The old code dies of it; the next one (1.6 GB, which
		// the old code allocates and survives) shows the same.
		{"scan-array-2e9", "0?match=fp:*", "SCAN", drip(scanHead + "*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"scan-array-1e8", "0?match=fp:*", "SCAN", drip(scanHead + "*100000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		// A key of 4 GB, sent a byte at a time: go-redis made a []byte of
		// 4 GB and filled it until the i/o timeout.
		{"scan-bulk-4e9", "0?match=fp:*", "SCAN", drip(scanHead + "*1\r\n$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		{"scan-bulk-just-over", "0?match=fp:*", "SCAN", drip(scanHead + "*1\r\n$1048577\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		// A status line that never ends: go-redis grows a buffer for it.
		{"scan-endless-line", "0?match=fp:*", "SCAN", flood("*2\r\n+"), reconcile.LineTooLong, redisconn.MaxLine, false},
		{"scan-garbage-type", "0?match=fp:*", "SCAN", drip(scanHead + "?what\r\n"), reconcile.NotRESP, 0, false},
		{"scan-deep", "0?match=fp:*", "SCAN", drip(scanHead + strings.Repeat("*1\r\n", 200)), reconcile.ReplyTooDeep, redisconn.MaxDepth, false},
		{"sscan-array", "0?set=seen", "SSCAN", drip(scanHead + "*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"sscan-bulk", "0?set=seen", "SSCAN", drip(scanHead + "*1\r\n$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		{"info-bulk", "0?match=fp:*", "INFO", drip("$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		{"scard-array", "0?set=seen", "SCARD", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"dbsize-array", "0?match=fp:*", "DBSIZE", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"dbsize-bulk", "0?match=fp:*", "DBSIZE", drip("$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		{"type-garbage", "0?set=seen", "TYPE", drip("\x00\x01\x02\r\n"), reconcile.NotRESP, 0, false},
		// At connect: go-redis's handshake.
		{"hello-array", "0?match=fp:*", "HELLO", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"ping-line", "0?match=fp:*", "PING", flood("+"), reconcile.LineTooLong, redisconn.MaxLine, false},
		// A Redis Cluster's slot map, and a master's SCAN.
		{"cluster-slots-array", "?match=fp:*&cluster=1", "CLUSTER SLOTS", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"cluster-info-bulk", "?match=fp:*&cluster=1", "CLUSTER INFO", drip("$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		{"cluster-scan-array", "?match=fp:*&cluster=1", "SCAN", drip(scanHead + "*2000000000\r\n"), reconcile.ReplyTooLarge, 0, false},
		{"cluster-scan-bulk", "?match=fp:*&cluster=1", "SCAN", drip(scanHead + "*1\r\n$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, false},
		// Probes, and the names sampled before a probe to learn their width.
		{"smismember-array", "0?set=seen&hex=32", "SMISMEMBER", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, true},
		{"exists-bulk", "0?match=fp:*&hex=32", "EXISTS", drip("$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, true},
		{"srandmember-array", "0?set=seen", "SRANDMEMBER", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, true},
		{"sample-scan-bulk", "0?match=fp:*", "SCAN", drip(scanHead + "*1\r\n$4000000000\r\n"), reconcile.BulkTooLong, redisconn.MaxBulk, true},
		{"cluster-smismember-array", "?set=seen&hex=32&cluster=1", "SMISMEMBER", drip("*2000000000\r\n"), reconcile.ReplyTooLarge, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			index, names := hostileIndex(t, 100)
			f := newFakeRedis(t)
			f.keys, f.set = names[:90], hexOf(names[:90])
			f.cluster = strings.Contains(c.query, "cluster=1")
			f.on(c.cmd, c.hook)
			_, err := hostileRun(t, f, index, c.query, func(o *reconcile.Options) { o.Probe = c.probe })
			re := wantReplyError(t, err, f, c.problem, c.cmd)
			t.Log(err)
			maxReply, _ := memplan.ReplyBudget(64 << 20)
			if limit := cmp.Or(c.limit, maxReply); c.problem != reconcile.NotRESP && re.Limit != limit {
				t.Fatalf("the bound said is %d, want %d: %v", re.Limit, limit, err)
			}
			if n := f.callsOf(c.cmd); n != 1 {
				t.Fatalf("%s was sent %d times: a reply past the bounds is not worth a retry", c.cmd, n)
			}
		})
	}
}

// hexOf strips the fp: prefix: a set's members.
func hexOf(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimPrefix(n, "fp:")
	}
	return out
}

// The fake server, behaving: Run reads its keys, set and one-master
// cluster through the guarded connections and counts right. (What the
// hostile tests stop is not the fake's own failing.)
func TestFakeRedisBehaving(t *testing.T) {
	for _, query := range []string{"0?match=fp:*&count=7", "0?set=seen&count=7", "?match=fp:*&cluster=1&count=7", "?set=seen&cluster=1"} {
		t.Run(query, func(t *testing.T) {
			index, names := hostileIndex(t, 100)
			f := newFakeRedis(t)
			f.keys = append(names[:90:90], "fp:not-a-fingerprint", "fp:"+strings.Repeat("ab", 32))
			f.set = hexOf(f.keys)
			f.cluster = strings.Contains(query, "cluster=1")
			rep, err := hostileRun(t, f, index, query, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c := rep.Counts; c.Both != 90 || c.OnlyOffline != 10 || c.OnlyOnline != 1 || rep.Online.Bad != 1 {
				t.Fatalf("counts %+v, bad %d", c, rep.Online.Bad)
			}
		})
	}
	// With a password and a database (AUTH, SELECT on go-redis's and
	// respPool's connections), applying the missing keys.
	index, names := hostileIndex(t, 100)
	f := newFakeRedis(t)
	f.keys = names[:90]
	rep, err := hostileRun(t, f, index, "3?match=fp:*&hex=32", func(o *reconcile.Options) { o.Password, o.Apply = "pw", true })
	if err != nil || rep.Apply == nil || rep.Apply.Written != 10 || f.callsOf("SET") != 10 || f.callsOf("AUTH") < 2 || f.callsOf("SELECT") < 2 {
		t.Fatalf("apply: %v, %+v, SET %d, AUTH %d, SELECT %d", err, rep.Apply, f.callsOf("SET"), f.callsOf("AUTH"), f.callsOf("SELECT"))
	}
}

// A cursor that never comes back to 0: pages of new keys, of the same
// keys, of none; on a server, a set, a cluster's master. The scan stops
// at its bound (scanBound of what DBSIZE or SCARD said) with a
// *ScanBoundError; the old code ran until killed. A store that grows
// within the bound is read to the end.
func TestHostileRedisEndlessScan(t *testing.T) {
	reconciletest.PlainOnly(t, "a bound on replies; the guard runs under -race in the other hostile tests")
	var n int
	newKeys := func(c *fakeConn, args []string) bool {
		keys := make([]string, 1000)
		for i := range keys {
			keys[i] = fmt.Sprintf("fp:%032x", n)
			n++
		}
		return c.raw(reconciletest.Page(1, keys))
	}
	same := make([]string, 1000)
	for i := range same {
		same[i] = fmt.Sprintf("fp:%032x", i)
	}
	for _, c := range []struct {
		name, query, cmd string
		hook             func(c *fakeConn, args []string) bool
		calls            bool // stopped by the calls, not the values
	}{
		{"keys-new", "0?match=fp:*", "SCAN", newKeys, false},
		{"keys-same", "0?match=fp:*", "SCAN", func(c *fakeConn, args []string) bool { return c.raw(reconciletest.Page(1, same)) }, false},
		{"keys-empty", "0?match=fp:*", "SCAN", func(c *fakeConn, args []string) bool { return c.raw(reconciletest.Page(7, nil)) }, true},
		{"set-new", "0?set=seen", "SSCAN", newKeys, false},
		{"set-empty", "0?set=seen&count=100000", "SSCAN", func(c *fakeConn, args []string) bool { return c.raw(reconciletest.Page(7, nil)) }, true},
		{"cluster-new", "?match=fp:*&cluster=1", "SCAN", newKeys, false},
		{"cluster-empty", "?match=fp:*&cluster=1&count=100000", "SCAN", func(c *fakeConn, args []string) bool { return c.raw(reconciletest.Page(7, nil)) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			index, names := hostileIndex(t, 100)
			f := newFakeRedis(t)
			f.keys, f.set = names[:90], hexOf(names[:90])
			f.cluster = strings.Contains(c.query, "cluster=1")
			f.on(c.cmd, c.hook)
			_, err := hostileRun(t, f, index, c.query, nil)
			be, ok := errAs[*reconcile.ScanBoundError](err)
			if !ok {
				t.Fatalf("Run ended with %v, want a *ScanBoundError", err)
			}
			t.Log(err)
			counted := map[string]string{"SCAN": "DBSIZE", "SSCAN": "SCARD"}[c.cmd]
			if be.Command != c.cmd || be.Counted != counted || be.Expected != 90 || be.Server != f.addr {
				t.Fatalf("%+v", be)
			}
			if c.calls != (be.Calls > be.MaxCalls) || !c.calls && be.Values <= be.MaxValues {
				t.Fatalf("stopped at %d values in %d calls, bounds %d and %d", be.Values, be.Calls, be.MaxValues, be.MaxCalls)
			}
			if got := f.callsOf(c.cmd); int64(got) != be.Calls {
				t.Fatalf("%d calls said, %d received", be.Calls, got)
			}
			for _, s := range []string{counted + " 90", strconv.FormatInt(be.MaxValues, 10), strconv.FormatInt(be.MaxCalls, 10), f.addr} {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("%q does not say %q", err, s)
				}
			}
		})
	}

	// DBSIZE said 10, the scan finds 60000 (the store grew): within the
	// bound, read to the end.
	index, _ := hostileIndex(t, 100)
	f := newFakeRedis(t)
	for i := range 60000 {
		f.keys = append(f.keys, fmt.Sprintf("fp:%032x", i))
	}
	f.on("DBSIZE", func(c *fakeConn, args []string) bool { return c.raw(":10\r\n") })
	rep, err := hostileRun(t, f, index, "0?match=fp:*", nil)
	if err != nil || rep.Online.Values != 60000 {
		t.Fatalf("a store that grew: %v, %d values", err, rep.Online.Values)
	}
}

// A reply cut short by a reset (TCP RST) at any point of it: a network
// failure, retried from the same cursor, and the run is right; when every
// attempt is cut, an error (not a *ReplyError: nothing was declared
// wrong) after the retries. Resets were handled before the guard; this
// says the guard keeps it so (its state is per connection).
func TestHostileRedisResets(t *testing.T) {
	for _, c := range []struct {
		name, query, cmd, cut string
	}{
		{"scan-in-header", "0?match=fp:*", "SCAN", "*2\r\n$1\r\n0\r\n*9"},
		{"scan-in-string", "0?match=fp:*", "SCAN", "*2\r\n$1\r\n0\r\n*1\r\n$35\r\nfp:0123"},
		{"scan-before-crlf", "0?match=fp:*", "SCAN", "*2\r\n$1\r\n0\r\n*1\r\n$3\r\nabc"},
		{"sscan-in-header", "0?set=seen", "SSCAN", "*2\r\n$"},
		{"dbsize", "0?match=fp:*", "DBSIZE", ":"},
		{"cluster-scan", "?match=fp:*&cluster=1", "SCAN", "*2\r\n$1\r\n0\r\n*1\r\n$35\r\nfp:0123"},
	} {
		t.Run(c.name, func(t *testing.T) {
			index, names := hostileIndex(t, 100)
			f := newFakeRedis(t)
			f.keys, f.set = names[:90], hexOf(names[:90])
			f.cluster = strings.Contains(c.query, "cluster=1")
			var cut once
			f.on(c.cmd, func(fc *fakeConn, args []string) bool {
				if cut.first() {
					return fc.raw(c.cut) && fc.reset()
				}
				return false
			})
			rep, err := hostileRun(t, f, index, c.query, nil)
			if err != nil {
				t.Fatalf("one reply cut short: %v", err)
			}
			// (Retried by go-redis, or by Read: either way asked again.)
			if cnt := rep.Counts; cnt.Both != 90 || cnt.OnlyOffline != 10 || cnt.OnlyOnline != 0 || f.callsOf(c.cmd) < 2 {
				t.Fatalf("after a reset: %+v, %s sent %d times", cnt, c.cmd, f.callsOf(c.cmd))
			}

			// Every attempt cut: an error after the retries (1), in bounded time.
			f.on(c.cmd, func(fc *fakeConn, args []string) bool { return fc.raw(c.cut) && fc.reset() })
			_, err = hostileRun(t, f, index, c.query, nil)
			if _, ok := errAs[*reconcile.ReplyError](err); err == nil || ok {
				t.Fatalf("every reply cut short: %v", err)
			}
		})
	}
}

// Apply's pipelines (respPool, its own RESP reader) answered past the
// bounds: a *WriteError whose cause is the *ReplyError, and the batch is
// not retried. The reader recursed into nested arrays and looped over a
// declared count: "*1\r\n" a million times deep overflowed its stack.
func TestHostileRedisApply(t *testing.T) {
	for _, c := range []struct {
		name, query, cmd, reply string
		problem                 reconcile.ReplyProblem
	}{
		{"set-array", "0?match=fp:*&hex=32", "SET", "*2000000000\r\n", reconcile.ReplyTooLarge},
		{"set-deep", "0?match=fp:*&hex=32", "SET", strings.Repeat("*1\r\n", 100_000), reconcile.ReplyTooDeep},
		{"set-bulk", "0?match=fp:*&hex=32", "SET", "$4000000000\r\n", reconcile.BulkTooLong},
		{"set-garbage", "0?match=fp:*&hex=32", "SET", "%1\r\n", reconcile.NotRESP},
		{"sadd-array", "0?set=seen&hex=32", "SADD", "*2000000000\r\n", reconcile.ReplyTooLarge},
		{"select-deep", "3?match=fp:*&hex=32", "SELECT", strings.Repeat("*1\r\n", 100_000), reconcile.ReplyTooDeep},
	} {
		t.Run(c.name, func(t *testing.T) {
			index, names := hostileIndex(t, 100)
			f := newFakeRedis(t)
			f.keys, f.set = names[:90], hexOf(names[:90])
			var first once
			f.on(c.cmd, func(fc *fakeConn, args []string) bool {
				if fc.seen["HELLO"] > 0 {
					return false // go-redis's connections select well; respPool's get this
				}
				if first.first() {
					return fc.raw(c.reply) && fc.drip(' ', 20*time.Millisecond)
				}
				return true // the rest of the pipeline: no answer
			})
			rep, err := hostileRun(t, f, index, c.query, func(o *reconcile.Options) { o.Apply = true })
			we, ok := errAs[*reconcile.WriteError](err)
			if !ok {
				t.Fatalf("Run ended with %v, want a *WriteError", err)
			}
			t.Log(err)
			re, ok := errAs[*reconcile.ReplyError](we.Err)
			if !ok || re.Problem != c.problem || re.Server != f.addr || re.Command != c.cmd {
				t.Fatalf("WriteError's cause %#v, want problem %d from %s answering %s", we.Err, c.problem, f.addr, c.cmd)
			}
			if rep.Apply == nil || rep.Apply.Retries != 0 || rep.Apply.Written != 0 {
				t.Fatalf("apply %+v: a reply past the bounds is not retried", rep.Apply)
			}
		})
	}
}

// A cluster of many masters is scanned on as many at once as the memory
// budget allows (replyBudget: 2 with 64 MiB), each page in flight up to
// a reply's bound; all of them with more memory. Every master is read.
func TestClusterScanStreams(t *testing.T) {
	for _, c := range []struct {
		mem  int64
		want int
	}{{64 << 20, 2}, {1 << 30, 6}} {
		_, streams := memplan.ReplyBudget(c.mem)
		if streams < c.want {
			t.Fatalf("memplan.ReplyBudget(%d) allows %d streams, want at least %d", c.mem, streams, c.want)
		}
		index, names := hostileIndex(t, 600)
		masters := fakeCluster(t, 6, names[:540])
		var mu sync.Mutex
		active, most := 0, 0
		for _, m := range masters {
			m.on("SCAN", func(fc *fakeConn, args []string) bool {
				mu.Lock()
				active++
				most = max(most, active)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // long enough for the others to start, if they may
				mu.Lock()
				active--
				mu.Unlock()
				return false
			})
		}
		tg, err := reconcile.ParseURL("redis://" + masters[0].addr + "/?match=fp:*&cluster=1&count=10")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := reconcile.Run(context.Background(), reconcile.Options{Index: index, Target: tg, Timeout: 10 * time.Second, Retries: 1, Backoff: 10 * time.Millisecond, TmpDir: t.TempDir(), Mem: c.mem})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Counts.Both != 540 || rep.Counts.OnlyOffline != 60 || len(rep.Online.Masters) != 6 {
			t.Fatalf("mem %d: %+v, masters %v", c.mem, rep.Counts, rep.Online.Masters)
		}
		if most > streams {
			t.Fatalf("mem %d: %d masters scanned at once, the budget allows %d", c.mem, most, streams)
		}
		t.Logf("mem %d MiB: at most %d of 6 masters scanned at once (allowed %d)", c.mem>>20, most, streams)
	}
}
