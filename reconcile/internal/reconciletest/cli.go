package reconciletest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// binDir holds the fpdedup binary the CLI tests run (buildCLI).
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

// RaceBuild: the tests run under -race (race.go), so the binary they run
// is built with -race as well.
var RaceBuild bool

// PlainOnly skips a test under -race: one whose time goes to servers
// (a 512 MiB string, a cluster failing over) and whose code paths the
// race step covers through other tests. CI's plain go test step runs it.
func PlainOnly(t *testing.T, why string) {
	t.Helper()
	if RaceBuild {
		t.Skip("under -race: " + why + "; the plain run tests it")
	}
}

// Main is the TestMain of a package whose tests run the CLI: it builds the
// binary, runs the tests, and removes it. The tests' own connections die
// with the servers they kill: quiet, the MySQL driver's logger here and
// go-redis's by quietRedis (reconcile.QuietRedisLogs, which this package
// cannot import), as the CLI quiets the in-process runs' clients.
func Main(m *testing.M, quietRedis func()) {
	mysql.SetLogger(log.New(io.Discard, "", 0))
	quietRedis()
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f == nil || f.Value.String() == "" {
		// Built before any test starts, so that no test's timing (a
		// server stopped some time into a run) includes the build. A
		// fuzz target's processes, which run no CLI, build nothing.
		if err := buildCLI(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// CLIBinary is the fpdedup binary the CLI tests run (buildCLI).
func CLIBinary(t testing.TB) string {
	t.Helper()
	if err := buildCLI(); err != nil {
		t.Fatal(err)
	}
	return binPath
}

// buildCLI makes the binary once: $FPDEDUP_BIN (built already, by CI or
// to test another build), else one built for the test process, with
// -race under -race.
func buildCLI() error {
	binOnce.Do(func() {
		if bin := os.Getenv("FPDEDUP_BIN"); bin != "" {
			binPath = bin
			return
		}
		binDir, binError = os.MkdirTemp("", "reconcile-test-bin-")
		if binError != nil {
			return
		}
		binPath = filepath.Join(binDir, "fpdedup")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = "/usr/local/go/bin/go" // where Go is installed on the project's machines
		}
		args := []string{"build", "-o", binPath}
		if RaceBuild {
			args = append(args, "-race")
		}
		build := exec.Command(gobin, append(args, "github.com/fpdedup/fpdedup/cmd/fpdedup")...)
		var out bytes.Buffer
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			binError = fmt.Errorf("building fpdedup: %v\n%s", err, out.Bytes())
		}
	})
	return binError
}

// Result is one run of the CLI.
type Result struct {
	Code           int
	Stdout, Stderr string
	Secs           float64
}

// Fpdedup runs the binary in dir with env added to the test's environment.
func Fpdedup(t *testing.T, dir string, env []string, args ...string) Result {
	t.Helper()
	return FpdedupCtx(t, context.Background(), dir, env, args...)
}

// FpdedupCtx is Fpdedup, the process killed when ctx is done.
func FpdedupCtx(t *testing.T, ctx context.Context, dir string, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.CommandContext(ctx, CLIBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Secs: time.Since(start).Seconds()}
	if os.Getenv("FPDEDUP_TEST_TIMES") != "" {
		t.Logf("%.2f s: fpdedup %s", r.Secs, strings.Join(args, " "))
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running fpdedup %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// Want fails unless r exited with code.
func (r Result) Want(t *testing.T, code int) Result {
	t.Helper()
	if r.Code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.Code, code, Head(r.Stdout), r.Stderr)
	}
	return r
}

// RunAsync runs the CLI in the background; the result comes on the
// channel.
func RunAsync(t *testing.T, dir string, env []string, args ...string) <-chan Result {
	done := make(chan Result, 1)
	go func() { done <- Fpdedup(t, dir, env, args...) }()
	return done
}

// Head is s cut at 2000 bytes, for a message.
func Head(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
