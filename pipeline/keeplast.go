package pipeline

import (
	"context"
	"encoding/binary"
	"io"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
)

// dedupKeepLast is Dedup with KeepLast: a first pass tallies each key's
// last occurrence (tally), a second writes each record that is its key's
// last, in input order — what tac | awk '!s[$0]++' | tac prints for whole
// lines. Keys in Against are never kept, as with first occurrences.
func dedupKeepLast(ctx context.Context, opts DedupOptions, out io.Writer) (DedupStats, error) {
	start := time.Now()
	st := DedupStats{Mode: "two passes"}
	// The tally takes the memory of the tables and blooms; the recorder
	// its share.
	parts := int64(4)
	if opts.Record != "" {
		parts = 5
	}
	rec, err := newRecorder(opts, opts.Mem/parts)
	if err != nil {
		return st, err
	}
	defer rec.close()
	t, second, done, err := twoPasses(ctx, tallyOptions{Inputs: opts.Inputs, Records: opts.Records, Threads: opts.Threads, Mem: opts.Mem * 2 / parts, TmpDir: opts.TmpDir, Progress: opts.Progress, Stdin: opts.Stdin, KeepLast: true}, newHeaders())
	defer done()
	if err != nil {
		return st, err
	}
	defer t.free()
	_, _, st.Runs, st.TableBytes = t.figures()
	// The tally's share holds the last occurrences by position beside the
	// table while they are filled; the table is freed then.
	bp := t.countsByPosition(opts.Mem*2/parts, opts.Threads)
	defer bp.free()

	newWork := keepLastWork(t, bp, second, &opts)
	var n dedupCounts
	wroteHeader := !opts.Records.Spec.Header
	var keep, side []byte
	err = runOrdered(ctx, second, opts.Threads, newWork, func(b []byte) error {
		keep, side = keep[:0], side[:0]
		if !wroteHeader {
			keep = append(keep, second.Headers.First()...)
			if opts.Duplicates != nil {
				side = append(side, second.Headers.First()...)
			}
			wroteHeader = true
		}
		for len(b) > 0 {
			s := b[0]
			fp := fpstore.Fingerprint{Hi: binary.LittleEndian.Uint64(b[1:]), Lo: binary.LittleEndian.Uint64(b[9:])}
			l := int(binary.LittleEndian.Uint32(b[17:]))
			r := b[21 : 21+l]
			b = b[21+l:]
			switch s {
			case stateNew:
				n.first++
				if err := rec.add([]fpstore.Fingerprint{fp}); err != nil {
					return err
				}
			case stateDup:
				n.dups++
			case stateAgainst:
				n.inAgainst++
			}
			if (s == stateNew) != opts.EmitDuplicates {
				keep = append(keep, r...)
				n.emitted++
			} else if opts.Duplicates != nil {
				side = append(side, r...)
			}
		}
		if len(keep) > 0 {
			if _, err := out.Write(keep); err != nil {
				return err
			}
		}
		if len(side) > 0 {
			if _, err := opts.Duplicates.Write(side); err != nil {
				return err
			}
		}
		return nil
	})
	st.Records = n.first + n.dups + n.inAgainst
	st.FirstOccurrences, st.Duplicates, st.InAgainst, st.Emitted = n.first, n.dups, n.inAgainst, n.emitted
	st.Distinct = n.first
	st.BadRecords = opts.Records.OnBad.Count()
	st.Bytes = opts.Progress.RawBytes.Load()
	if err != nil {
		return st, err
	}
	// Their memory goes back before the --record writer's buffers are
	// made, so the two never add up.
	t.free()
	bp.free()
	if st.Recorded, err = rec.finish(opts.Threads); err != nil {
		return st, err
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// keepLastWork is the second pass's work: each record's state (its key's
// last occurrence, another, or in Against), its fingerprint and its bytes,
// for the writer to sort out in input order. With bp the last occurrences
// are known by position; without, each key's is looked up in the tally.
func keepLastWork(t *tallySet, bp *byPosition, second readOptions, opts *DedupOptions) func() chunkWork {
	return func() chunkWork {
		w := newRecordWorker(&second.Records, second.Headers)
		var fps []fpstore.Fingerprint
		var recs [][]byte
		var orders []uint64
		var last, found []bool
		var look fpstore.Lookups
		return func(job chunkJob, buf []byte) ([]byte, error) {
			fps, recs, orders, last = fps[:0], recs[:0], orders[:0], last[:0]
			err := w.eachAt(job, func(r []byte, fp fpstore.Fingerprint, at recordPos) error {
				fps, recs = append(fps, fp), append(recs, r)
				if bp != nil {
					last = append(last, bp.count(at) > 0)
				} else {
					orders = append(orders, at.order())
				}
				return nil
			})
			if err != nil {
				return buf, err
			}
			found = append(found[:0], make([]bool, len(fps))...)
			if opts.Against != nil {
				if err := opts.Against.ContainsBatch(fps, found, &look); err != nil {
					return buf, err
				}
			}
			for i, fp := range fps {
				// One byte of state (new, dup, against), the fingerprint,
				// the record.
				isLast := bp != nil && last[i]
				if bp == nil {
					e, err := t.get(fp)
					if err != nil {
						return buf, err
					}
					isLast = e.at == orders[i]
				}
				s := stateDup
				switch {
				case found[i]:
					s = stateAgainst
				case isLast:
					s = stateNew
				}
				buf = append(buf, s)
				buf = binary.LittleEndian.AppendUint64(buf, fp.Hi)
				buf = binary.LittleEndian.AppendUint64(buf, fp.Lo)
				buf = binary.LittleEndian.AppendUint32(buf, uint32(len(recs[i])))
				buf = append(buf, recs[i]...)
			}
			return buf, nil
		}
	}
}
