package ingest

import (
	"sync"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// RecordOptions say how records are read and keyed; build, query and
// dedup share them, so one record gives one fingerprint everywhere.
type RecordOptions struct {
	Spec      KeySpec
	Hash      Hash
	HexInput  bool // records are hex fingerprints (build --format fp, query --fp)
	OnBad     *BadPolicy
	MaxRecord int
	// Rows is how the rows of Parquet records are written (dedup's
	// outputs): --output-format.
	Rows RowFormat
}

// BadPolicy is --on-bad: fail (stop at the first bad record, exit 2), skip
// (count it), or quarantine=FILE (count it and write it there verbatim).
// Safe for concurrent use.
type BadPolicy struct {
	mode string
	path string
	mu   sync.Mutex
	file *atomicfile.File
	err  error // the quarantine file's first write failure
	// streaming: a too-long record is being written in pieces
	// (Overlong); streamed (on mu) wakes Handle when it is whole.
	streaming bool
	streamed  sync.Cond
	n         atomic.Int64
	first     *RecordError
	rows      badRows // Parquet rows to quarantine (badrows.go)
}

// ParseOnBad reads an --on-bad value.
func ParseOnBad(s string) (*BadPolicy, error) {
	switch {
	case s == "fail" || s == "":
		return &BadPolicy{mode: "fail"}, nil
	case s == "skip":
		return &BadPolicy{mode: "skip"}, nil
	case len(s) > len("quarantine=") && s[:len("quarantine=")] == "quarantine=":
		p := &BadPolicy{mode: "quarantine", path: s[len("quarantine="):]}
		p.streamed.L = &p.mu
		return p, nil
	}
	return nil, &OnBadError{Value: s}
}

// Quarantines reports whether bad records are written to a file.
func (p *BadPolicy) Quarantines() bool { return p != nil && p.mode == "quarantine" }

// Tolerates reports whether bad records are counted (skip, quarantine)
// rather than fatal (fail).
func (p *BadPolicy) Tolerates() bool { return p != nil && p.mode != "fail" }

// Count is the number of bad records seen.
func (p *BadPolicy) Count() int64 {
	if p == nil {
		return 0
	}
	return p.n.Load()
}

// First is the first bad record's error, for the summary; nil if none.
func (p *BadPolicy) First() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first == nil {
		return nil
	}
	return p.first
}

func (p *BadPolicy) count(re *RecordError, _ []byte) {
	p.n.Add(1)
	if re != nil {
		p.mu.Lock()
		if p.first == nil {
			p.first = re
		}
		p.mu.Unlock()
	}
}

// Handle applies the policy to one bad record: re under fail; else the
// record is counted and, under quarantine, written there unchanged (rec
// may be nil: a bad record with no bytes to keep).
func (p *BadPolicy) Handle(re *RecordError, rec []byte) error {
	if !p.Tolerates() {
		return re
	}
	p.count(re, rec)
	if p.mode != "quarantine" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if re.RowGroup > 0 {
		return p.keepRow(re) // copied when the run commits
	}
	for p.streaming {
		p.streamed.Wait() // a too-long record is being written: keep it whole
	}
	return p.write(rec)
}

// write appends to the quarantine file, made at the first bad record; the
// first failure sticks. Called with mu held.
func (p *BadPolicy) write(b []byte) error {
	if p.err != nil {
		return p.err
	}
	if p.file == nil {
		f, err := atomicfile.Create(p.path)
		if err != nil {
			p.err = &QuarantineError{Path: p.path, Err: err}
			return p.err
		}
		p.file = f
	}
	if _, err := p.file.Write(b); err != nil {
		p.err = &QuarantineError{Path: p.path, Err: err, Writing: true}
	}
	return p.err
}

// Overlong is a ChunkReader's Overlong hook: under quarantine, the pieces
// of a too-long record go to the file as the reader passes them, so the
// record is kept verbatim though it was never held in memory. Other bad
// records wait (Handle) until its last piece is written.
func (p *BadPolicy) Overlong(part []byte, end bool) {
	if p == nil || p.mode != "quarantine" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(part) > 0 {
		_ = p.write(part) // a failure sticks: CountOverlong reports it
	}
	p.streaming = !end
	if end {
		p.streamed.Broadcast()
	}
}

// CountOverlong counts a too-long record whose bytes Overlong took, and
// reports a failure to write them.
func (p *BadPolicy) CountOverlong(re *RecordError) error {
	p.count(re, nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Quarantine is the quarantine=FILE path, "" under fail and skip.
func (p *BadPolicy) Quarantine() string {
	if p == nil {
		return ""
	}
	return p.path
}

// Close hands the quarantine file to g, to be published with the run's
// other outputs, when the run succeeded, and removes it otherwise.
func (p *BadPolicy) Close(g *atomicfile.Group, success bool) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.closeSources()
	if success && p.err == nil {
		if err := p.writeRows(); err != nil {
			if p.file != nil {
				p.file.Abort()
				p.file = nil
			}
			return err
		}
	}
	if p.file == nil {
		return nil
	}
	f := p.file
	p.file = nil
	if !success {
		f.Abort()
		return nil
	}
	return g.Finish(f)
}
