package pipeline

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
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
	Set      *fpstore.Set
	Records  ingest.RecordOptions // Spec.Term ('\n' or 0 for -z) ends output lines too
	Output   QueryOutput
	Threads  int
	Progress *ingest.Progress
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
	opts.Threads, inputs, opts.Progress = runDefaults(opts.Threads, inputs, opts.Progress)
	var present, absent atomic.Int64
	headers := newHeaders()
	term := opts.Records.Spec.Term
	newWork := func() chunkWork {
		fps := make([]fpstore.Fingerprint, 0, queryBatch)
		keys := make([][]byte, 0, queryBatch)
		found := make([]bool, queryBatch)
		scratch := make([]bool, queryBatch)
		w := newRecordWorker(&opts.Records, headers)
		return func(job chunkJob, buf []byte) ([]byte, error) {
			n := int64(0)
			flush := func() error {
				if len(fps) == 0 {
					return nil
				}
				if err := opts.Set.ContainsBatch(fps, found[:len(fps)], scratch[:len(fps)]); err != nil {
					return err
				}
				p := int64(0)
				for i, key := range keys {
					buf = appendAnswer(buf, opts.Output, found[i], key, term)
					if found[i] {
						p++
					}
				}
				present.Add(p)
				absent.Add(int64(len(fps)) - p)
				fps, keys = fps[:0], keys[:0]
				return nil
			}
			err := w.each(job, func(rec []byte, fp fpstore.Fingerprint) error {
				n++
				fps = append(fps, fp)
				// The record is printed as read, without its terminator.
				keys = append(keys, opts.Records.Spec.TrimEnd(rec))
				if len(fps) == queryBatch {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			fps, keys = fps[:0], keys[:0]
			opts.Progress.Records.Add(n)
			return buf, err
		}
	}
	err := runOrdered(ctx, readOptions{Inputs: inputs, Records: opts.Records, Progress: opts.Progress, Headers: headers}, max(opts.Threads, 1), newWork, func(b []byte) error {
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

// QueryKeys answers for keys given as arguments: each argument is a key
// (or, with HexInput, a hex fingerprint), never a record to parse.
func QueryKeys(opts QueryOptions, keys []string, out io.Writer) (QueryStats, error) {
	var st QueryStats
	var buf []byte
	found, scratch := make([]bool, 1), make([]bool, 1)
	for _, k := range keys {
		fp := opts.Records.Hash.Sum([]byte(k))
		if opts.Records.HexInput {
			var err error
			if fp, err = fpstore.ParseHex([]byte(k)); err != nil {
				return st, fmt.Errorf("argument %q: %w", k, err)
			}
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
		buf = appendAnswer(buf[:0], opts.Output, found[0], []byte(k), opts.Records.Spec.Term)
		if _, err := out.Write(buf); err != nil {
			return st, err
		}
	}
	return st, nil
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
