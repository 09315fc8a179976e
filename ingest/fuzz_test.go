package ingest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pformat "github.com/parquet-go/parquet-go/format"

	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

// FuzzOpen feeds arbitrary bytes to NewInput: it must never panic, a plain
// input must read back exactly, and any error must name the input.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{"", "a\n", "\x1f\x8b", "BZh9", "PK\x03\x04", "\x50\x2a\x4d\x18\x00\x00\x00\x00"} {
		f.Add([]byte(s))
	}
	f.Add(gzipBytes(f, []byte("a\nb\n")))
	f.Add(zstdBytes(f, []byte("a\nb\n")))
	files, _ := filepath.Glob("testdata/*")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil && len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := NewInput("in", bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "in: ") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		defer in.Close()
		// A tiny compressed input may expand enormously: look at a bounded prefix.
		out, err := io.ReadAll(io.LimitReader(in, 64<<20))
		if err != nil && !strings.HasPrefix(err.Error(), "in: ") {
			t.Fatalf("error %q does not name the input", err)
		}
		if in.Compression == CompressionNone && (err != nil || !bytes.Equal(out, data)) {
			t.Fatalf("plain input read back as %q, %v", out, err)
		}
	})
}

// FuzzParquet: any bytes, read as a Parquet file for the keys of every
// column (readParquetKeys, under a 256 KiB limit: a few thousand rows a
// row group) and copied whole, every column's pages decoded as dedup
// copies them (copyParquetTo), give keys or a *ParquetError (or
// *ParquetMemError): never a panic, nor another error. A copy that succeeds reads back whole, every
// key column, with the input's rows: no output from pages that lie.
func FuzzParquet(f *testing.F) {
	var seeds [][]byte
	for _, name := range []string{"small.parquet"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	// Files of the Go library: every key type in each encoding it writes,
	// v1 and v2 pages, CRCs (what chunkText decodes, and what it leaves to
	// the library).
	seeds = append(seeds, goFile(f, 120, 1, &parquet.Uncompressed, 400), goFile(f, 120, 2, &parquet.Snappy, 400), goFile(f, 120, 1, &parquet.Brotli, 400))
	// Chunks listing RLE first, as some writers do for the levels: the
	// library's column encoding then, which the copy cannot write for most
	// types (TestParquetCopyListedEncodings).
	seeds = append(seeds, listEncodings(f, seeds[1], []pformat.Encoding{pformat.RLE, pformat.Plain}))
	for _, b := range seeds {
		f.Add(b)
		// Cut short (the footer then lost, and found again by the
		// fuzzer's edits), and a page of a column that is no key, and
		// of one that is, flipped to say a value less.
		f.Add(b[:len(b)/2])
		f.Add(b[:len(b)-9])
		for _, col := range []string{"s", "l.list.element", "opts", "optf"} {
			lie := bytes.Clone(b)
			if pqcraft.DataPageValues(lie, col, 0, -1) == nil {
				f.Add(lie)
			}
		}
		if lie, err := pqcraft.RowGroupRows(b, 0, 1); err == nil {
			f.Add(lie)
		}
	}
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 256 << 10
		err := readParquetKeys(b, limit)
		if err != nil && !isParquetError(err) {
			t.Fatalf("%T: %v", err, err)
		}
		// A copy holds ~48 KiB a column (parquetCopyColumnBytes): 4 MiB
		// copies the seeds' 23 columns.
		const copyLimit = 4 << 20
		var out bytes.Buffer
		rows, err := copyParquetTo(&out, b, copyLimit)
		if err != nil {
			if !isParquetError(err) {
				t.Fatalf("the copy: %T: %v", err, err)
			}
			return
		}
		p, err := OpenParquet("out.parquet", bytes.NewReader(out.Bytes()), int64(out.Len()), copyLimit)
		if err != nil {
			t.Fatalf("the copy does not read back: %v", err)
		}
		defer p.Close()
		if p.Rows() != rows {
			t.Fatalf("the copy has %d rows of %d", p.Rows(), rows)
		}
		if err := readParquetKeys(out.Bytes(), copyLimit); err != nil {
			t.Fatalf("the copy's keys do not read back: %v", err)
		}
	})
}

// isParquetError reports whether err is what a Parquet file that cannot be
// read is: a *ParquetError, or a *ParquetMemError for one that needs more
// than the limit.
func isParquetError(err error) bool {
	var pe *ParquetError
	var me *ParquetMemError
	return errors.As(err, &pe) || errors.As(err, &me)
}
