// Package rbloomtest starts the real RedisBloom module for tests: a
// redis-server of its own per test, listening on a unix socket only (no
// TCP port to collide with other servers on the machine), with the module
// loaded, stopped by the test's cleanup.
//
// The module is $FPDEDUP_REDISBLOOM when set, else shared/redisbloom/
// redisbloom.so in the nearest directory above the test's that holds one
// (../shared beside a checkout). When redis-server or the module is
// missing the test is skipped, saying which, unless $CI is set: in CI it
// fails, so that a test against the module never passes by not running.
package rbloomtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Server is a redis-server with the module loaded.
type Server struct {
	Socket string        // its unix socket
	Client *redis.Client // a client of it (RESP2, as fpdedup speaks)
	Module string        // the module's path
}

// Module finds the module, or says why it cannot.
func Module() (string, error) {
	if p := os.Getenv("FPDEDUP_REDISBLOOM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("FPDEDUP_REDISBLOOM=%s: %w", p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "shared", "redisbloom", "redisbloom.so")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no shared/redisbloom/redisbloom.so above the test's directory, and FPDEDUP_REDISBLOOM is not set")
		}
		dir = up
	}
}

// unavailable skips the test, or fails it in CI.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("the real RedisBloom module is needed in CI: %s", why)
	}
	t.Skipf("skipped: the real RedisBloom module is needed (%s)", why)
}

// Start starts a server for the test.
func Start(t testing.TB) *Server {
	t.Helper()
	mod, err := Module()
	if err != nil {
		unavailable(t, err.Error())
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "no redis-server on PATH")
	}
	// A socket path is limited to 107 bytes: a short directory of its own.
	dir, err := os.MkdirTemp("", "rbloom")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
		"--loadmodule", mod)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: sock, Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() {
		c.Close()
		cmd.Process.Kill()
		<-exited
	})
	ctx := context.Background()
	// Waiting for the server to listen: a bound on a failing start, never
	// an assertion about how long a start takes.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c.Ping(ctx).Err() == nil {
			break
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server --loadmodule %s exited (%v):\n%s", mod, err, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 30s")
		}
	}
	if err := c.Do(ctx, "BF.INFO", "rbloomtest:none").Err(); err == nil || err.Error() != "ERR not found" {
		t.Fatalf("the module does not answer BF.INFO as RedisBloom does: %v", err)
	}
	return &Server{Socket: sock, Client: c, Module: mod}
}
