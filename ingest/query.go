package ingest

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
)

// QueryOutput selects what Query writes.
type QueryOutput int

const (
	QueryAll         QueryOutput = iota // "present\tKEY" / "absent\tKEY"
	QueryOnlyPresent                    // the present keys, verbatim
	QueryOnlyAbsent                     // the absent keys, verbatim
	QueryCountOnly                      // nothing per key
)

// QueryOptions configure Query.
type QueryOptions struct {
	Set       *fpstore.Set
	Hash      Hash
	HexInput  bool // keys are hex fingerprints (--fp)
	Term      byte // '\n' or 0 (-z), for input and output
	Output    QueryOutput
	Threads   int
	MaxRecord int
	Progress  *Progress
}

// QueryStats count the answers.
type QueryStats struct {
	Keys    int64 `json:"keys"`
	Present int64 `json:"present"`
	Absent  int64 `json:"absent"`
}

// queryBatch is how many keys are looked up together: enough for the
// lookups' memory accesses to overlap, small enough to stay in cache.
const queryBatch = 256

// Query answers for every key read from the inputs (stdin when none), in
// input order, writing to out as opts.Output says.
func Query(ctx context.Context, opts QueryOptions, inputs []string, out io.Writer) (QueryStats, error) {
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	var present, absent atomic.Int64
	newWork := func() chunkWork {
		fps := make([]fpstore.Fingerprint, 0, queryBatch)
		keys := make([][]byte, 0, queryBatch)
		found := make([]bool, queryBatch)
		scratch := make([]bool, queryBatch)
		return func(job chunkJob, buf []byte) ([]byte, error) {
			var err error
			n := int64(0)
			flush := func() {
				if len(fps) == 0 || err != nil {
					return
				}
				if err = opts.Set.ContainsBatch(fps, found[:len(fps)], scratch[:len(fps)]); err != nil {
					return
				}
				p := int64(0)
				for i, key := range keys {
					buf = appendAnswer(buf, opts.Output, found[i], key, opts.Term)
					if found[i] {
						p++
					}
				}
				present.Add(p)
				absent.Add(int64(len(fps)) - p)
				fps, keys = fps[:0], keys[:0]
			}
			SplitRecords(job.chunk.Data, opts.Term, func(rec []byte) bool {
				fp, perr := keyFingerprint(opts.Hash, opts.HexInput, rec)
				if perr != nil {
					err = &RecordError{Name: job.name, Line: job.chunk.FirstLine + n, Record: job.chunk.FirstRecord + n, Err: perr}
					return false
				}
				n++
				fps = append(fps, fp)
				keys = append(keys, rec)
				if len(fps) == queryBatch {
					flush()
				}
				return err == nil
			})
			flush()
			opts.Progress.Records.Add(n)
			return buf, err
		}
	}
	err := runOrdered(ctx, readOptions{inputs, opts.Term, opts.MaxRecord, opts.Progress}, max(opts.Threads, 1), newWork, func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		_, err := out.Write(b)
		return err
	})
	st := QueryStats{Present: present.Load(), Absent: absent.Load()}
	st.Keys = st.Present + st.Absent
	return st, err
}

// QueryKeys answers for keys given as arguments.
func QueryKeys(opts QueryOptions, keys []string, out io.Writer) (QueryStats, error) {
	var st QueryStats
	var buf []byte
	found, scratch := make([]bool, 1), make([]bool, 1)
	for _, k := range keys {
		fp, err := keyFingerprint(opts.Hash, opts.HexInput, []byte(k))
		if err != nil {
			return st, fmt.Errorf("argument %q: %w", k, err)
		}
		if err := opts.Set.ContainsBatch([]fpstore.Fingerprint{fp}, found, scratch); err != nil {
			return st, err
		}
		st.Keys++
		if found[0] {
			st.Present++
		} else {
			st.Absent++
		}
		buf = appendAnswer(buf[:0], opts.Output, found[0], []byte(k), opts.Term)
		if _, err := out.Write(buf); err != nil {
			return st, err
		}
	}
	return st, nil
}

func keyFingerprint(h Hash, hexInput bool, rec []byte) (fpstore.Fingerprint, error) {
	if hexInput {
		return fpstore.ParseHex(rec)
	}
	return h.Sum(rec), nil
}

func appendAnswer(buf []byte, mode QueryOutput, found bool, key []byte, term byte) []byte {
	switch mode {
	case QueryAll:
		if found {
			buf = append(buf, "present\t"...)
		} else {
			buf = append(buf, "absent\t"...)
		}
	case QueryOnlyPresent:
		if !found {
			return buf
		}
	case QueryOnlyAbsent:
		if found {
			return buf
		}
	case QueryCountOnly:
		return buf
	}
	buf = append(buf, key...)
	return append(buf, term)
}
