package pipeline

import (
	"container/heap"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/ingest"
)

// CountOptions configure Count.
type CountOptions struct {
	Inputs   []string // none: stdin
	Records  ingest.RecordOptions
	MinCount uint64 // print only keys seen at least this often (0, 1: all)
	Top      int    // print only the Top most frequent (0: all)
	TSV      bool   // COUNT<TAB>RECORD instead of uniq -c's "%7d RECORD"
	Threads  int
	Mem      int64
	TmpDir   string
	Progress *ingest.Progress
}

// CountStats are the figures of a Count run.
type CountStats struct {
	Records  int64   `json:"records"`
	Distinct int64   `json:"distinct"`
	Printed  int64   `json:"printed"`
	Bytes    int64   `json:"bytes"`          // read from the inputs as stored (compressed) by the first pass; see ingest.Progress.RawBytes
	Runs     int     `json:"runs,omitempty"` // key table runs spilled to --tmpdir
	Seconds  float64 `json:"seconds"`
}

// Count writes each distinct key's first record once, in first-occurrence
// order, with the number of records that have its key: what
// awk '{c[$0]++; if (!o[$0]++) k[++n] = $0} END {for (i = 1; i <= n; i++)
// printf "%7d %s\n", c[k[i]], k[i]}' prints for whole lines, for any key
// recipe. With Top, the Top most frequent, by count and then in first-
// occurrence order. Two passes over the input: the first counts, the second
// writes (stdin is spooled to TmpDir in between).
func Count(ctx context.Context, opts CountOptions, out io.Writer) (CountStats, error) {
	start := time.Now()
	opts.Threads, opts.Inputs, opts.Progress = runDefaults(opts.Threads, opts.Inputs, opts.Progress)
	var st CountStats
	plan := opts.Plan()
	t, second, done, err := twoPasses(ctx, tallyOptions{Inputs: opts.Inputs, Records: opts.Records, Threads: opts.Threads, Tables: plan.Tables, TmpDir: opts.TmpDir, Progress: opts.Progress}, newHeaders())
	defer done()
	if err != nil {
		return st, err
	}
	defer t.free()
	st.Records, st.Distinct, st.Runs, _ = t.figures()
	st.Bytes = opts.Progress.RawBytes.Load()
	term := opts.Records.Spec.Term // -z: lines and Parquet rows end with NUL
	if f := opts.Records.Spec.Format; f != ingest.FormatLines && f != ingest.FormatParquet {
		term = '\n'
	}
	// Second pass: at each key's first occurrence, its line (with --top,
	// what the heap needs).
	var printed atomic.Int64
	bp := t.countsByPosition(plan.Tables, opts.Threads) // the tally's share
	defer bp.free()
	emit := func(buf []byte, count, _ uint64, rec []byte) []byte {
		return appendCountLine(buf, count, second.Records.Spec.PrintedLine(rec), opts.TSV, term)
	}
	if opts.Top > 0 {
		emit = func(buf []byte, count, first uint64, rec []byte) []byte {
			rec = second.Records.Spec.PrintedLine(rec)
			buf = binary.LittleEndian.AppendUint64(buf, count)
			buf = binary.LittleEndian.AppendUint64(buf, first)
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(rec)))
			return append(buf, rec...)
		}
	}
	newWork := firstOccurrenceWork(t, bp, second, opts.MinCount, &printed, emit)
	top := &countHeap{}
	err = runOrdered(ctx, second, opts.Threads, newWork, func(b []byte) error {
		if opts.Top == 0 {
			_, err := out.Write(b)
			return err
		}
		for len(b) >= 20 {
			n := int(binary.LittleEndian.Uint32(b[16:]))
			c := counted{count: binary.LittleEndian.Uint64(b), first: binary.LittleEndian.Uint64(b[8:])}
			if top.Len() < opts.Top || c.better(top.items[0]) {
				c.rec = append([]byte(nil), b[20:20+n]...)
				heap.Push(top, c)
				if top.Len() > opts.Top {
					heap.Pop(top)
				}
			}
			b = b[20+n:]
		}
		return nil
	})
	st.Printed = printed.Load()
	if err != nil {
		return st, err
	}
	if opts.Top > 0 {
		best := top.items
		slices.SortFunc(best, func(a, b counted) int {
			if a.better(b) {
				return -1
			}
			return 1
		})
		var buf []byte
		for _, c := range best {
			buf = appendCountLine(buf, c.count, c.rec, opts.TSV, term)
		}
		st.Printed = int64(len(best))
		if _, err := out.Write(buf); err != nil {
			return st, err
		}
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// firstOccurrenceWork is count's second pass: emit appends, for the
// writer, each key's first occurrence that has at least minCount records
// (its count, its position's order and the record); from bp when there is
// one, else by probing the tally. printed counts them a chunk at a time: an
// atomic add per line makes the workers' cores pass the counter's cache
// line back and forth (bench/results/ab-2026-12-03-s14.md).
func firstOccurrenceWork(t *tallySet, bp *byPosition, second readOptions, minCount uint64, printed *atomic.Int64, emit func(buf []byte, count, first uint64, rec []byte) []byte) func() chunkWork {
	if bp != nil {
		return func() chunkWork {
			return func(job chunkJob, buf []byte) ([]byte, error) {
				var n int64
				eachRecordAt(job, second.Records.Spec, func(rec []byte, at recordPos) {
					if c := bp.count(at); c > 0 && c >= minCount {
						n++
						buf = emit(buf, c, at.order(), rec)
					}
				})
				printed.Add(n)
				return buf, nil
			}
		}
	}
	return func() chunkWork {
		w := newRecordWorker(&second.Records, second.Headers)
		var g tallyGroupReader
		return func(job chunkJob, buf []byte) ([]byte, error) {
			var n int64
			err := g.each(t, w, job, func(rec []byte, e tallyEntry, at recordPos) error {
				if e.at == at.order() && e.count >= minCount {
					n++
					buf = emit(buf, e.count, e.at, rec)
				}
				return nil
			})
			printed.Add(n)
			return buf, err
		}
	}
}

// appendCountLine is uniq -c's "%7d RECORD" (or COUNT<TAB>RECORD), ended
// by the record terminator.
func appendCountLine(buf []byte, count uint64, rec []byte, tsv bool, term byte) []byte {
	var digits [20]byte // on the stack: AppendUint(nil, …) was an allocation a line
	n := strconv.AppendUint(digits[:0], count, 10)
	if tsv {
		buf = append(buf, n...)
		buf = append(buf, '\t')
	} else {
		for i := len(n); i < 7; i++ {
			buf = append(buf, ' ')
		}
		buf = append(buf, n...)
		buf = append(buf, ' ')
	}
	buf = append(buf, rec...)
	return append(buf, term)
}

// counted is a key for --top.
type counted struct {
	count, first uint64
	rec          []byte
}

// better: more records, then earlier.
func (a counted) better(b counted) bool {
	return a.count > b.count || a.count == b.count && a.first < b.first
}

// countHeap keeps the best --top keys, the worst of them on top.
type countHeap struct{ items []counted }

func (h *countHeap) Len() int           { return len(h.items) }
func (h *countHeap) Less(i, j int) bool { return h.items[j].better(h.items[i]) }
func (h *countHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *countHeap) Push(x any)         { h.items = append(h.items, x.(counted)) }
func (h *countHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
