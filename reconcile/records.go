package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// RecordStats are the figures of the pass over --records.
type RecordStats struct {
	Inputs   int     `json:"inputs"`
	Records  int64   `json:"records"`
	Bytes    int64   `json:"bytes"`
	Missing  int64   `json:"missing_records"` // records whose key is missing online (repeats included)
	Backfill string  `json:"backfill,omitempty"`
	Written  int64   `json:"backfill_records"`
	Digests  int64   `json:"digests,omitempty"` // distinct whole digests collected for --apply
	Seconds  float64 `json:"seconds"`
}

// recordsPass reads the --records inputs (lines format: each line is a
// key, byte for byte) and, for each record whose fingerprint is in
// missing, writes the record unchanged, terminator included, to the
// backfill output (in input order), and collects its whole SHA-256 digest
// when collect is set.
func recordsPass(ctx context.Context, o *Options, missing *fpstore.Index, bf *atomicfile.File, collect *[][32]byte, st *RecordStats) error {
	start := time.Now()
	defer func() { st.Seconds = time.Since(start).Seconds() }()
	var bw *bufio.Writer
	if bf != nil {
		bw = bufio.NewWriterSize(bf, 1<<20)
	}
	maxDigests := max(o.Mem/2/32, 1<<16)
	var (
		fps    []fpstore.Fingerprint
		digs   [][32]byte
		recs   [][]byte
		found  []bool
		noKeys = missing.Len() == 0
	)
	for _, name := range o.Records {
		st.Inputs++
		in, err := ingest.Open(name)
		if err != nil {
			return err
		}
		cr := ingest.NewChunkReader(in, in.Name, o.Term, 1<<20, o.MaxRecord)
		for {
			c, err := cr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				in.Close()
				return err
			}
			st.Records += int64(c.Records)
			st.Bytes += int64(len(c.Data))
			if noKeys {
				cr.Release(c)
				continue
			}
			fps, digs, recs = fps[:0], digs[:0], recs[:0]
			ingest.SplitFormat(c.Data, ingest.FormatLines, o.Term, func(rec []byte) bool {
				key := rec
				if n := len(key); n > 0 && key[n-1] == o.Term {
					key = key[:n-1]
				}
				d := sha256.Sum256(key)
				fps = append(fps, fpstore.FromBytes(d[:16]))
				digs = append(digs, d)
				recs = append(recs, rec)
				return true
			})
			if cap(found) < len(fps) {
				found = make([]bool, len(fps))
			}
			found = found[:len(fps)]
			if err := missing.ContainsBatch(fps, found); err != nil {
				in.Close()
				return err
			}
			for i, ok := range found {
				if !ok {
					continue
				}
				st.Missing++
				if bw != nil {
					if _, err := bw.Write(recs[i]); err != nil {
						in.Close()
						return fmt.Errorf("cannot write --backfill: %w", err)
					}
					st.Written++
				}
				if collect != nil {
					if int64(len(*collect)) >= maxDigests {
						*collect = sortUnique(*collect)
						if int64(len(*collect)) >= maxDigests {
							in.Close()
							return fmt.Errorf("more than %d whole digests to write do not fit in --mem: apply a slice at a time (mysql …&where=, or a partitioned index)", maxDigests)
						}
					}
					*collect = append(*collect, digs[i])
				}
			}
			cr.Release(c)
			if err := ctx.Err(); err != nil {
				in.Close()
				return context.Cause(ctx)
			}
		}
		if err := in.Close(); err != nil {
			return err
		}
	}
	if collect != nil {
		*collect = sortUnique(*collect)
		st.Digests = int64(len(*collect))
	}
	if bw != nil {
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("cannot write --backfill: %w", err)
		}
	}
	return nil
}

func sortUnique(d [][32]byte) [][32]byte {
	slices.SortFunc(d, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(d)
}
