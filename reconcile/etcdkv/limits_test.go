package etcdkv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// startMember starts an etcd member of the test's own with flags (a
// server's limits are its whole cluster's), and gives its endpoint.
func startMember(t *testing.T, flags ...string) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no etcd on PATH (apt-get install etcd-server)")
		}
		t.Skip("no etcd on PATH (apt-get install etcd-server)")
	}
	dir := t.TempDir()
	ep, pport := "127.0.0.1:"+freePort(t), freePort(t)
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--name", "own", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://" + ep, "--advertise-client-urls", "http://" + ep,
		"--listen-peer-urls", "http://127.0.0.1:" + pport, "--initial-advertise-peer-urls", "http://127.0.0.1:" + pport,
		"--initial-cluster", "own=http://127.0.0.1:" + pport, "--logger", "zap", "--log-outputs", "stderr"}, flags...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); log.Close() })
	c := raw(t, []string{ep})
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "x")
		cancel()
		if err == nil {
			return ep
		}
		if i == 600 {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("the test's etcd did not come up: %v\n%s", err, b[max(0, len(b)-2000):])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A server whose --max-txn-ops or --max-request-bytes is below the
// client's 128 keys or 1.5 MiB a transaction: Create halves a refused
// transaction until the server takes it, and keeps that size; Get reads
// back likewise. One key the server refuses is a *LimitError naming the
// server's flag. Before, the first refusal failed the write.
func TestCreateWithinServerLimits(t *testing.T) {
	plainOnly(t, "members of its own started with limits: the time is the servers'")
	ctx := context.Background()
	for _, tc := range []struct {
		flags  []string
		value  int // bytes of each value
		halved int // 128 keys a transaction halved to what the server takes
		most   int
	}{
		{[]string{"--max-txn-ops", "16"}, 40, 3, 16},
		{[]string{"--max-request-bytes", "8192"}, 1000, 5, 4},
	} {
		t.Run(strings.Join(tc.flags, "="), func(t *testing.T) {
			ep := startMember(t, tc.flags...)
			rc := raw(t, []string{ep})
			f := KeyFormat{Prefix: "/dedupe/sha256/"}
			its := items(t, f, 0, 300)
			for i := range its {
				its[i].Value = bytes.Repeat([]byte{'a' + byte(i%26)}, tc.value)
			}
			// A tenth exists already: found, never overwritten.
			for i := 0; i < len(its); i += 10 {
				if _, err := rc.Put(ctx, string(its[i].Key), "online"); err != nil {
					t.Fatal(err)
				}
			}
			c := dial(t, []string{ep}, f.Prefix, nil)
			st, err := c.Create(ctx, its, nil)
			if err != nil || st.Created != 270 || st.Existed != 30 || st.Halved != tc.halved || int(c.txnKeys.Load()) != tc.most {
				t.Fatalf("create: %+v, %d keys a transaction: %v", st, c.txnKeys.Load(), err)
			}
			got := make([]KV, len(its))
			if err := c.Get(ctx, keysOf(its), got); err != nil {
				t.Fatalf("read back: %v", err)
			}
			for i, kv := range got {
				want := its[i].Value
				if i%10 == 0 {
					want = []byte("online")
				}
				if !kv.Found || kv.Version != 1 || !bytes.Equal(kv.Value, want) {
					t.Fatalf("key %d: %+v", i, kv)
				}
			}
			if r, err := rc.Get(ctx, f.Prefix, withPrefix()...); err != nil || r.Count != 300 {
				t.Fatalf("%d keys under the prefix: %v", r.Count, err)
			}
		})
	}
	// One key the server refuses: its value is over --max-request-bytes,
	// within it and gRPC's margin above it (etcd's "request is too
	// large") and past both (gRPC's ResourceExhausted).
	ep := startMember(t, "--max-request-bytes", "8192")
	f := KeyFormat{Prefix: "/dedupe/sha256/"}
	for _, n := range []int{10_000, 1 << 20} {
		c := dial(t, []string{ep}, f.Prefix, nil)
		its := items(t, f, n, 3)
		its[1].Value = bytes.Repeat([]byte("v"), n)
		st, err := c.Create(ctx, its, nil)
		var le *LimitError
		if !errors.As(err, &le) || !errors.Is(err, ErrTooLarge) || le.Limit != "--max-request-bytes" || !bytes.Equal(le.Key.Key, its[1].Key) ||
			!strings.Contains(err.Error(), "the server's --max-request-bytes is below what one key needs") || st.Created != 1 {
			t.Fatalf("a value of %d bytes: %+v %v", n, st, err)
		}
		t.Log(err)
	}
	if r, err := raw(t, []string{ep}).Get(ctx, f.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 2 {
		t.Fatalf("%d keys after the refused ones: %v", r.Count, err)
	}
}
