package exportfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Source reads an export of the online side: one hex fingerprint (32 or
// 64 digits) per line, or with keys one key per line, hashed with SHA-256
// byte for byte. Plain, gzip or zstd, detected by magic bytes; "-" is stdin.
// A line that is not a fingerprint is an error naming the file and line.
type Source struct {
	path, redacted string
	keys           bool
	narrow, full   int64
}

// Open is the export at path, printed as redacted; with keys, each line
// is a key.
func Open(path, redacted string, keys bool) *Source {
	return &Source{path: path, redacted: redacted, keys: keys}
}

func (f *Source) Sorted() bool { return false }

func (f *Source) Close() error { return nil }

func (f *Source) Wide() (bool, bool) {
	return f.full > 0 && f.narrow == 0, f.narrow+f.full > 0
}

func (f *Source) Read(ctx context.Context, st *online.ReadStats, emit func([]fpstore.Fingerprint) error) error {
	st.Expected = -1
	in, err := ingest.Open(f.path)
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

func (f *Source) Probe(context.Context, []fpstore.Fingerprint, []bool) error {
	return online.Permanent{Err: fmt.Errorf("%s is read whole: it cannot be probed", f.redacted)}
}

func (f *Source) Held(context.Context, []online.Item, []bool) error {
	return online.Permanent{Err: fmt.Errorf("%s is read whole: it cannot be probed", f.redacted)}
}

func (f *Source) Write(context.Context, []online.Item) error {
	return online.Permanent{Err: fmt.Errorf("%s is an export: keys are written to a Redis or MySQL target", f.redacted)}
}

func (f *Source) Plan(io.Writer, []online.Item) error {
	return online.Permanent{Err: fmt.Errorf("%s is an export: keys are written to a Redis or MySQL target", f.redacted)}
}

// Retryable: a file's own errors are its reading's, never retried; the
// others are Permanent.
func (f *Source) Retryable(err error) bool { return online.Retryable(err) }

// ErrNoPath: ParseURL was given "file:" without a path.
var ErrNoPath = errors.New("file:PATH needs a path")

// A NotFingerprintError is a line of a file: export that is not a hex
// fingerprint (with Options.OnlineFormat "key" each line is a key).
type NotFingerprintError struct {
	Name string // the file, as ingest names it ("-" for stdin)
	Line int64  // 1-based
	Text []byte // the line, cut at 80 bytes
}

func (e *NotFingerprintError) Error() string {
	return fmt.Sprintf(`%s:%d: not a 32- or 64-digit hex fingerprint: %q (with OnlineFormat "key" each line is a key)`, e.Name, e.Line, e.Text)
}

// ParsePath reads the path of a file: URL, path being what follows
// "file:"; "file:" alone is ErrNoPath.
func ParsePath(path string) (string, error) {
	p, authority := strings.CutPrefix(path, "//")
	if authority {
		// file://HOST/PATH: a host we do not read, and a user or password
		// (user:pw@) that must never be taken from a URL.
		host, _, _ := strings.Cut(p, "/")
		if strings.Contains(host, "@") {
			return "", &online.URLError{Reason: "a file: URL names a path, not a user or password"}
		}
	}
	if strings.Contains(p, "://") {
		// Not a path anyone means (file:://u:pw@h, file:redis://…): what
		// follows may hold a user and a password, which must not become a
		// file name echoed in reports and errors.
		return "", &online.URLError{Reason: "a file: URL names a path (file:PATH or file:///PATH), not another URL"}
	}
	if p == "" {
		return "", ErrNoPath
	}
	return p, nil
}
