package pipeline

import (
	"context"
	"encoding/binary"
	"io"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// dedupKeepLast is Dedup with KeepLast: a first pass tallies each key's
// last occurrence (tally), a second writes each record that is its key's
// last, in input order — what tac | awk '!s[$0]++' | tac prints for whole
// lines. Keys in Against are never kept, as with first occurrences.
func dedupKeepLast(ctx context.Context, opts DedupOptions, out io.Writer) (DedupStats, error) {
	start := time.Now()
	st := DedupStats{Mode: "two passes"}
	// The tally takes the plan's tables (those of the seen-set and its
	// blooms); the recorder its sorter.
	plan := opts.planned()
	rec, err := newRecorder(opts, plan.Sorter)
	if err != nil {
		return st, err
	}
	defer rec.close()
	t, second, done, err := twoPasses(ctx, tallyOptions{Inputs: opts.Inputs, Records: opts.Records, Threads: opts.Threads, Tables: plan.Tables, TmpDir: opts.TmpDir, Progress: opts.Progress, Stdin: opts.Stdin, KeepLast: true}, newHeaders())
	defer done()
	if err != nil {
		return st, err
	}
	defer t.free()
	_, _, st.Runs, st.TableBytes = t.figures()
	// The tally's share holds the last occurrences by position beside the
	// table while they are filled; the table is freed then.
	bp := t.countsByPosition(plan.Tables, opts.Threads)
	defer bp.free()

	var rows *parquetRows
	if opts.Records.Spec.Format == ingest.FormatParquet {
		// The second pass copies the rows it keeps from the inputs,
		// which stay open until the copy is done.
		rows = newParquetRows(out, opts.Duplicates, opts.Records.Rows)
		defer rows.close()
		second.Rows = rows
	}
	newWork := keepLastWork(t, bp, second, &opts)
	var n dedupCounts
	var group parquetGroup
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
			if rows != nil {
				if err := group.add(rows, r, (s == stateNew) != opts.EmitDuplicates, opts.Duplicates != nil, &n); err != nil {
					return err
				}
				continue
			}
			if (s == stateNew) != opts.EmitDuplicates {
				keep = append(keep, r...)
				n.emitted++
			} else if opts.Duplicates != nil {
				side = append(side, r...)
			}
		}
		if rows != nil {
			return group.flush(rows)
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
	if err == nil && rows != nil {
		err = rows.finish()
	}
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
		var rowNos []int64
		var last, found []bool
		var look fpstore.Lookups
		return func(job chunkJob, buf []byte) ([]byte, error) {
			fps, recs, orders, last, rowNos = fps[:0], recs[:0], orders[:0], last[:0], rowNos[:0]
			err := w.eachAt(job, func(r []byte, fp fpstore.Fingerprint, at recordPos) error {
				fps, recs, rowNos = append(fps, fp), append(recs, r), append(rowNos, at.record)
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
				if err := containsBatch(opts.Against, second.Progress, job.chunk, fps, found, &look); err != nil { // this pass's bytes
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
				if second.Rows != nil {
					// A row is copied by where it is, not its bytes.
					buf = binary.LittleEndian.AppendUint32(buf, 16)
					buf = binary.LittleEndian.AppendUint32(buf, uint32(job.in))
					buf = binary.LittleEndian.AppendUint32(buf, uint32(job.chunk.RowGroup-1))
					buf = binary.LittleEndian.AppendUint64(buf, uint64(rowNos[i]))
					continue
				}
				buf = binary.LittleEndian.AppendUint32(buf, uint32(len(recs[i])))
				buf = append(buf, recs[i]...)
			}
			return buf, nil
		}
	}
}

// parquetGroup gathers the rows of one Parquet row group that the second
// pass of a --keep last decides, to copy them together.
type parquetGroup struct {
	in, g      int
	keep, side []int64
}

// add takes a row (where it is: input, row group, row) kept or set aside,
// copying what was gathered when the row group changes.
func (pg *parquetGroup) add(rows *parquetRows, at []byte, keep, aside bool, n *dedupCounts) error {
	in, g := int(binary.LittleEndian.Uint32(at)), int(binary.LittleEndian.Uint32(at[4:]))
	row := int64(binary.LittleEndian.Uint64(at[8:]))
	if (in != pg.in || g != pg.g) && len(pg.keep)+len(pg.side) > 0 {
		if err := pg.flush(rows); err != nil {
			return err
		}
	}
	pg.in, pg.g = in, g
	switch {
	case keep:
		pg.keep = append(pg.keep, row)
		n.emitted++
	case aside:
		pg.side = append(pg.side, row)
	}
	return nil
}

func (pg *parquetGroup) flush(rows *parquetRows) error {
	if len(pg.keep)+len(pg.side) == 0 {
		return nil
	}
	err := rows.writeInput(pg.in, pg.g, pg.keep, pg.side)
	pg.keep, pg.side = pg.keep[:0], pg.side[:0]
	return err
}
