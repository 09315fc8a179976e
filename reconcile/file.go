package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// fileSource reads an export of the online side: one hex fingerprint (32 or
// 64 digits) per line, or with keys one key per line, hashed with SHA-256
// byte for byte. Plain, gzip or zstd, detected by magic bytes; "-" is stdin.
// A line that is not a fingerprint is an error naming the file and line.
type fileSource struct {
	t            *Target
	keys         bool
	narrow, full int64
}

func (f *fileSource) Sorted() bool { return false }

func (f *fileSource) Close() error { return nil }

func (f *fileSource) Wide() (bool, bool) {
	return f.full > 0 && f.narrow == 0, f.narrow+f.full > 0
}

func (f *fileSource) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	st.Expected = -1
	in, err := ingest.Open(f.t.Path)
	if err != nil {
		return err
	}
	defer in.Close()
	cr := ingest.NewChunkReader(in, in.Name, '\n', 1<<20, 0)
	buf := make([]fpstore.Fingerprint, 0, 8192)
	for {
		c, err := cr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		line := c.FirstLine
		var bad error
		ingest.SplitRecords(c.Data, '\n', func(rec []byte) bool {
			var fp fpstore.Fingerprint
			if f.keys {
				fp = ingest.SHA256.Sum(rec)
			} else {
				if n := len(rec); n > 0 && rec[n-1] == '\r' {
					rec = rec[:n-1]
				}
				var ok bool
				if fp, ok = online.ParseHex(rec); !ok {
					if len(rec) > 80 {
						rec = append(rec[:80:80], "…"...)
					}
					bad = &NotFingerprintError{Name: in.Name, Line: line, Text: rec}
					return false
				}
				if len(rec) == 64 {
					f.full++
				} else {
					f.narrow++
				}
			}
			line++
			buf = append(buf, fp)
			return true
		})
		n := c.Records
		cr.Release(c)
		if bad != nil {
			return bad
		}
		st.Values.Add(int64(n))
		if err := st.Wait(ctx, n); err != nil {
			return err
		}
		if len(buf) >= 4096 {
			if err := emit(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
	}
	st.Narrow, st.Full = f.narrow, f.full
	if len(buf) > 0 {
		return emit(buf)
	}
	return nil
}

func (f *fileSource) Probe(context.Context, []fpstore.Fingerprint, []bool) error {
	return online.Permanent{Err: fmt.Errorf("%s is read whole: it cannot be probed", f.t.Redacted)}
}

func (f *fileSource) Held(context.Context, []online.Item, []bool) error {
	return online.Permanent{Err: fmt.Errorf("%s is read whole: it cannot be probed", f.t.Redacted)}
}

func (f *fileSource) Write(context.Context, []online.Item) error {
	return online.Permanent{Err: fmt.Errorf("%s is an export: keys are written to a Redis or MySQL target", f.t.Redacted)}
}

func (f *fileSource) Plan(io.Writer, []online.Item) error {
	return online.Permanent{Err: fmt.Errorf("%s is an export: keys are written to a Redis or MySQL target", f.t.Redacted)}
}

// Retryable: a file's own errors are its reading's, never retried; the
// others are Permanent.
func (f *fileSource) Retryable(err error) bool { return online.Retryable(err) }
