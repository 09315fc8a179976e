package apply

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Checkpoint records how far an Apply got: every missing key up to and
// including Last (in fingerprint order) has been written and acknowledged.
// It is saved (atomically and durably: save) about once a
// second and when the run stops, so after a failure it names the exact
// last acknowledged batch; after a SIGKILL at most a second of batches is
// written again, which SET NX / SADD / INSERT IGNORE make harmless. A
// completed run removes it.
//
// A rerun resumes by its own audit, not by skipping up to Last: what the
// earlier run wrote is found present, and a key found missing at or
// before Last was deleted or lost since, so it is written again (counted
// in ApplyStats.MissingAgain), never skipped. The checkpoint
// says how far the earlier run got, and that the rerun is the same run.
type Checkpoint struct {
	Version           int    `json:"version"`
	Index             string `json:"index"`
	IndexFingerprints uint64 `json:"index_fingerprints"`
	Online            string `json:"online"`
	Last              string `json:"last"`
	Written           int64  `json:"written"`
	Updated           string `json:"updated"`

	last    fpstore.Fingerprint
	hasLast bool
}

// loadCheckpoint reads path; a file that does not exist is no checkpoint.
// One written for another index or online side is refused.
func loadCheckpoint(path string, index string, n uint64, target string) (*Checkpoint, error) {
	fresh := &Checkpoint{Version: 1, Index: index, IndexFingerprints: n, Online: target}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fresh, nil
	}
	if err != nil {
		return nil, &online.FileError{Op: "read", File: online.CheckpointFile, Err: err}
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil || c.Version != 1 {
		return nil, &CheckpointError{Path: path, Problem: NotACheckpoint}
	}
	if c.Online != target || c.IndexFingerprints != n {
		return nil, &CheckpointError{Path: path, Problem: OtherRun, FileOnline: c.Online, FileFingerprints: c.IndexFingerprints, Online: target, Fingerprints: n}
	}
	if c.Last != "" {
		fp, ok := online.ParseHex(c.Last)
		if !ok || len(c.Last) != 32 {
			return nil, &CheckpointError{Path: path, Problem: BadLast, Last: c.Last}
		}
		c.last, c.hasLast = fp, true
	}
	return &c, nil
}

func (c *Checkpoint) advance(fp fpstore.Fingerprint, n int64) {
	c.last, c.hasLast = fp, true
	c.Last = fp.String()
	c.Written += n
}

// save publishes the checkpoint as every output is published
// (atomicfile: temp file, fsync, rename, directory fsync, each through the
// fault seam), at once rather than at a commit point: it must say how far
// the run got even when the run then fails.
func (c *Checkpoint) save(path string) error {
	c.Updated = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := marshal(c)
	if err != nil {
		return err
	}
	err = atomicfile.WriteFile(nil, path, append(b, '\n'))
	switch {
	case errors.Is(err, atomicfile.ErrNotDurable):
		return &online.FileError{Op: "fsync the directory of", File: online.CheckpointFile, Path: path, Err: err}
	case err != nil:
		return &online.FileError{Op: "write", File: online.CheckpointFile, Path: path, Err: err}
	}
	return nil
}

// marshal indents and keeps & < > as they are (URLs read better).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
