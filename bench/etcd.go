package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	iunits "github.com/fpdedup/fpdedup/internal/units"
)

// The etcd jobs (issue 45): fpdedup reconcile against a single etcd
// member the run starts, side by side with etcd's own tools and client on
// the same keys, each key a prefix and the SHA-256 of u<i>:d<i%97>:<ts>
// in hex (reconcile/etcdkv's BenchmarkScan keys):
//
//	etcd-audit: EtcdKeys keys under /dedupe/sha256/, the index holding the
//	            same: fpdedup reconcile's audit (one revision, pages of
//	            EtcdPage, merge-join) against one `etcdctl get --prefix
//	            --keys-only` (one response) and etcdctl page by page at the
//	            same page size and one revision (each page a process)
//	etcd-apply: EtcdCreate keys missing under an empty prefix: fpdedup
//	            reconcile --apply --records (compare-and-create, 128 keys a
//	            transaction, EtcdConns connections) against fpdedup-bench
//	            etcd-bare create, the same transactions sent by a bare loop
//	            of the client at the same concurrency
const (
	DefaultEtcdKeys   = 1_000_000
	DefaultEtcdCreate = 100_000
	DefaultEtcdPage   = 10_000
	DefaultEtcdMem    = "256MiB"
	// EtcdConns and EtcdTxn are the apply's concurrency and keys a
	// transaction, both sides: reconcile's default batch and etcd's
	// default --max-txn-ops.
	EtcdConns = 4
	EtcdTxn   = 128

	etcdAuditPrefix = "/dedupe/sha256/"
	etcdApplyPrefix = "/dedupe-apply/sha256/"
	etcdBarePrefix  = "/dedupe-bare/sha256/"
)

// The rows the targets name (targets.go).
const (
	etcdctlPagesTool = "etcdctl get START END --rev R --limit PAGE, page after page"
	etcdBareTool     = "floor: bare clientv3 loop, the same transactions"
)

// EtcdJobs are the etcd jobs (ExtraJobs).
var EtcdJobs = []string{"etcd-audit", "etcd-apply"}

// The etcd jobs' peers: the server they start (not one --peers none
// skips: the jobs measure fpdedup against it) and etcdctl.
const (
	etcdPeer    = "etcd"
	etcdctlPeer = "etcdctl"
)

// etcdState is the etcd jobs' member and files, made once.
type etcdState struct {
	addr, peerAddr, dir string
	client              *clientv3.Client // the bench's own: loads, empties, reads back
	started, loaded     bool
	err                 error
}

func etcdRecord(i int64) string {
	return fmt.Sprintf("u%d:d%d:%d", i, i%97, 1714579200000+i)
}

// etcdKey is the key online holds for a record: the prefix and the
// SHA-256 of the record in lowercase hex.
func etcdKey(prefix, record string) string {
	d := sha256.Sum256([]byte(record))
	return prefix + hex.EncodeToString(d[:])
}

func (b *runner) etcdURL(prefix string) string {
	return fmt.Sprintf("etcd://%s/?prefix=%s&page=%d", b.etcd.addr, prefix, b.o.EtcdPage)
}

// freeAddr is a loopback address the kernel has just given out: the
// rows' commands name the member's address before it starts.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// etcdJobs are the two jobs' specs.
func (b *runner) etcdJobs() []jobSpec {
	if b.etcd == nil {
		b.etcd = &etcdState{dir: b.path("etcd")}
		var err1, err2 error
		b.etcd.addr, err1 = freeAddr()
		b.etcd.peerAddr, err2 = freeAddr()
		b.etcd.err = errors.Join(err1, err2)
	}
	e := b.etcd
	n, nc, page := b.o.EtcdKeys, b.o.EtcdCreate, b.o.EtcdPage
	keys, index := b.path("etcd-keys.txt"), b.path("etcd-keys.fpx")
	create, createIndex := b.path("etcd-create.txt"), b.path("etcd-create.fpx")
	auditReport, applyReport := b.path("etcd-audit.json"), b.path("etcd-apply.json")
	ctlEnv := []string{"ETCDCTL_API=3"}
	ctl := func(args ...string) command {
		return command{argv: append([]string{"etcdctl", "--endpoints=" + e.addr, "--command-timeout=600s"}, args...), env: ctlEnv}
	}
	pages := b.etcdctlPages(etcdAuditPrefix, page)
	pages.env = ctlEnv
	mem := b.o.EtcdMem

	audit := jobSpec{name: "etcd-audit", input: "etcd-keys.txt + etcd-keys.fpx + the member's keys",
		title: fmt.Sprintf("audit of %s keys under %s on a single etcd member (keys only, pages of %d, one revision; fpdedup --mem %s)", countText(n), etcdAuditPrefix, page, mem),
		units: n, unit: "keys", ref: "fpdedup reconcile (audit)",
		rows: []rowSpec{
			{tool: "fpdedup reconcile (audit)", kind: kindFpdedup, needs: []string{etcdPeer}, stats: b.path("stats-etcd-audit.json"),
				cmd:    b.fp(b.path("stats-etcd-audit.json"), "--mem", mem, "reconcile", "-q", "--index", index, "--online", b.etcdURL(etcdAuditPrefix), "--report", auditReport),
				verify: etcdVerifyAudit(auditReport, n, mem)},
			{tool: "etcdctl get --prefix --keys-only (one response)", kind: kindPeer, needs: []string{etcdPeer, etcdctlPeer},
				cmd: ctl("get", etcdAuditPrefix, "--prefix", "--keys-only"),
				verify: func(o outStats, _ map[string]any) (string, *bool) {
					// etcdctl prints a key and a blank line.
					return fmt.Sprintf("%d keys printed", o.Lines/2), truth(o.Lines == 2*n)
				}},
			{tool: etcdctlPagesTool, kind: kindPeer, needs: []string{etcdPeer, etcdctlPeer, "sh"},
				cmd: pages,
				verify: func(o outStats, _ map[string]any) (string, *bool) {
					got := strings.TrimSpace(o.Head)
					return fmt.Sprintf("%s keys read in pages at one revision", got), truth(got == strconv.FormatInt(n, 10))
				}},
		}}
	audit.prep = func(ctx context.Context, j *Job) error {
		if !b.etcdUsable() {
			return nil
		}
		if err := b.etcdStart(ctx); err != nil {
			return err
		}
		if err := b.etcdLoadAudit(ctx, keys, index); err != nil {
			return err
		}
		j.InputBytes = fileSize(keys) + fileSize(index)
		return nil
	}

	bare := command{argv: []string{b.o.Bound, "etcd-bare", "create", "--endpoints", e.addr, "--prefix", etcdBarePrefix,
		"--records", create, "--conns", strconv.Itoa(EtcdConns), "--txn", strconv.Itoa(EtcdTxn)}}
	apply := jobSpec{name: "etcd-apply", input: "etcd-create.txt + etcd-create.fpx",
		title: fmt.Sprintf("--apply of %s keys missing under an empty prefix, compare-and-create, %d keys a transaction, %d connections, on a single etcd member (fpdedup --mem %s)", countText(nc), EtcdTxn, EtcdConns, mem),
		units: nc, unit: "keys", ref: "fpdedup reconcile --apply",
		rows: []rowSpec{
			{tool: "fpdedup reconcile --apply", kind: kindFpdedup, needs: []string{etcdPeer}, stats: b.path("stats-etcd-apply.json"),
				before: b.etcdEmpty(etcdApplyPrefix),
				cmd: b.fp(b.path("stats-etcd-apply.json"), "--mem", mem, "reconcile", "-q", "--index", createIndex, "--records", create,
					"--online", b.etcdURL(etcdApplyPrefix), "--apply", "--batch", strconv.Itoa(EtcdTxn), "--conns", strconv.Itoa(EtcdConns), "--report", applyReport),
				verify: b.etcdVerifyApply(applyReport, etcdApplyPrefix, create, nc, mem)},
			{tool: etcdBareTool, kind: kindFloor, needs: []string{etcdPeer, boundPeer},
				before: b.etcdEmpty(etcdBarePrefix),
				cmd:    bare,
				verify: b.etcdVerifyApply("", etcdBarePrefix, create, nc, "")},
		}}
	apply.prep = func(ctx context.Context, j *Job) error {
		if !b.etcdUsable() {
			return nil
		}
		if err := b.etcdStart(ctx); err != nil {
			return err
		}
		if err := b.etcdRecords(ctx, create, createIndex, nc); err != nil {
			return err
		}
		j.InputBytes = fileSize(create) + fileSize(createIndex)
		return nil
	}
	return []jobSpec{audit, apply}
}

// etcdctlPages is etcdctl reading the prefix page by page at one
// revision, as a client without fpdedup would: each page after the first
// starts at the last key read, so asks page+1 keys and drops that one. It
// prints how many keys it read.
func (b *runner) etcdctlPages(prefix string, page int) command {
	end := prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
	ctl := "etcdctl --endpoints=" + b.etcd.addr + " --command-timeout=600s"
	pf := shellQuote(b.path("etcdctl-page"))
	return sh(fmt.Sprintf(`set -e
rev=$(%[1]s get %[2]s -w json --limit=1 --keys-only | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
start=%[2]s limit=%[4]d keys=0
while :; do
  %[1]s get "$start" %[3]s --keys-only --rev="$rev" --limit="$limit" > %[5]s
  got=$(( $(wc -l < %[5]s) / 2 ))
  [ "$limit" = %[4]d ] || got=$((got - 1))
  keys=$((keys + got))
  [ "$got" -ge %[4]d ] || break
  start=$(tail -n 2 %[5]s | head -n 1)
  limit=%[6]d
done
echo "$keys"`, ctl, shellQuote(prefix), shellQuote(end), page, pf, page+1))
}

// etcdUsable: the server and its client are installed (else the rows say
// so and preparing does nothing).
func (b *runner) etcdUsable() bool { return b.peers[etcdPeer].Status == "ok" }

// etcdFindPeers are etcd (Debian's etcd-server) and etcdctl (etcd-client)
// on PATH.
func etcdFindPeers(ctx context.Context, peers string) (server, ctl *Peer) {
	server = &Peer{Name: etcdPeer, Status: "ok"}
	if path, err := exec.LookPath("etcd"); err != nil {
		server.Status, server.Why = "missing", "no etcd on PATH (Debian package etcd-server)"
	} else {
		server.Path, server.Version = path, firstLine(ctx, path, "--version")
	}
	ctl = &Peer{Name: etcdctlPeer, Status: "ok"}
	if path, err := exec.LookPath("etcdctl"); err != nil {
		ctl.Status, ctl.Why = "missing", "no etcdctl on PATH (Debian package etcd-client)"
	} else {
		ctl.Path, ctl.Version = path, firstLine(ctx, path, "version")
	}
	if peers == "none" && ctl.Status == "ok" {
		ctl.Status, ctl.Why = "skipped", "--peers none"
	}
	return server, ctl
}

// etcdStart starts the member once, its data in the run's work directory;
// it is stopped when the run ends.
func (b *runner) etcdStart(ctx context.Context) error {
	e := b.etcd
	if e.started || e.err != nil {
		return e.err
	}
	e.started = true
	if e.err = os.MkdirAll(e.dir, 0o755); e.err != nil {
		return e.err
	}
	logf, err := os.Create(filepath.Join(e.dir, "etcd.log"))
	if err != nil {
		e.err = err
		return err
	}
	defer logf.Close()
	peer := "http://" + e.peerAddr
	cmd := exec.Command("etcd", "--name", "bench", "--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", "http://"+e.addr, "--advertise-client-urls", "http://"+e.addr,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "bench="+peer)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.err = fmt.Errorf("etcd: %w", err)
		return e.err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.stops = append(b.stops, func() {
		if e.client != nil {
			e.client.Close()
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	e.client, err = clientv3.New(clientv3.Config{Endpoints: []string{e.addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.err = err
		return err
	}
	for range 300 {
		select {
		case <-exited:
			e.err = fmt.Errorf("etcd on %s exited (log %s)", e.addr, logf.Name())
			return e.err
		default:
		}
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := e.client.Get(c, "health")
		cancel()
		if err == nil {
			b.note("etcd jobs: a single member %s on %s, its data in the run's work directory; the apply's prefixes emptied and compacted before every run.", firstLine(ctx, "etcd", "--version"), e.addr)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.err = fmt.Errorf("etcd on %s did not answer within 30 s (log %s)", e.addr, logf.Name())
	return e.err
}

// etcdRecords writes n records, one a line, and their index (SHA-256).
func (b *runner) etcdRecords(ctx context.Context, file, index string, n int64) error {
	return b.keyFile(ctx, file, index, n, etcdRecord, "--hash", "sha256")
}

// keyFile writes the n key texts text(0..n-1), one a line, to file, and
// builds their index with the build flags given.
func (b *runner) keyFile(ctx context.Context, file, index string, n int64, text func(int64) string, build ...string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i := range n {
		w.WriteString(text(i) + "\n")
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	args := append([]string{"--progress", "never", "-q", "build"}, build...)
	_, err = b.tool(ctx, nil, nil, append(args, "-o", index, file)...)
	return err
}

// etcdLoadAudit writes the audit's records and index and puts their keys
// under the audit's prefix, each with a small JSON value as online, 128
// puts a transaction (etcd's default --max-txn-ops) by 8 writers.
func (b *runner) etcdLoadAudit(ctx context.Context, keys, index string) error {
	e, n := b.etcd, b.o.EtcdKeys
	if e.loaded {
		return nil
	}
	b.progress(Step{Phase: "prepare", Msg: fmt.Sprintf("etcd: %d keys under %s", n, etcdAuditPrefix)})
	if err := b.etcdRecords(ctx, keys, index, n); err != nil {
		return err
	}
	var next atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				lo := next.Add(EtcdTxn) - EtcdTxn
				if lo >= n {
					return
				}
				var ops []clientv3.Op
				for i := lo; i < min(lo+EtcdTxn, n); i++ {
					ops = append(ops, clientv3.OpPut(etcdKey(etcdAuditPrefix, etcdRecord(i)), fmt.Sprintf(`{"obj":"bkt1:u%d","ts":%d}`, i, 1714579200000+i)))
				}
				if _, err := e.client.Txn(ctx).Then(ops...).Commit(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("etcd: loading the audit's keys: %w", err)
	}
	r, err := e.client.Get(ctx, etcdAuditPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if r.Count != n {
		return fmt.Errorf("etcd: %d keys under %s after loading %d", r.Count, etcdAuditPrefix, n)
	}
	e.loaded = true
	return nil
}

// etcdEmpty deletes what the previous run wrote under prefix and compacts
// it away (waiting for the compaction), so every run starts from the same
// empty prefix and runs do not pile up history.
func (b *runner) etcdEmpty(prefix string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := b.etcd.client
		r, err := c.Delete(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		_, err = c.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical())
		return err
	}
}

// etcdReport is what the etcd rows' checks read of reconcile's --report.
type etcdReport struct {
	Counts struct {
		Both        int64 `json:"both"`
		OnlyOffline int64 `json:"only_offline"`
		OnlyOnline  int64 `json:"only_online"`
	} `json:"counts"`
	Etcd struct {
		KeysRead int64 `json:"keys_read"`
		Pages    int64 `json:"pages"`
		Revision int64 `json:"revision"`
		Created  int64 `json:"created"`
	} `json:"etcd"`
	Apply struct {
		KeysPerSecond float64 `json:"keys_per_second"`
	} `json:"apply"`
	Agree  bool `json:"agree"`
	Memory struct {
		PeakRSS int64 `json:"peak_rss_bytes"`
	} `json:"memory"`
}

func readEtcdReport(file string) (etcdReport, error) {
	var r etcdReport
	data, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	return r, err
}

// etcdVerifyAudit: the audit read every key, all of them in the index.
func etcdVerifyAudit(file string, n int64, mem string) func(outStats, map[string]any) (string, *bool) {
	return func(outStats, map[string]any) (string, *bool) {
		r, err := readEtcdReport(file)
		if err != nil {
			return "no report: " + err.Error(), truth(false)
		}
		c := r.Counts
		return fmt.Sprintf("%d keys read at revision %d in %d pages: both %d, missing %d, extra %d, agree %v; peak RSS %s (--mem %s)",
				r.Etcd.KeysRead, r.Etcd.Revision, r.Etcd.Pages, c.Both, c.OnlyOffline, c.OnlyOnline, r.Agree, iunits.FormatBytes(r.Memory.PeakRSS), mem),
			truth(r.Etcd.KeysRead == n && c.Both == n && c.OnlyOffline == 0 && c.OnlyOnline == 0 && r.Agree)
	}
}

// etcdVerifyApply: every key of the records is under prefix, read back by
// the bench, and nothing else; with a report, reconcile says it created
// them all.
func (b *runner) etcdVerifyApply(file, prefix, records string, n int64, mem string) func(outStats, map[string]any) (string, *bool) {
	return func(outStats, map[string]any) (string, *bool) {
		var what []string
		ok := true
		if file != "" {
			r, err := readEtcdReport(file)
			if err != nil {
				return "no report: " + err.Error(), truth(false)
			}
			what = append(what, fmt.Sprintf("%d created (write phase %.0f keys/s), agree %v, peak RSS %s (--mem %s)",
				r.Etcd.Created, r.Apply.KeysPerSecond, r.Agree, iunits.FormatBytes(r.Memory.PeakRSS), mem))
			ok = r.Etcd.Created == n && r.Agree
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		got, err := etcdReadBack(ctx, b.etcd.client, prefix, records)
		if err != nil {
			return strings.Join(append(what, "read back: "+err.Error()), "; "), truth(false)
		}
		what = append(what, fmt.Sprintf("read back by the bench: %d of %d keys under %s, nothing else", got, n, prefix))
		return strings.Join(what, "; "), truth(ok && got == n)
	}
}

// etcdReadBack reads every key under prefix (pages of 10000 at one
// revision) and checks each is one of the records', and each once; it
// returns how many of the records' keys are there.
func etcdReadBack(ctx context.Context, c *clientv3.Client, prefix, records string) (int64, error) {
	want := map[string]bool{}
	f, err := os.Open(records)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want[etcdKey(prefix, sc.Text())] = false
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	from, rev := prefix, int64(0)
	var got int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(10000)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := c.Get(ctx, from, opts...)
		if err != nil {
			return got, err
		}
		rev = r.Header.Revision
		for _, kv := range r.Kvs {
			k := string(kv.Key)
			seen, ok := want[k]
			switch {
			case !ok:
				return got, fmt.Errorf("%s is no record's key", k)
			case seen:
				return got, fmt.Errorf("%s read twice", k)
			}
			want[k] = true
			got++
		}
		if !r.More || len(r.Kvs) == 0 {
			return got, nil
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}

// EtcdBareCreate is the client alone: conns goroutines, each sending
// If(CreateRevision(k) == 0 …) Then(Put(k, "") …) for txn keys at a time,
// the keys the prefix and the SHA-256 of each line of records: the same
// transactions reconcile --apply sends, without reconcile. It returns the
// keys created; a transaction whose keys were not all missing is an error.
func EtcdBareCreate(ctx context.Context, endpoints []string, prefix, records string, conns, txn int) (int64, error) {
	data, err := os.ReadFile(records)
	if err != nil {
		return 0, err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	keys := make([]string, len(lines))
	for i, l := range lines {
		keys[i] = etcdKey(prefix, l)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var next, created atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(txn))) - txn
				if lo >= len(keys) {
					return
				}
				batch := keys[lo:min(lo+txn, len(keys))]
				cmps := make([]clientv3.Cmp, len(batch))
				puts := make([]clientv3.Op, len(batch))
				for i, k := range batch {
					cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", 0)
					puts[i] = clientv3.OpPut(k, "")
				}
				r, err := c.Txn(ctx).If(cmps...).Then(puts...).Commit()
				if err == nil && !r.Succeeded {
					err = fmt.Errorf("a transaction from %s: not every key was missing", batch[0])
				}
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				created.Add(int64(len(batch)))
			}
		})
	}
	wg.Wait()
	return created.Load(), first
}
