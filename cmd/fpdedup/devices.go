package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/devrate"
)

// Device rates (README "Performance", cold indexes). A large lookup batch
// in an index that is not in memory is priced with the read rates of the
// disk under it: --device-rates, else $FPDEDUP_DEVICE, else the figure
// cached for that disk (devrate.CachePath), else devrate.Default. The
// command alone decides when the disk is measured instead: the first time a
// batch in an index of measureAbove bytes or more needs the rates and none
// of these gives them, and never under -q, so that a quiet run (a cron job)
// never spends half a second reading a disk unannounced. A measure is said
// on stderr, and the figure is cached by the job (the cache is declared
// with its outputs, and written after the commit point: a cache that cannot
// be written is a warning, and the disk is measured again next time).
type devices struct {
	fixed *devrate.Rates // --device-rates or $FPDEDUP_DEVICE: nothing else is read
	inv   *invocation

	mu      sync.Mutex
	cache   *devrate.Cache // read when a job that reads an index starts
	measure bool           // a measure may run (not -q)
	keep    bool           // the job may write the cache: declared, and usable
}

// measureAbove is the smallest index whose disk is measured: below it a
// whole read is cheap either way, and the defaults do. (A variable: the
// fault loop lowers it.)
var measureAbove int64 = 1 << 30

// measureFor is how long a measure reads each rate (devrate.Measure).
const measureFor = 250 * time.Millisecond

// newDevices reads the rates --device-rates or $FPDEDUP_DEVICE give; one
// that does not parse is a usage error before any work.
func newDevices(inv *invocation) (*devices, error) {
	d := &devices{inv: inv}
	text, source := inv.devRates, "--device-rates"
	if text == "" {
		text, source = os.Getenv("FPDEDUP_DEVICE"), "$FPDEDUP_DEVICE"
	}
	if text == "" {
		return d, nil
	}
	r, err := devrate.Parse(text, devrate.Default)
	if err != nil {
		if source == "--device-rates" {
			return nil, usageErrorf("--device-rates: %v", err)
		}
		return nil, usageErrorf("$FPDEDUP_DEVICE: %v; fix or unset it (--device-rates overrides it)", err)
	}
	d.fixed = &r
	return d, nil
}

// indexOptions are how the command opens an index it looks keys up in.
func (inv *invocation) indexOptions() []fpstore.Option {
	return []fpstore.Option{fpstore.WithRates(inv.devices.rates)}
}

// declare is the job's part, for a job that reads indexes: it reads the
// cache (a cache that cannot be used is said once, and measured around),
// and declares it as an output when a measure may run on one of them.
func (d *devices) declare(j *job) {
	if d == nil || d.fixed != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cache, err := devrate.ReadCache(devrate.CachePath())
	if err != nil {
		fmt.Fprintln(d.inv.stderr, "fpdedup: warning:", err)
	}
	d.cache = cache
	d.measure = !d.inv.quiet
	if !d.measure || !cache.Writable() || !d.mayMeasure(j.paths.inputs) {
		return
	}
	// Its directory is made now, so that the output is checked as any
	// other: a cache that cannot be written is dropped (paths.usable).
	if err := os.MkdirAll(filepath.Dir(cache.Path()), 0o755); err == nil {
		j.paths.optional("the device cache", cache.Path())
		d.keep = true
	}
}

// mayMeasure tells whether a measure may run on one of the inputs: an
// index large enough whose disk the cache has no figure for.
func (d *devices) mayMeasure(inputs []ioPath) bool {
	for _, in := range inputs {
		if in.kind != kindIndex {
			continue
		}
		if st, err := os.Stat(in.path); err == nil && st.Size() >= measureAbove {
			if _, ok := d.cache.Lookup(in.path); !ok {
				return true
			}
		}
	}
	return false
}

// rates is fpstore.WithRates' question: the rates of the disk under the
// index at path, size bytes, asked when its first cold batch is planned.
func (d *devices) rates(path string, size int64) devrate.Rates {
	if d == nil {
		return devrate.Default
	}
	if d.fixed != nil {
		return *d.fixed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cache == nil { // looked up outside a job: nothing is measured
		return devrate.Default
	}
	if r, ok := d.cache.Lookup(path); ok {
		return r
	}
	if !d.measure || size < measureAbove {
		return devrate.Default
	}
	fmt.Fprintf(d.inv.stderr, "fpdedup: measuring the read rates of the disk under %s (about half a second, once a month; -q or --device-rates skip it)\n", path)
	r, err := devrate.Measure(path, measureFor)
	if err != nil {
		// Not measurable there (tmpfs refuses O_DIRECT; a file mostly in
		// memory says nothing of its disk): the defaults, not cached.
		return devrate.Default
	}
	d.cache.Add(path, r)
	return r
}

// save writes what was measured into the cache, after the job's commit
// point. A cache that cannot be written is a warning: the run's outputs
// are published, and the disk is measured again next time.
func (d *devices) save(j *job) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cache == nil || !d.cache.Changed() || !d.keep || !j.paths.usable(d.cache.Path()) {
		return
	}
	if err := d.cache.Write(nil); err != nil {
		fmt.Fprintf(d.inv.stderr, "fpdedup: warning: the device's read rates were not cached: %v (measured again next time)\n", err)
	}
}
