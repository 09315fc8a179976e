package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// env is what every subcommand shares: the flags of the root and where to
// write.
type env struct {
	progress       string
	quiet          bool
	stdout, stderr io.Writer
}

// summary prints an end-of-run line unless -q.
func (e *env) summary(format string, a ...any) {
	if !e.quiet {
		fmt.Fprintf(e.stderr, format+"\n", a...)
	}
}

// Exit codes: those of fpdedup (README "Exit codes, outputs and signals")
// where they mean the same.
const (
	exitOK        = 0
	exitProblems  = 1 // done, but a row failed or gave a wrong answer
	exitError     = 2
	exitInterrupt = 130
	exitTerm      = 143
)

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usageErrorf(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// problems ends a run that finished but whose report holds failed or wrong
// rows.
type problems struct{ msg string }

func (p problems) Error() string { return p.msg }

// exitStatus is the status of a command run by rss, passed on as this
// process's own.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// interrupted is the cause of a context cancelled by a signal.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

func newRootCommand(e *env) *cobra.Command {
	root := newRunCommand(e)
	root.SilenceUsage, root.SilenceErrors = true, true
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		switch e.progress {
		case "auto", "always", "never":
			return nil
		}
		return usageErrorf("--progress must be auto, always or never, not %q", e.progress)
	}
	f := root.PersistentFlags()
	f.StringVar(&e.progress, "progress", "auto", "progress on stderr: auto (a line redrawn on a terminal, a line per run otherwise), always, never")
	f.BoolVarP(&e.quiet, "quiet", "q", false, "no summary on stderr")
	root.AddCommand(newRSSCommand(e), newFpCommand(e), newBoundCommand(e), newReportCommand(e), newWarmCommand(e), newPagesCommand(e), newRedisBloomBareCommand(e), newEtcdBareCommand(e))
	return root
}

// run executes the command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	root := newRootCommand(e)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)

	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			stop(interrupted{sig.(syscall.Signal)})
		}
	}()
	err := root.ExecuteContext(ctx)
	// An error while a signal is pending is the interruption, whatever
	// the code that saw it made of it; rss passes its command's status
	// on, signalled or not.
	var intr interrupted
	var st exitStatus
	if err != nil && errors.As(context.Cause(ctx), &intr) && !errors.As(err, &st) {
		err = intr
	}
	return report(stderr, err)
}

// report prints err and maps it to an exit code.
func report(stderr io.Writer, err error) int {
	var st exitStatus
	var p problems
	var intr interrupted
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, &p):
		fmt.Fprintln(stderr, "fpdedup-bench:", p.msg)
		return exitProblems
	case errors.As(err, &intr):
		fmt.Fprintln(stderr, "fpdedup-bench:", intr.Error())
		if intr.sig == syscall.SIGTERM {
			return exitTerm
		}
		return exitInterrupt
	}
	msg := err.Error()
	if errors.As(err, &ue) || strings.Contains(msg, "unknown flag") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "arg(s)") {
		msg += "\n  hint: see fpdedup-bench --help, or fpdedup-bench COMMAND --help"
	}
	fmt.Fprintln(stderr, "fpdedup-bench:", msg)
	return exitError
}
