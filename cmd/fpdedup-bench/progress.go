package main

import (
	"fmt"
	"os"

	"golang.org/x/term"

	"github.com/fpdedup/fpdedup/bench"
)

// progress shows which job, which tool, run k of n: one line redrawn in
// place on a terminal, a line per finished run otherwise (--progress
// never: nothing; always: redrawn even when stderr is not a terminal).
type progress struct {
	e        *env
	terminal bool
	off      bool
	drawn    bool
}

func newProgress(e *env) *progress {
	p := &progress{e: e, off: e.progress == "never", terminal: e.progress == "always"}
	if f, ok := e.stderr.(*os.File); ok && e.progress == "auto" {
		p.terminal = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *progress) step(s bench.Step) {
	if p.off {
		return
	}
	where := fmt.Sprintf("bench [%d/%d %s]", s.JobIndex, s.Jobs, s.Job)
	if s.Job == "" {
		where = "bench"
	}
	run := fmt.Sprintf("run %d/%d", s.Run, s.Runs)
	if s.Run == 0 {
		run = "warm-up run"
	}
	var line string
	switch s.Phase {
	case "prepare", "lookup":
		line = where + " " + s.Msg
	case "run":
		if !p.terminal {
			return
		}
		line = fmt.Sprintf("%s %s: %s…", where, s.Tool, run)
	case "done":
		line = fmt.Sprintf("%s %s: %s %.2f s", where, s.Tool, run, s.WallS)
	default:
		return
	}
	if p.terminal {
		fmt.Fprintf(p.e.stderr, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.e.stderr, line)
}

func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.e.stderr, "\r\033[K")
	}
}
