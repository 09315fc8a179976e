package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/fpdedup/fpdedup/bench/gen"
)

// generate writes the inputs of the chosen jobs into the work directory:
//
//	events.txt      Records lines (the lines format: each line is a key)
//	absent.txt      the same lines with their first byte, always 'u', made
//	                'x': as many keys, of the same lengths, none in the index
//	events.csv      the same records as CSV with a header
//	*.zst           zstd copies (level 3, what `zstd` does by default)
//	bounded.txt     boundedMinRecords lines for the bounded dedup job, when
//	                events.txt is smaller than that
//	events.parquet  the CSV's records typed, for the Parquet jobs
//
// events.txt is always written (the report's data is its records); the
// others only for the jobs that read them.
func (b *runner) generate(ctx context.Context) error {
	start := time.Now()
	o := b.o
	d := &b.rep.Data
	d.Records = o.Records
	// Lines and CSV, their zstd copies, absent.txt, the hex dumps of the
	// halves and an index: about four times the lines file. sort -u spills
	// to the work directory only when it runs out of -S.
	need := 4 * o.Records * 52
	if b.sel["merge-partitions"] || b.sel["build-partitions"] {
		// The hex file (33 B a key), the partitions, the overlapping
		// indexes, the single build and the outputs (~17.5 B a key each).
		need += o.Records * 300
	}
	if free := freeBytes(b.work); free >= 0 && free < need {
		return fmt.Errorf("bench: %d records need about %d MB free in %s, there are %d MB: use fewer --records or another TMPDIR",
			o.Records, need/1_000_000, b.rep.Machine.TmpDir, free/1_000_000)
	}
	wantAbsent := b.sel["query-absent"]
	wantParquet := b.sel["mem"] || slices.ContainsFunc(ParquetJobs, func(j string) bool { return b.sel[j] })
	wantCSV := b.sel["dedup-csv"] || b.sel["dedup-zstd"] || wantParquet
	wantLinesZst := b.sel["build"] || b.sel["dedup-lines"] // their zstd -dc floors

	b.progress(Step{Phase: "prepare", Msg: fmt.Sprintf("generating %d records", o.Records)})
	half := &splitter{want: o.Records / 2, at: -1}
	var absent *absentWriter
	st, err := b.genFile(ctx, "events.txt", gen.Options{Records: o.Records, Seed: o.Seed, Format: "lines"}, func(w io.Writer) io.Writer {
		if !wantAbsent {
			return io.MultiWriter(w, half)
		}
		f, err := os.Create(b.path("absent.txt"))
		if err != nil {
			return errWriter{err}
		}
		absent = &absentWriter{w: bufio.NewWriterSize(f, 1<<20), f: f, atStart: true}
		return io.MultiWriter(w, absent, half)
	})
	if err == nil && absent != nil {
		err = absent.close()
	}
	if err != nil {
		return err
	}
	d.Distinct, d.LinesBytes = st.Distinct, st.Bytes
	if wantAbsent {
		d.AbsentBytes = st.Bytes
	}
	d.BytesPerRecord = float64(st.Bytes) / float64(st.Records)
	b.mid = half.at

	if wantCSV {
		cs, err := b.genFile(ctx, "events.csv", gen.Options{Records: o.Records, Seed: o.Seed, Format: "csv"}, nil)
		if err != nil {
			return err
		}
		d.CSVBytes = cs.Bytes
	}
	if wantParquet {
		b.progress(Step{Phase: "prepare", Msg: "writing events.parquet"})
		if d.ParquetBytes, d.ParquetRowGroupBytes, err = writeParquetEvents(ctx, b.path("events.csv"), b.path("events.parquet")); err != nil {
			return fmt.Errorf("bench: writing events.parquet: %w", err)
		}
	}

	b.boundedPath = b.path("events.txt")
	if b.sel["dedup-bounded"] {
		d.BoundedRecords, d.BoundedDistinct, d.BoundedBytes = d.Records, d.Distinct, d.LinesBytes
	}
	if o.Records < boundedMinRecords && b.sel["dedup-bounded"] {
		b.boundedPath = b.path("bounded.txt")
		bs, err := b.genFile(ctx, "bounded.txt", gen.Options{Records: boundedMinRecords, Seed: o.Seed, Format: "lines"}, nil)
		if err != nil {
			return err
		}
		d.BoundedRecords, d.BoundedDistinct, d.BoundedBytes = bs.Records, bs.Distinct, bs.Bytes
		b.note("The bounded dedup job reads its own %d-record file: --mem %s dedup of %d records stays in memory mode.",
			boundedMinRecords, o.BoundedMem, o.Records)
	}

	if wantLinesZst || b.sel["dedup-zstd"] {
		b.progress(Step{Phase: "prepare", Msg: "compressing the zstd copies"})
	}
	if wantLinesZst {
		if d.LinesZstBytes, err = compressFile(ctx, b.path("events.txt")); err != nil {
			return err
		}
	}
	if b.sel["dedup-zstd"] {
		if d.CSVZstBytes, err = compressFile(ctx, b.path("events.csv")); err != nil {
			return err
		}
		d.ZstdRatio = float64(d.CSVBytes) / float64(max(d.CSVZstBytes, 1))
	}
	d.GenSeconds = time.Since(start).Seconds()
	return nil
}

// genFile writes name from Generate; wrap may tee the stream elsewhere.
func (b *runner) genFile(ctx context.Context, name string, o gen.Options, wrap func(io.Writer) io.Writer) (gen.Stats, error) {
	f, err := os.Create(b.path(name))
	if err != nil {
		return gen.Stats{}, err
	}
	defer f.Close()
	var w io.Writer = ctxWriter{ctx, f}
	if wrap != nil {
		w = wrap(w)
	}
	st, err := gen.Generate(w, o)
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return st, context.Cause(ctx)
		}
		return st, fmt.Errorf("bench: generating %s: %w", name, err)
	}
	return st, nil
}

// compressFile writes path.zst and returns its size.
func compressFile(ctx context.Context, path string) (int64, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(path + ".zst")
	if err != nil {
		return 0, err
	}
	defer out.Close()
	zw, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(runtime.NumCPU()))
	if err != nil {
		return 0, err
	}
	if _, err = io.Copy(zw, ctxReader{ctx, in}); err != nil {
		zw.Close()
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		return 0, fmt.Errorf("bench: compressing %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := out.Close(); err != nil {
		return 0, err
	}
	st, err := os.Stat(path + ".zst")
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// ctxWriter and ctxReader stop a long copy when the run is cancelled.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

// absentWriter copies generated lines with the first byte of every line
// replaced by 'x'. Generated lines all begin with 'u', so none of its lines
// is a key of the index built from the originals: an exact "all absent"
// input with the originals' lengths.
type absentWriter struct {
	w       *bufio.Writer
	f       *os.File
	atStart bool
	buf     []byte
}

func (a *absentWriter) Write(p []byte) (int, error) {
	a.buf = append(a.buf[:0], p...)
	b := a.buf
	if a.atStart && len(b) > 0 {
		b[0] = 'x'
	}
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		if i >= len(b) {
			break
		}
		b[i] = 'x'
	}
	if len(b) > 0 {
		a.atStart = b[len(b)-1] == '\n'
	}
	if _, err := a.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (a *absentWriter) close() error {
	err := a.w.Flush()
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// splitter finds the byte offset just after the want-th line.
type splitter struct {
	want, lines, off, at int64
}

func (s *splitter) Write(p []byte) (int, error) {
	if s.at < 0 {
		c := int64(bytes.Count(p, []byte{'\n'}))
		if s.lines+c < s.want {
			s.lines += c
		} else {
			for i, ch := range p {
				if ch == '\n' {
					s.lines++
					if s.lines == s.want {
						s.at = s.off + int64(i) + 1
						break
					}
				}
			}
		}
	}
	s.off += int64(len(p))
	return len(p), nil
}
