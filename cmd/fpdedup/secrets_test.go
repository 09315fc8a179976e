package main

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestURLSecretsNeverPrinted: a credential written anywhere into an
// --online URL (the user info, a host list, addr=, a parameter, the
// fragment), as it is or percent-encoded, is refused, and appears in no
// output, in neither form: stdout, stderr, the report, --stats-json,
// --metrics, or any file the run leaves. (An addr= whose '@' was encoded
// was refused and printed, password and all.)
func TestURLSecretsNeverPrinted(t *testing.T) {
	const secret = "S3cr3tPW"
	// One that URLs must encode: its encoded forms must not show either.
	const secret2 = "Pw#4/x@y z"
	q2, p2 := url.QueryEscape(secret2), url.PathEscape(secret2)
	forms := []string{secret, secret2, q2, p2, strings.ReplaceAll(q2, "+", "%20")}
	dir := t.TempDir()
	records := filepath.Join(dir, "r.txt")
	if err := os.WriteFile(records, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "t.fpx")
	if code, _, stderr := runInProcess("build", "-q", "--hash", "sha256", "-o", index, records); code != 0 {
		t.Fatalf("build: %d %s", code, stderr)
	}
	for _, url := range []string{
		"redis://u:" + secret + "@127.0.0.1:1/0?match=dd:*",
		"redis://:" + secret + "@127.0.0.1:1/0?match=dd:*",
		"redis://127.0.0.1:1,u:" + secret + "@127.0.0.1:2/?match=dd:*",
		"redis://127.0.0.1:1/?match=dd:*&addr=:" + secret + "@127.0.0.1:2",
		"redis://127.0.0.1:1/?match=dd:*&addr=u:" + secret + "@127.0.0.1:2&cluster=1",
		"redis://127.0.0.1:1/0?match=dd:*&password=" + secret,
		"redis://127.0.0.1:1/0?match=dd:*&pw=" + secret,
		"redis://127.0.0.1:1/0?match=dd:*&Password=" + secret,
		"redis://127.0.0.1:1/0?match=dd:*&nosuch=" + secret,
		"redis://127.0.0.1:1/0?match=dd:*#" + secret,
		"mysql://audit:" + secret + "@127.0.0.1:1/db?table=t&column=c",
		"mysql://audit@127.0.0.1:1/db?table=t&column=c&password=" + secret,
		"mysql://audit@127.0.0.1:1/db?table=t&column=c&tls=" + secret,
		"redis://127.0.0.1:1/?match=dd:*&addr=%3A" + secret + "%40127.0.0.1:2",
		"redis://127.0.0.1:1/?match=dd:*&addr=u%3A" + secret + "%40127.0.0.1:2&cluster=1",
		"redis://127.0.0.1:1/?match=dd:*&%61ddr=%3A" + secret + "%40127.0.0.1:2",
		"redis://127.0.0.1:1/?match=dd:*&addr=%3A" + q2 + "%40127.0.0.1:2",
		"redis://127.0.0.1:1/?match=dd:*&addr=u:" + q2 + "@127.0.0.1:2",
		"redis://u%3A" + secret + "@127.0.0.1:1/0?match=dd:*",
		"redis://u:" + p2 + "@127.0.0.1:1/0?match=dd:*",
		"redis://127.0.0.1:1,u:" + p2 + "@127.0.0.1:2/?match=dd:*",
		"mysql://audit:" + p2 + "@127.0.0.1:1/db?table=t&column=c",
		"mysql://audit%3A" + secret + "@127.0.0.1:1/db?table=t&column=c",
		"etcd://audit:" + secret + "@127.0.0.1:1/?prefix=/d/",
		"etcd://127.0.0.1:1,audit:" + secret + "@127.0.0.1:2/?prefix=/d/",
		"etcd://127.0.0.1:1/?prefix=/d/&password=" + secret,
		"etcd://audit:" + p2 + "@127.0.0.1:1/?prefix=/d/",
		"etcd://audit%3A" + secret + "@127.0.0.1:1/?prefix=/d/",
	} {
		t.Run(url, func(t *testing.T) {
			out := t.TempDir()
			code, stdout, stderr := runInProcess("reconcile", "--index", index, "--online", url, "--timeout", "1s", "--retries", "0",
				"--report", filepath.Join(out, "r.json"), "--stats-json", filepath.Join(out, "s.json"), "--metrics", filepath.Join(out, "m.prom"))
			if code != 2 {
				t.Errorf("exit %d, want 2 (refused)", code)
			}
			for _, f := range forms {
				if strings.Contains(stdout+stderr, f) {
					t.Errorf("the secret is printed (as %q):\n%s%s", f, stdout, stderr)
				}
			}
			if !strings.Contains(stderr, "--online") {
				t.Errorf("stderr does not name --online: %s", stderr)
			}
			entries, _ := os.ReadDir(out)
			for _, e := range entries {
				b, _ := os.ReadFile(filepath.Join(out, e.Name()))
				for _, f := range forms {
					if strings.Contains(string(b), f) {
						t.Errorf("%s holds the secret (as %q):\n%s", e.Name(), f, b)
					}
				}
			}
		})
	}
}

// TestReconcileSaysWhatItAwaits: a server that accepts and never answers
// takes (1 + --retries) × --timeout to give up; each retry says what it
// waits for (it was silent for 189 s with the defaults).
func TestReconcileSaysWhatItAwaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // read nothing, answer nothing
		}
	}()
	dir := t.TempDir()
	records := filepath.Join(dir, "r.txt")
	if err := os.WriteFile(records, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "t.fpx")
	if code, _, stderr := runInProcess("build", "-q", "--hash", "sha256", "-o", index, records); code != 0 {
		t.Fatalf("build: %d %s", code, stderr)
	}
	url := "redis://" + ln.Addr().String() + "/0?match=dd:*"
	code, _, stderr := runInProcess("reconcile", "--index", index, "--online", url, "--timeout", "300ms", "--retries", "2")
	if code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr)
	}
	for _, want := range []string{"fpdedup: reaching " + url + ": try 1 of 3 failed", "try 2 of 3 failed", "trying again in"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
