package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/fpdedup/fpdedup/ingest"
)

// showProgress draws a bar on stderr from p until the returned stop is
// called: bytes against the total input size where known, records/s
// always. It draws nothing with --progress never, or with auto when stderr
// is not a terminal.
func (inv *invocation) showProgress(label string, p *ingest.Progress) (stop func()) {
	show := inv.progress == "always"
	if inv.progress == "auto" {
		f, ok := inv.stderr.(*os.File)
		show = ok && term.IsTerminal(int(f.Fd()))
	}
	if !show {
		return func() {}
	}
	bar := newBar(inv.stderr, label, p.Total.Load())
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				_ = bar.Clear()
				return
			case <-t.C:
				if tot := p.Total.Load(); tot > 0 && bar.GetMax64() != tot {
					bar.ChangeMax64(tot)
				}
				rate := float64(p.Records.Load()) / time.Since(start).Seconds()
				bar.Describe(label + " " + humanRate(rate) + " records/s")
				_ = bar.Set64(p.RawBytes.Load())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// newBar is the bar showProgress draws on w: bytes out of total (-1:
// unknown), in the IEC units (KiB, MiB) of the summaries, so that the bar's
// last figure and the summary's "read" agree. The spinner turns at each
// render (interval 0): with an interval, the library starts a goroutine of
// its own for a bar of unknown length that nothing stops, so it drew on
// stderr after the run had ended.
func newBar(w io.Writer, label string, total int64) *progressbar.ProgressBar {
	return progressbar.NewOptions64(max(total, -1),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetSpinnerChangeInterval(0),
	)
}

// humanRate words a rate with a k or M suffix: 51.0k, 1.2M.
func humanRate(r float64) string {
	switch {
	case r >= 1e6:
		return formatFloat(r/1e6) + "M"
	case r >= 1e3:
		return formatFloat(r/1e3) + "k"
	}
	return formatFloat(r)
}
