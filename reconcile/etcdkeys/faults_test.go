package etcdkeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// The leader of the 3-member cluster killed mid --apply: the client fails
// over and the run finishes, or it fails and a rerun from the checkpoint
// finishes; either way every missing key is created exactly once
// (version 1) and no other key is touched.
func TestEtcdClusterApplyMemberKilled(t *testing.T) {
	reconciletest.PlainOnly(t, "a leader killed and the cluster electing another: the time is the servers'; the writes' goroutines are raced by TestEtcdAudit and TestEtcdApplyInterruptedBySIGINT")
	eps := reconciletest.EtcdCluster(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 30_000)
	loadDataset(t, c, p, d)
	t.Cleanup(func() { reconciletest.EtcdRestart(t, eps) })
	url := reconciletest.EtcdURL(eps, p, "")
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--records", d.Records, "--apply",
		"--batch", "50", "--conns", "2", "--rate", "1000", "--checkpoint", ckpt, "--timeout", "5s", "--report", "r.json"}
	done := reconciletest.RunAsync(t, d.Dir, nil, args...)
	var victim string
	if reconciletest.WaitFor(60*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		victim = reconciletest.EtcdLeader(t, c, eps)
		reconciletest.EtcdKill(t, victim)
	}
	r := <-done
	if victim == "" {
		t.Fatalf("no checkpoint appeared: exit %d\n%s", r.Code, r.Stderr)
	}
	t.Logf("killed %s mid-apply: exit %d\n%s", victim, r.Code, r.Stderr)
	if r.Code == 2 {
		// Failed with the leader gone: the rest resumes from the checkpoint.
		reconciletest.EtcdRestart(t, eps)
		r = reconciletest.Fpdedup(t, d.Dir, nil, args...)
	}
	r.Want(t, 1) // the extras remain
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	if rep.Missing != 0 || rep.ReadBack == nil || rep.ReadBack.NotHeld != 0 {
		t.Fatalf("after the apply: missing %d, read back %+v", rep.Missing, rep.ReadBack)
	}
	got := reconciletest.EtcdGet(t, c, p)
	if len(got) != len(d.OnlineKeys())+len(d.Missing) {
		t.Fatalf("%d keys, want %d", len(got), len(d.OnlineKeys())+len(d.Missing))
	}
	for _, i := range d.Missing {
		if kv, ok := got[p+reconciletest.FullHex(d.Keys[i])]; !ok || kv.Version != 1 || kv.Value != "" {
			t.Fatalf("missing key %d: %+v (held %v)", i, kv, ok)
		}
	}
	for k, kv := range got {
		if kv.Version != 1 {
			t.Fatalf("%s written %d times", k, kv.Version)
		}
	}
}

// The whole cluster stopped: the audit fails, exit 2, after its retries,
// with an error naming every member, in the report too.
func TestEtcdClusterStopped(t *testing.T) {
	reconciletest.PlainOnly(t, "a stopped cluster's retries and timeouts: the time is the waits'")
	eps := reconciletest.EtcdCluster(t)
	d := reconciletest.NewDataset(t, 1_000)
	t.Cleanup(func() { reconciletest.EtcdRestart(t, eps) })
	for _, e := range eps {
		reconciletest.EtcdKill(t, e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang is a failure, not a wait
	defer cancel()
	r := reconciletest.FpdedupCtx(t, ctx, d.Dir, nil, "reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL(eps, "/dedupe/sha256/", ""),
		"--timeout", "2s", "--retries", "1", "--report", "r.json").Want(t, 2)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	for _, e := range eps {
		if !strings.Contains(r.Stderr, e) || !strings.Contains(rep.Error, e) {
			t.Fatalf("the error does not name %s:\n%s\nreport: %s", e, r.Stderr, rep.Error)
		}
	}
	t.Log(r.Stderr)
}

// A hostile member (a TCP server that answers garbage) and a silent one
// (accepts, never answers): a clear error naming it, exit 2, within
// --timeout and its retries (a hang fails the test at its deadline).
func TestEtcdHostileEndpoint(t *testing.T) {
	reconciletest.PlainOnly(t, "timeouts against silent and garbage endpoints: the time is the waits'")
	d := reconciletest.NewDataset(t, 100)
	garbage := listen(t, func(c net.Conn) { c.Write([]byte(strings.Repeat("HTTP/1.1 200 OK\r\n\r\n\x00\xff garbage", 100))) })
	silent := listen(t, func(c net.Conn) {})
	for _, ep := range []string{garbage, silent} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r := reconciletest.FpdedupCtx(t, ctx, d.Dir, nil, "reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL([]string{ep}, "/dedupe/sha256/", ""),
			"--timeout", "2s", "--retries", "1")
		cancel()
		r.Want(t, 2)
		if !strings.Contains(r.Stderr, ep+": accepts connections but did not answer as etcd") {
			t.Fatalf("%s: %s", ep, r.Stderr)
		}
	}
}

// listen serves every connection with serve, holding it open until the
// test ends; its address.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				serve(c)
				<-done
				c.Close()
			}()
		}
	}()
	return l.Addr().String()
}

// TLS: the CA and a client certificate from the URL's files; without them
// the member cannot be reached, exit 2.
func TestEtcdTLS(t *testing.T) {
	reconciletest.PlainOnly(t, "a member of its own started with TLS: the time is the server's")
	own := reconciletest.StartOwnEtcd(t, true)
	d := reconciletest.NewDataset(t, 1_000)
	p := "/dedupe/sha256/"
	loadDataset(t, own.Client, p, d)
	url := reconciletest.EtcdURL([]string{own.Endpoint}, p, "ca="+own.CA+"&cert="+own.Cert+"&key="+own.Key)
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--report", "r.json").Want(t, 1)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json")).Counts, 900, 100, 10)
	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL([]string{own.Endpoint}, p, "ca="+own.CA),
		"--timeout", "2s", "--retries", "1").Want(t, 2)
	// The handshake's own error is shown: the member asks for a
	// client certificate.
	if !strings.Contains(r.Stderr, own.Endpoint) || !strings.Contains(r.Stderr, "the TLS handshake failed: remote error: tls: ") {
		t.Fatalf("without a client certificate: %s", r.Stderr)
	}
	t.Log(r.Stderr)
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL([]string{own.Endpoint}, p, ""),
		"--timeout", "2s", "--retries", "1").Want(t, 2)
	if !strings.Contains(r.Stderr, own.Endpoint+": serves TLS: give ca=") {
		t.Fatalf("without TLS: %s", r.Stderr)
	}
	t.Log(r.Stderr)
}

// Counts of one are said in the singular: 1 key, 1 batch, 1 transaction.
func TestEtcdApplyOneKeyWording(t *testing.T) {
	reconciletest.PlainOnly(t, "what is printed, not what runs at once")
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 10) // one missing, no extra
	loadDataset(t, c, p, d)
	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL(eps, p, ""),
		"--records", d.Records, "--apply").Want(t, 0)
	for _, want := range []string{"reconcile: 1 key written to ", " in 1 batch, ", "etcd compare-and-create: 1 key created, ", " 1 transaction, ",
		"read back after the writes: the 1 key that was missing is online"} {
		if !strings.Contains(r.Stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
}

// A user and a password: the password from $FPDEDUP_ETCD_PASSWORD or
// --password-file, never from the URL, never printed; a wrong one is an
// error saying so, exit 2; a user without the permission to read the
// prefix likewise.
func TestEtcdAuth(t *testing.T) {
	reconciletest.PlainOnly(t, "a member of its own started with auth: the time is the server's")
	own := reconciletest.StartOwnEtcd(t, false)
	d := reconciletest.NewDataset(t, 1_000)
	p := "/dedupe/sha256/"
	loadDataset(t, own.Client, p, d)
	const pw = "etcd-Secret-pw-31"
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := own.Client.RoleAdd(ctx, "root"); return err },
		func() error { _, err := own.Client.UserAdd(ctx, "root", "root-pw-77"); return err },
		func() error { _, err := own.Client.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := own.Client.RoleAdd(ctx, "dedupe-read"); return err },
		func() error {
			_, err := own.Client.RoleGrantPermission(ctx, "dedupe-read", p, clientv3.GetPrefixRangeEnd(p), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := own.Client.UserAdd(ctx, "audit", pw); return err },
		func() error { _, err := own.Client.UserGrantRole(ctx, "audit", "dedupe-read"); return err },
		func() error { _, err := own.Client.UserAdd(ctx, "nobody", pw); return err },
		func() error { _, err := own.Client.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	host := own.Endpoint
	url := "etcd://audit@" + host + "/?prefix=" + p
	audit := func(env []string, url string, more ...string) reconciletest.Result {
		return reconciletest.Fpdedup(t, d.Dir, env, append([]string{"reconcile", "--index", d.Index, "--online", url, "--timeout", "5s", "--retries", "1", "--report", "r.json"}, more...)...)
	}
	noLeak := func(r reconciletest.Result) {
		t.Helper()
		b, _ := os.ReadFile(filepath.Join(d.Dir, "r.json"))
		if strings.Contains(r.Stderr+r.Stdout+string(b), pw) {
			t.Fatalf("the password is printed:\n%s\n%s", r.Stderr, b)
		}
	}
	r := audit([]string{"FPDEDUP_ETCD_PASSWORD=" + pw}, url).Want(t, 1)
	noLeak(r)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json")).Counts, 900, 100, 10)
	if err := os.WriteFile(filepath.Join(d.Dir, "pw"), []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noLeak(audit(nil, url, "--password-file", "pw").Want(t, 1))

	for _, c := range []struct {
		env  []string
		url  string
		want string
	}{
		{[]string{"FPDEDUP_ETCD_PASSWORD=wrong-" + pw}, url, "refused"},
		{[]string{"FPDEDUP_ETCD_PASSWORD=" + pw}, "etcd://nobody@" + host + "/?prefix=" + p, "refused"},
		{nil, "etcd://audit:" + pw + "@" + host + "/?prefix=" + p, "FPDEDUP_ETCD_PASSWORD"},
		{[]string{"FPDEDUP_ETCD_PASSWORD=" + pw}, "etcd://" + host + "/?prefix=" + p, "no user"},
	} {
		r := audit(c.env, c.url).Want(t, 2)
		noLeak(r)
		if !strings.Contains(r.Stderr, c.want) {
			t.Fatalf("%s: %s", c.url, r.Stderr)
		}
		t.Log(strings.TrimSpace(r.Stderr))
	}
	// A user that may read but not write: --apply says what is wrong,
	// exit 2, and advises no rerun (one would be refused the same).
	r = audit([]string{"FPDEDUP_ETCD_PASSWORD=" + pw}, url, "--records", d.Records, "--apply").Want(t, 2)
	noLeak(r)
	if want := `the user "audit" lacks write permission on the prefix "/dedupe/sha256/"`; !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, "rerun") {
		t.Fatalf("--apply as a reader: %s", r.Stderr)
	}
	t.Log(strings.TrimSpace(r.Stderr))
}

// A server whose --max-txn-ops or --max-request-bytes is below the
// client's 128 keys or 1.5 MiB a transaction: --apply halves the refused
// transactions and writes every missing key; a value the server refuses
// at one key a transaction is exit 2 naming the server's limit and
// --batch, advising no rerun. Before, the first refusal failed the run.
func TestEtcdApplyWithinServerLimits(t *testing.T) {
	reconciletest.PlainOnly(t, "members of its own started with limits: the time is the servers'")
	d := reconciletest.NewDataset(t, 2_000)
	p := "/dedupe/sha256/"
	args := func(own *reconciletest.OwnEtcd, value string) []string {
		return []string{"reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL([]string{own.Endpoint}, p, ""),
			"--records", d.Records, "--apply", "--value", value, "--report", "r.json"}
	}
	// The dataset within the limits: 16 keys a transaction.
	load := func(own *reconciletest.OwnEtcd) {
		var keys []string
		for _, k := range d.OnlineKeys() {
			keys = append(keys, p+reconciletest.FullHex(k))
		}
		for len(keys) > 0 {
			n := min(len(keys), 16)
			reconciletest.EtcdPut(t, own.Client, keys[:n], nil)
			keys = keys[n:]
		}
	}
	for _, c := range []struct {
		flags []string
		value string
	}{
		{[]string{"--max-txn-ops", "16"}, `{"by":"fpdedup"}`},
		{[]string{"--max-request-bytes", "8192"}, `{"pad":"` + strings.Repeat("x", 1000) + `"}`},
	} {
		own := reconciletest.StartOwnEtcd(t, false, c.flags...)
		load(own)
		reconciletest.Fpdedup(t, d.Dir, nil, args(own, c.value)...).Want(t, 1) // the extras online
		rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
		if rep.Missing != 0 || rep.Apply.Written != 200 || rep.Etcd.Created != 200 || rep.ReadBack.NotHeld != 0 {
			t.Fatalf("%v: %+v %+v, %d missing", c.flags, rep.Apply, rep.Etcd, rep.Missing)
		}
	}
	own := reconciletest.StartOwnEtcd(t, false, "--max-request-bytes", "8192")
	load(own)
	r := reconciletest.Fpdedup(t, d.Dir, nil, args(own, `{"pad":"`+strings.Repeat("x", 10_000)+`"}`)...).Want(t, 2)
	for _, want := range []string{"refused a transaction of one key", "etcdserver: request is too large", "the server's --max-request-bytes is below what one key needs", "--batch"} {
		if !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, "rerun") {
			t.Fatalf("stderr lacks %q, or says rerun:\n%s", want, r.Stderr)
		}
	}
	t.Log(strings.TrimSpace(r.Stderr))
}

// SIGINT while --apply creates keys: exit 130, the report and the message
// name the keys written and the checkpoint; every key up to the
// checkpoint is held; the same command resumes, and every missing key is
// created once.
func TestEtcdApplyInterruptedBySIGINT(t *testing.T) {
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 50_000)
	loadDataset(t, c, p, d)
	url := reconciletest.EtcdURL(eps, p, "")
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--records", d.Records, "--apply", "--value", `{"by":"fpdedup"}`,
		"--batch", "100", "--conns", "2", "--checkpoint", ckpt}
	cmd := exec.Command(reconciletest.CLIBinary(t), append(args, "--rate", "2k", "--report", "a.json")...)
	cmd.Dir = d.Dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !reconciletest.WaitFor(60*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil }) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("no checkpoint appeared")
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("after SIGINT: %v, want exit 130\n%s", err, stderr.String())
	}
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	var ck reconcile.Checkpoint
	if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Written == 0 || ck.Written >= 5_000 || ck.Written != rep.Apply.Written {
		t.Fatalf("checkpoint %+v (%v), report %+v", ck, err, rep.Apply)
	}
	if want := fmt.Sprintf("interrupted by SIGINT; --apply had written %d keys to %s; rerun with --checkpoint %s to resume", ck.Written, url, ckpt); !strings.Contains(stderr.String(), want) || rep.ExitCode != 130 {
		t.Fatalf("stderr %q lacks %q (report exit %d)", stderr.String(), want, rep.ExitCode)
	}
	held := reconciletest.EtcdGet(t, c, p)
	for _, i := range d.Missing {
		if reconciletest.FPHex(d.Keys[i]) > ck.Last {
			continue
		}
		if kv, ok := held[p+reconciletest.FullHex(d.Keys[i])]; !ok || kv.Value != `{"by":"fpdedup"}` {
			t.Fatalf("checkpoint at %s, but key %d is %+v (held %v)", ck.Last, i, kv, ok)
		}
	}
	reconciletest.Fpdedup(t, d.Dir, nil, append(args, "--report", "b.json")...).Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json"))
	if rep.Missing != 0 || rep.Apply.Written != 5_000-int64(len(held)-len(d.OnlineKeys())) || rep.Etcd.Existed != 0 {
		t.Fatalf("resume: %+v %+v, %d still missing", rep.Apply, rep.Etcd, rep.Missing)
	}
	got := reconciletest.EtcdGet(t, c, p)
	if len(got) != len(d.OnlineKeys())+5_000 {
		t.Fatalf("%d keys, want %d", len(got), len(d.OnlineKeys())+5_000)
	}
	for k, kv := range got {
		if kv.Version != 1 {
			t.Fatalf("%s written %d times", k, kv.Version)
		}
	}
}

// The whole cluster stopped mid --apply: exit 2 after the retries, the
// message naming the members, the keys written and the checkpoint; once
// the cluster is back the same command resumes, and every missing key is
// created once.
func TestEtcdClusterStoppedMidApply(t *testing.T) {
	reconciletest.PlainOnly(t, "a cluster stopped mid-apply and started again: the time is the servers'")
	eps := reconciletest.EtcdCluster(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 30_000)
	loadDataset(t, c, p, d)
	t.Cleanup(func() { reconciletest.EtcdRestart(t, eps) })
	url := reconciletest.EtcdURL(eps, p, "")
	ckpt := filepath.Join(d.Dir, "apply.ckpt")
	args := []string{"reconcile", "--index", d.Index, "--online", url, "--records", d.Records, "--apply",
		"--batch", "50", "--conns", "2", "--rate", "1000", "--checkpoint", ckpt, "--timeout", "2s", "--retries", "1"}
	done := reconciletest.RunAsync(t, d.Dir, nil, append(args, "--report", "a.json")...)
	stopped := reconciletest.WaitFor(60*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil })
	if stopped {
		for _, e := range eps {
			reconciletest.EtcdKill(t, e)
		}
	}
	r := <-done
	if !stopped {
		t.Fatalf("no checkpoint appeared: exit %d\n%s", r.Code, r.Stderr)
	}
	r.Want(t, 2)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "a.json"))
	for _, want := range append([]string{"keys written in this run, checkpoint " + ckpt, "rerun the same command to resume"}, eps...) {
		if !strings.Contains(r.Stderr, want) || !strings.Contains(rep.Error, want) {
			t.Fatalf("the error lacks %q:\n%s\nreport: %s", want, r.Stderr, rep.Error)
		}
	}
	// The client's own retries are the run's: the message and the report
	// count them (they said 0 when etcd's client had sent batches again).
	if rep.Apply == nil || rep.Etcd == nil || rep.Etcd.TxnRetry == 0 || rep.Apply.Retries != rep.Etcd.TxnRetry ||
		!strings.Contains(r.Stderr, fmt.Sprintf("(%d retries in all,", rep.Etcd.TxnRetry)) ||
		rep.Apply.Written != rep.Etcd.Created+rep.Etcd.Existed {
		t.Fatalf("retries: apply %+v, etcd %+v\n%s", rep.Apply, rep.Etcd, r.Stderr)
	}
	t.Log(r.Stderr)
	reconciletest.EtcdRestart(t, eps)
	reconciletest.Fpdedup(t, d.Dir, nil, append(args, "--report", "b.json")...).Want(t, 1)
	rep = reconciletest.ReadReport(t, filepath.Join(d.Dir, "b.json"))
	if rep.Missing != 0 || rep.ReadBack == nil || rep.ReadBack.NotHeld != 0 {
		t.Fatalf("the rerun: missing %d, read back %+v", rep.Missing, rep.ReadBack)
	}
	got := reconciletest.EtcdGet(t, c, p)
	if len(got) != len(d.OnlineKeys())+len(d.Missing) {
		t.Fatalf("%d keys, want %d", len(got), len(d.OnlineKeys())+len(d.Missing))
	}
	for k, kv := range got {
		if kv.Version != 1 {
			t.Fatalf("%s written %d times", k, kv.Version)
		}
	}
}
