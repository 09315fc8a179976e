package bench

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseProc(t *testing.T) {
	if pp, ok := parseStatPPID([]byte("123 (a b) c) S 45 123 123 0 -1")); !ok || pp != 45 {
		t.Errorf("parseStatPPID = %d, %v; want 45", pp, ok)
	}
	status := "Name:\tx\nVmRSS:\t    2264 kB\nRssAnon:\t     152 kB\nRssFile:\t    2112 kB\n"
	if kb, ok := parseRssAnon([]byte(status)); !ok || kb != 152 {
		t.Errorf("parseRssAnon = %d, %v; want 152", kb, ok)
	}
	if _, ok := parseRssAnon([]byte("Name:\tx\n")); ok {
		t.Errorf("parseRssAnon found RssAnon in a status without one")
	}
}

// RunSampled measures the children of the command too (a shell that runs
// a child rather than exec'ing it), returns Wait's error, and passes on
// the signals it is given.
func TestRunSampled(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	peak, err := RunSampled(exec.Command("sh", "-c", "sleep 0.1; exit 3"), 5*time.Millisecond, nil)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("err = %v, want exit status 3", err)
	}
	if peak <= 0 || peak%1024 != 0 {
		t.Errorf("peak = %d bytes, want a positive number of KiB", peak)
	}

	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	_, err = RunSampled(exec.Command("sleep", "5"), 5*time.Millisecond, sigs)
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want the exit of a signalled sleep", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("sleep ended with %v, want killed by SIGTERM", ee)
	}
}
