package pipeline

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/jsontext"
)

// QueryOutput selects what Query writes.
type QueryOutput int

const (
	QueryAll         QueryOutput = iota // "present\tKEY" / "absent\tKEY"
	QueryOnlyPresent                    // the present keys, verbatim
	QueryOnlyAbsent                     // the absent keys, verbatim
	QueryCountOnly                      // nothing per key
	QueryJSON                           // one JSON object a line (AppendQueryJSON)
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

// queryBatch bounds how many keys are looked up together; a batch is also
// at most one chunk's records (1 MiB of input: ~20k lines of the benchmark's
// events). Large batches let fpstore take the keys in index order (see
// Set.ContainsBatch). The buffers grow to what the chunks need.
const queryBatch = 1 << 16

// Query answers for every key read from the inputs (stdin when none), in
// input order, writing to out as opts.Output says.
func Query(ctx context.Context, opts QueryOptions, inputs []string, out io.Writer) (QueryStats, error) {
	opts.Threads, inputs, opts.Progress = runDefaults(opts.Threads, inputs, opts.Progress)
	var present, absent atomic.Int64
	headers := newHeaders()
	term := opts.Records.Spec.Term
	// In JSON, records keyed by fields print their key (joined fields)
	// beside the record; whole records and hex lines are their own key,
	// and a Parquet row has no text but its key.
	f := opts.Records.Spec.Format
	withRecord := opts.Output == QueryJSON && f != ingest.FormatLines && f != ingest.FormatParquet && !opts.Records.HexInput
	newWork := func() chunkWork {
		var fps []fpstore.Fingerprint
		var keys, recs [][]byte
		var arena []byte // copies of joined keys, which the keyer reuses
		var found []bool
		var look fpstore.Lookups
		w := newRecordWorker(&opts.Records, headers)
		var keyer *ingest.Keyer
		return func(job chunkJob, buf []byte) ([]byte, error) {
			n := int64(0)
			flush := func() error {
				if len(fps) == 0 {
					return nil
				}
				if cap(found) < len(fps) {
					found = make([]bool, len(fps))
				}
				if err := containsBatch(opts.Set, opts.Progress, job.chunk, fps, found[:len(fps)], &look); err != nil {
					return err
				}
				p := int64(0)
				switch opts.Output {
				case QueryOnlyPresent, QueryOnlyAbsent:
					buf = appendSelected(buf, keys, found, opts.Output == QueryOnlyPresent, term)
				default:
					for i, key := range keys {
						if opts.Output == QueryJSON {
							var rec []byte
							if withRecord {
								rec = recs[i]
							}
							buf = AppendQueryJSON(buf, key, rec, fps[i], found[i])
						} else {
							buf = appendAnswer(buf, opts.Output, found[i], key, term)
						}
					}
				}
				for _, ok := range found[:len(fps)] {
					if ok {
						p++
					}
				}
				present.Add(p)
				absent.Add(int64(len(fps)) - p)
				fps, keys, recs, arena = fps[:0], keys[:0], recs[:0], arena[:0]
				return nil
			}
			err := w.each(job, func(rec []byte, fp fpstore.Fingerprint) error {
				n++
				fps = append(fps, fp)
				// The record is printed as read, without its terminator
				// (a Parquet row's key text escaped on a line of text; its
				// bytes in JSON, which escapes them itself).
				var line []byte
				if opts.Output == QueryJSON {
					line = opts.Records.Spec.TrimEnd(rec)
				} else {
					line = opts.Records.Spec.PrintedLine(rec)
				}
				if withRecord {
					key, err := recordKey(&keyer, opts.Records.Spec, headers, job, rec)
					if err != nil {
						return err
					}
					start := len(arena)
					arena = append(arena, key...)
					keys = append(keys, arena[start:len(arena):len(arena)])
					recs = append(recs, line)
				} else {
					keys = append(keys, line)
				}
				if len(fps) == queryBatch {
					return flush()
				}
				return nil
			})
			if err == nil {
				err = flush()
			}
			fps, keys, recs, arena = fps[:0], keys[:0], recs[:0], arena[:0]
			opts.Progress.Records.Add(n)
			return buf, err
		}
	}
	err := runOrdered(ctx, readOptions{Inputs: inputs, Records: opts.Records, Progress: opts.Progress, Headers: headers, Flush: func() error { return flushAll(out) }}, max(opts.Threads, 1), newWork, func(b []byte) error {
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
	found := make([]bool, 1)
	var look fpstore.Lookups
	for _, k := range keys {
		fp := opts.Records.Hash.Sum([]byte(k))
		if opts.Records.HexInput {
			var err error
			if fp, err = fpstore.ParseHex([]byte(k)); err != nil {
				return st, fmt.Errorf("argument %q: %w", k, err)
			}
		}
		if err := opts.Set.ContainsBatch([]fpstore.Fingerprint{fp}, found, &look); err != nil {
			return st, err
		}
		st.Keys++
		if found[0] {
			st.Present++
		} else {
			st.Absent++
		}
		if opts.Output == QueryJSON {
			buf = AppendQueryJSON(buf[:0], []byte(k), nil, fp, found[0])
		} else {
			buf = appendAnswer(buf[:0], opts.Output, found[0], []byte(k), opts.Records.Spec.Term)
		}
		if _, err := out.Write(buf); err != nil {
			return st, err
		}
	}
	return st, nil
}

// recordKey keys rec again, for the JSON output: the worker's keyer is its
// own, so a second one, made the same way (the same spec and header), gives
// the joined key bytes that were hashed.
func recordKey(k **ingest.Keyer, spec ingest.KeySpec, headers *Headers, job chunkJob, rec []byte) ([]byte, error) {
	if *k == nil {
		var hdr []byte
		if spec.Header {
			hdr = headers.First()
		}
		keyer, err := ingest.NewKeyer(spec, hdr)
		if err != nil {
			return nil, ingest.InInput(err, job.name)
		}
		*k = keyer
	}
	// As recordWorker.each: the first record of an input without a header
	// may start with a BOM that is not part of its key.
	c := job.chunk
	first := c.FirstRecord == 1 && job.skip == 0 && !job.header && len(rec) > 0 && len(c.Data) > 0 && &rec[0] == &c.Data[0]
	return (*k).Key(rec, first)
}

// AppendQueryJSON appends the JSON line query --json prints for one key:
//
//	{"key":"u1:d1","fingerprint":"<32 lowercase hex>","present":true}
//
// The key is its bytes as a JSON string when they are valid UTF-8 (any
// JSON parser gives them back exactly: \", \\, \n, \r, \t and \u00XX
// for the other control bytes, NUL included); otherwise "key_base64" holds
// them in standard base64 (RFC 4648, padded). A record (rec non-nil: the
// record a key was read from, without its terminator) follows as "record"
// or "record_base64" by the same rule. The line ends with '\n'.
func AppendQueryJSON(buf, key, rec []byte, fp fpstore.Fingerprint, present bool) []byte {
	buf = append(buf, '{')
	buf = jsontext.AppendBytes(buf, "key", key)
	if rec != nil {
		buf = append(buf, ',')
		buf = jsontext.AppendBytes(buf, "record", rec)
	}
	buf = append(buf, `,"fingerprint":"`...)
	buf = fp.AppendHex(buf)
	if present {
		buf = append(buf, `","present":true}`...)
	} else {
		buf = append(buf, `","present":false}`...)
	}
	return append(buf, '\n')
}

// appendSelected appends the keys whose answer is want, each followed by
// term. A key that is followed by term in its chunk is output as the bytes
// it was read as, so the keys that follow one another in the chunk go out
// in one copy: runs of present keys are the usual output of query --only
// present (the per-key appends and copies showed in its profile).
func appendSelected(buf []byte, keys [][]byte, found []bool, want bool, term byte) []byte {
	var run []byte // selected keys with their terminators, contiguous in a chunk
	for i, key := range keys {
		if found[i] != want {
			continue
		}
		if n := len(key); cap(key) > n && key[:n+1][n] == term {
			rec := key[:n+1]
			if r := len(run); r > 0 && cap(run)-r >= len(rec) && &run[:r+1][r] == &rec[0] {
				run = run[:r+len(rec)]
				continue
			}
			buf = append(buf, run...)
			run = rec
			continue
		}
		buf = append(buf, run...)
		run = nil
		buf = append(append(buf, key...), term)
	}
	return append(buf, run...)
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
