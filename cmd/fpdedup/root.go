package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/sysinfo"
	"github.com/fpdedup/fpdedup/internal/units"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// invocation is one run of fpdedup as every command sees it: the flags all
// commands take, the standard streams, the memory sampler, and whether the
// command declared outputs (for what an interruption says). Commands get it
// as inv.
type invocation struct {
	progress  string
	statsJSON string
	metrics   string
	threads   int
	memText   string
	mem       int64
	quiet     bool
	cpuProf   string
	devRates  string
	devices   *devices // the read rates of the disks under the indexes
	rss       *sysinfo.RSSSampler
	// publishes: the command declared outputs (ioPaths.check), so an
	// interruption is reported as "nothing was published".
	publishes bool
	// jobs: how many jobs the command started (job.go).
	jobs int

	stdin          io.Reader
	stdout, stderr io.Writer
}

func newRootCommand(inv *invocation) *cobra.Command {
	root := &cobra.Command{
		Use:   "fpdedup",
		Short: "Exact, offline deduplication of event records with 128-bit fingerprint indexes",
		Long: `fpdedup builds immutable fingerprint indexes (.fpx), queries them from shell
pipelines, and streams records through them to keep first occurrences, exactly.

A key's fingerprint is XXH3-128 (default) or the first 128 bits of SHA-256 of
its bytes, exactly as read: check one with
  printf %s KEY | xxh128sum        or   printf %s KEY | sha256sum | cut -c1-32

Outputs (-o, --record, --stats-json, …) are written to temp files beside
them and published together at the command's one commit point: a signal
before it publishes nothing (exit 130/143), after it the work is done (exit
0). An output that names an input (standard input too, when it is a file)
is refused before any work, and so are two outputs that land in one place
(one file, FIFO or descriptor under two names; stdout's file or pipe, when
the command writes to stdout too), but for /dev/null; a device, FIFO or
/dev/stdout is written through (a descriptor path through the descriptor
the shell opened, so >> appends); a symlink's target is replaced.

Exit codes: 0 success; 1 a negative answer (query: a key is absent; verify:
the index is damaged; reconcile: the sides differ); 2 usage, input or I/O
error, not an index; 130 on SIGINT, 143 on SIGTERM (nothing published);
141 when the reader of stdout or of an output written through went away
(… | head).`,
		Version:       fmt.Sprintf("%s (index format v%d, reads v%d-v%d)", version, fpstore.FormatVersion, fpstore.MinFormatVersion, fpstore.FormatVersion),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return inv.resolve()
		},
	}
	root.SetVersionTemplate("fpdedup {{.Version}}\n")
	f := root.PersistentFlags()
	f.StringVar(&inv.progress, "progress", "auto", "progress bars on stderr: auto (when stderr is a terminal), always, never")
	f.StringVar(&inv.statsJSON, "stats-json", "", "write the run's figures as JSON to `FILE`")
	f.StringVar(&inv.metrics, "metrics", "", "write the run's figures as Prometheus text to `FILE` (node_exporter textfile collector)")
	f.IntVar(&inv.threads, "threads", runtime.NumCPU(), "worker threads, at most the cores this process may use (more are capped to that: every thread's buffers come out of --mem)")
	f.StringVar(&inv.memText, "mem", "", "bound on anonymous memory, e.g. 512MiB, 4GiB: what grows with the data (tables, blooms, sort buffers, heap) fits in it and spills beyond; ~60 MiB of fixed buffers are the floor, so the process stays within "+memplan.BoundText("--mem", "")+", plus the row groups a Parquet copy holds (dedup --help) (default: half of min(RAM, cgroup limit))")
	f.BoolVarP(&inv.quiet, "quiet", "q", false, "no summary line on stderr")
	f.StringVar(&inv.cpuProf, "cpuprofile", "", "write a CPU profile to `FILE` (for go tool pprof)")
	_ = f.MarkHidden("cpuprofile")
	f.StringVar(&inv.devRates, "device-rates", "", "the disk's read rates that price a large lookup batch in a cold index against reading it whole, rand=READS/S (4KiB at random, many in flight),seq=BYTES/S (read whole) (default: measured once per device on an index of 1GiB or more, said on stderr, never under -q, and cached in ~/.cache/fpdedup; also $FPDEDUP_DEVICE)")
	root.AddCommand(
		newBuildCommand(inv),
		newDedupCommand(inv),
		newCountCommand(inv),
		newReplayCommand(inv),
		newQueryCommand(inv),
		newMergeCommand(inv),
		newDumpCommand(inv),
		newInspectCommand(inv),
		newVerifyCommand(inv),
		newGenCommand(inv),
		newBenchCommand(inv),
		newReconcileCommand(inv),
	)
	inv.adopt(root)
	return root
}

// adopt gives every command under c --version, and holds each to its
// job: a command that succeeds without having run one (job.go) skipped the
// checks, the commit point and the figures every command owes.
func (inv *invocation) adopt(c *cobra.Command) {
	for _, sub := range c.Commands() {
		sub.Version = c.Version
		sub.SetVersionTemplate("fpdedup {{.Version}}\n")
		inv.adopt(sub)
	}
	work := c.RunE
	if work == nil {
		return
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		err := work(cmd, args)
		if err == nil && inv.jobs == 0 {
			return fmt.Errorf("BUG: %s ran without a job", cmd.CommandPath())
		}
		return err
	}
}

func (inv *invocation) resolve() error {
	devs, err := newDevices(inv)
	if err != nil {
		return err
	}
	inv.devices = devs
	switch inv.progress {
	case "auto", "always", "never":
	default:
		return usageErrorf("--progress must be auto, always or never, not %q", inv.progress)
	}
	if inv.threads < 1 {
		return usageErrorf("--threads must be at least 1")
	}
	inv.threads = min(inv.threads, runtime.NumCPU())
	runtime.GOMAXPROCS(inv.threads)
	if inv.memText == "" {
		inv.mem = sysinfo.DefaultMemoryBudget()
	} else {
		m, err := units.ParseSize(inv.memText)
		if err != nil {
			return usageErrorf("--mem: %v", err)
		}
		if m < memplan.MinMem {
			return usageErrorf("--mem %s is below the 16MiB minimum", inv.memText)
		}
		inv.mem = m
	}
	if inv.cpuProf != "" {
		f, err := os.Create(inv.cpuProf)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	hugemem.ResetPeak()
	inv.rss = sysinfo.StartRSSSampler()
	// The Go runtime's soft limit keeps the heap inside the budget; the
	// commands size their tables and spill thresholds from the same figure.
	debug.SetMemoryLimit(inv.mem)
	return nil
}

// summary prints the end-of-run line unless -q.
func (inv *invocation) summary(format string, a ...any) {
	if !inv.quiet {
		fmt.Fprintf(inv.stderr, format+"\n", a...)
	}
}

// run executes the command line and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stdout = stdoutWriter{stdout}
	inv := &invocation{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCommand(inv)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)

	// What run changes of the process (the heap limit, GOMAXPROCS) it puts
	// back, and every goroutine it starts ends before it returns: tests run
	// many commands in one process.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer func() { inv.rss.Stop() }() // started by resolve, if it ran

	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	defer watchSignals(stop)()

	err := root.ExecuteContext(ctx)
	if inv.cpuProf != "" {
		pprof.StopCPUProfile()
	}
	// A nil error means the work is done (and published, past the commit
	// point), whenever a signal came.
	return report(stderr, underSignal(ctx, err, inv.publishes))
}

// watchSignals cancels the run on SIGINT or SIGTERM until the returned
// function is called, which returns once the watcher has ended.
func watchSignals(stop context.CancelCauseFunc) (end func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if sig == syscall.SIGPIPE {
					continue // writes then fail with EPIPE, handled as a closed pipe
				}
				stop(interrupted{sig.(syscall.Signal)})
				hook("signal")
			}
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

// errStdoutClosed: the reader of stdout went away (… | head). Only writes
// to stdout are that: an EPIPE from a socket to Redis or MySQL is an error
// like any other, never a quiet exit 141.
var errStdoutClosed = errors.New("stdout closed by its reader")

// stdoutWriter marks the broken pipes of stdout as errStdoutClosed.
type stdoutWriter struct{ w io.Writer }

func (s stdoutWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		err = fmt.Errorf("%w: %w", errStdoutClosed, err)
	}
	return n, err
}
