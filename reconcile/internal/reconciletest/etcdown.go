package reconciletest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// OwnEtcd is an etcd member of the test's own, on free ports, its data in
// a temp dir, killed at the end: for what changes a whole cluster
// (compaction, users, TLS) without touching the shared one that other
// packages' tests read meanwhile.
type OwnEtcd struct {
	Endpoint string
	// With TLS: the CA and the client's certificate and key files.
	CA, Cert, Key string
	Client        *clientv3.Client // root's, before any auth
}

// StartOwnEtcd starts one; with useTLS it serves TLS and asks for a client
// certificate; flags are more of etcd's (a limit). Without etcd installed
// the test skips (fails with CI set).
func StartOwnEtcd(t *testing.T, useTLS bool, flags ...string) *OwnEtcd {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no etcd on PATH (apt-get install etcd-server)")
		}
		t.Skip("no etcd on PATH (apt-get install etcd-server)")
	}
	dir := t.TempDir()
	e := &OwnEtcd{Endpoint: "127.0.0.1:" + freePort(t)}
	pport := freePort(t)
	scheme := "http://"
	args := []string{"--name", "own", "--data-dir", filepath.Join(dir, "data"),
		"--listen-peer-urls", "http://127.0.0.1:" + pport, "--initial-advertise-peer-urls", "http://127.0.0.1:" + pport,
		"--initial-cluster", "own=http://127.0.0.1:" + pport, "--logger", "zap", "--log-outputs", "stderr"}
	var tc *tls.Config
	if useTLS {
		scheme = "https://"
		ca, caKey := makeCert(t, dir, "ca", nil, nil)
		makeCert(t, dir, "server", ca, caKey)
		makeCert(t, dir, "client", ca, caKey)
		e.CA, e.Cert, e.Key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
		args = append(args, "--cert-file", filepath.Join(dir, "server.pem"), "--key-file", filepath.Join(dir, "server.key"),
			"--trusted-ca-file", e.CA, "--client-cert-auth")
		cert, err := tls.LoadX509KeyPair(e.Cert, e.Key)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		tc = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	}
	args = append(args, "--listen-client-urls", scheme+e.Endpoint, "--advertise-client-urls", scheme+e.Endpoint)
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(args, flags...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); log.Close() })
	var lastErr error
	if !WaitFor(60*time.Second, func() bool {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			lastErr = err
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = c.Get(ctx, "x")
		cancel()
		if err != nil {
			lastErr = err
			c.Close()
			return false
		}
		e.Client = c
		return true
	}) {
		b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
		t.Fatalf("the test's etcd did not come up: %v\n%s", lastErr, b[max(0, len(b)-2000):])
	}
	t.Cleanup(func() { e.Client.Close() })
	return e
}

func freePort(t *testing.T) string {
	t.Helper()
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
	for file, block := range map[string]*pem.Block{name + ".pem": {Type: "CERTIFICATE", Bytes: der}, name + ".key": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
