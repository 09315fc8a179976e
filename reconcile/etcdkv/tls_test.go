package etcdkv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TLS with a client certificate, and a user whose role may read only the
// prefix: on an etcd of the test's own (auth changes a whole cluster).
// Wrong credentials are ErrAuth and the password never shows; a client
// without the CA or without a certificate is a *DialError.
func TestTLSAndAuth(t *testing.T) {
	plainOnly(t, "members of its own started with TLS and auth: the time is the servers'")
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no etcd on PATH (apt-get install etcd-server)")
		}
		t.Skip("no etcd on PATH (apt-get install etcd-server)")
	}
	dir := t.TempDir()
	ca, caKey := makeCert(t, dir, "ca", nil, nil)
	makeCert(t, dir, "server", ca, caKey)
	makeCert(t, dir, "client", ca, caKey)
	cport, pport := freePort(t), freePort(t)
	ep := "127.0.0.1:" + cport
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "https://"+ep, "--advertise-client-urls", "https://"+ep,
		"--listen-peer-urls", "http://127.0.0.1:"+pport, "--initial-advertise-peer-urls", "http://127.0.0.1:"+pport,
		"--initial-cluster", "tls=http://127.0.0.1:"+pport,
		"--cert-file", filepath.Join(dir, "server.pem"), "--key-file", filepath.Join(dir, "server.key"),
		"--trusted-ca-file", filepath.Join(dir, "ca.pem"), "--client-cert-auth", "--logger", "zap", "--log-outputs", "stderr")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	files := Options{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key")}
	tc, err := files.tls()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var root *clientv3.Client
	for i := 0; ; i++ {
		root, err = clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tc, DialTimeout: 5 * time.Second, Logger: nopLogger()})
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = root.Get(cctx, "x")
			cancel()
			if err == nil {
				break
			}
			root.Close()
		}
		if i == 300 {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Fatalf("the TLS etcd did not come up: %v\n%s", err, b[max(0, len(b)-2000):])
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer root.Close()
	const prefix, rootPW, auditPW = "/dedupe/sha256/", "Root-pw-81", "Audit-pw-37"
	d := digest(1)
	f := KeyFormat{Prefix: prefix}
	for _, step := range []func() error{
		func() error { _, err := root.Put(ctx, string(f.Append(nil, d[:])), "v"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", rootPW); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "reader", prefix, f.End(), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "audit", auditPW); return err },
		func() error { _, err := root.UserGrantRole(ctx, "audit", "reader"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	o := files
	o.Endpoints, o.Timeout, o.Prefix, o.Username, o.Password = []string{ep}, 5*time.Second, prefix, "audit", auditPW
	c, err := Dial(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Scan(ctx, ScanOptions{Format: f})
	if got := scanAll(t, s, nil); len(got) != 1 {
		t.Fatalf("%d keys", len(got))
	}
	// The reader may not write.
	if st, err := c.Create(ctx, items(t, f, 5, 1), nil); !errors.Is(err, ErrAuth) {
		rc, err2 := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tc, Username: "root", Password: rootPW, Logger: nopLogger()})
		if err2 != nil {
			t.Fatal(err2)
		}
		rr, err2 := rc.Get(ctx, prefix, clientv3.WithPrefix())
		t.Fatalf("a write by a reader: %v %+v; %v %v", err, st, rr, err2)
	}
	c.Close()

	for _, tc := range []struct {
		name string
		tune func(*Options)
		want error
	}{
		{"wrong password", func(o *Options) { o.Password = "Wrong-pw-55" }, ErrAuth},
		{"unknown user", func(o *Options) { o.Username = "nobody" }, ErrAuth},
		{"a prefix not granted", func(o *Options) { o.Prefix = "/other/" }, ErrAuth},
		{"no CA", func(o *Options) { o.CAFile = "" }, ErrUnreachable},
		{"no client certificate", func(o *Options) { o.CertFile, o.KeyFile = "", "" }, ErrUnreachable},
		{"no TLS", func(o *Options) { o.CAFile, o.CertFile, o.KeyFile = "", "", "" }, ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			o.Timeout = 3 * time.Second
			tc.tune(&o)
			c, err := Dial(ctx, o)
			if err == nil {
				c.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v; want %v", err, tc.want)
			}
			for _, pw := range []string{auditPW, "Wrong-pw-55", rootPW} {
				if strings.Contains(err.Error(), pw) || strings.Contains(fmt.Sprintf("%v %+v %#v", o, o, o), pw) {
					t.Fatalf("the password shows: %v", err)
				}
			}
			t.Log(err)
		})
	}
	if _, err := Dial(ctx, Options{Endpoints: []string{ep}, CAFile: filepath.Join(dir, "server.key")}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a key as the CA: %v", err)
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// makeCert writes NAME.pem and NAME.key in dir: a CA when parent is nil,
// else a certificate for 127.0.0.1 signed by it.
func makeCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "fpdedup-test-" + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
