package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench"
)

func newRSSCommand(e *env) *cobra.Command {
	var out string
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "rss -o FILE [--every 10ms] -- COMMAND [ARG...]",
		Short: "Run a command and write its peak anonymous memory, sampled, in KiB",
		Long: `Rss runs COMMAND and samples the anonymous resident memory (RssAnon of
/proc/PID/status) of it and all its descendants, summed, every --every. The
kernel keeps a peak of the total RSS (VmHWM, GNU time's %M) but none of the
anonymous part, which leaves out the page cache of mapped inputs: a sampled
peak is a lower bound of the true one.

It writes the peak in KiB, one number, to FILE, and exits with COMMAND's
status (128+N when signal N ended it), so it can wrap any command line.
SIGINT and SIGTERM are passed on to COMMAND.`,
		Example: `  fpdedup-bench rss -o peak.kib -- fpdedup --mem 64MiB dedup -o out.txt events.txt`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("rss: -o FILE is required")
			}
			if every <= 0 {
				return usageErrorf("rss: --every must be positive")
			}
			c := exec.Command(args[0], args[1:]...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, e.stdout, e.stderr
			// Caught, not ignored: an ignored signal would stay ignored
			// in the command across exec.
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
			defer signal.Stop(sigs)
			peak, err := bench.RunSampled(c, every, sigs)
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				return err
			}
			if werr := os.WriteFile(out, []byte(strconv.FormatInt(peak>>10, 10)+"\n"), 0o644); werr != nil {
				return werr
			}
			if ee != nil {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return exitStatus(128 + int(ws.Signal()))
				}
				return exitStatus(ee.ExitCode())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // COMMAND's own flags are not rss's
	f.StringVarP(&out, "output", "o", "", "write the peak anonymous RSS in KiB to `FILE` (required)")
	f.DurationVar(&every, "every", 10*time.Millisecond, "sampling interval")
	return cmd
}
