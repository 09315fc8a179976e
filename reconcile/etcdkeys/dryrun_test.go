package etcdkeys_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// A dry run whose reader went away (… --dry-run | head) ends as any
// output to a closed pipe does: exit 141, nothing said of keys written,
// for it writes none (it said "11000 keys written in this run", exit 2).
func TestEtcdDryRunClosedStdout(t *testing.T) {
	reconciletest.PlainOnly(t, "what --dry-run prints to a closed pipe; the apply runs under -race in the apply tests")
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	// 10,000 keys missing: a plan of 1.5 MB, past what stdout buffers.
	d := reconciletest.NewDataset(t, 100_000)
	loadDataset(t, c, p, d)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	cmd := exec.Command(reconciletest.CLIBinary(t), "reconcile", "--index", d.Index, "--online", reconciletest.EtcdURL(eps, p, ""),
		"--records", d.Records, "--apply", "--dry-run")
	cmd.Dir = d.Dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 141 || strings.Contains(stderr.String(), "written") {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if got := reconciletest.EtcdGet(t, c, p); len(got) != len(d.OnlineKeys()) {
		t.Fatalf("%d keys after a dry run, want %d", len(got), len(d.OnlineKeys()))
	}
}

// A prefix without its last '/' (or hex=64 over keys of 32 hex digits):
// every key under it is "not a fingerprint", and --apply would write the
// whole truth beside them, where no reader looks. Refused, exit 2, the
// URL's likely mistakes named, nothing written; the audit alone still
// reports (exit 1).
func TestEtcdApplyRefusedWhereKeysAreNotFingerprints(t *testing.T) {
	eps := reconciletest.Etcd(t)
	c := reconciletest.EtcdClient(t, eps)
	p := reconciletest.EtcdPrefix(t, c)
	d := reconciletest.NewDataset(t, 2_000)
	loadDataset(t, c, p, d)
	for _, url := range []string{reconciletest.EtcdURL(eps, strings.TrimSuffix(p, "/"), ""), reconciletest.EtcdURL(eps, p, "hex=32")} {
		r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url, "--records", d.Records, "--apply").Want(t, 2)
		if !strings.Contains(r.Stderr, "are not fingerprints") || !strings.Contains(r.Stderr, "nothing is written") {
			t.Fatalf("%s:\n%s", url, r.Stderr)
		}
		r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", url).Want(t, 1)
		// The last line says why they differ: the values that are no
		// fingerprints too (it said "0 missing" and nothing else when
		// they were the only difference).
		if !strings.Contains(r.Stderr, fmt.Sprintf("; %d online values not fingerprints)", len(d.OnlineKeys()))) {
			t.Fatalf("%s:\n%s", url, r.Stderr)
		}
	}
	if got := reconciletest.EtcdGet(t, c, strings.TrimSuffix(p, "/")); len(got) != len(d.OnlineKeys()) {
		t.Fatalf("%d keys after refused writes, want %d", len(got), len(d.OnlineKeys()))
	}
}

// A user named without a password is refused before connecting (the
// client connected as nobody: "user name is empty").
func TestEtcdUserWithoutPassword(t *testing.T) {
	eps := reconciletest.Etcd(t)
	d := reconciletest.NewDataset(t, 100)
	url := strings.Replace(reconciletest.EtcdURL(eps, "/dedupe/sha256/", ""), "etcd://", "etcd://audit@", 1)
	r := reconciletest.Fpdedup(t, d.Dir, []string{"FPDEDUP_ETCD_PASSWORD="}, "reconcile", "--index", d.Index, "--online", url).Want(t, 2)
	if !strings.Contains(r.Stderr, `the user "audit" is named, but no password is given for it`) {
		t.Fatal(r.Stderr)
	}
}
