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
// row group), give keys or a
// *ParquetError: never a panic, nor another error.
func FuzzParquet(f *testing.F) {
	for _, name := range []string{"small.parquet"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Files of the Go library: every key type in each encoding it writes,
	// v1 and v2 pages, CRCs (what chunkText decodes, and what it leaves to
	// the library).
	f.Add(goFile(f, 120, 1, &parquet.Uncompressed, 400))
	f.Add(goFile(f, 120, 2, &parquet.Snappy, 400))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := readParquetKeys(b, 256<<10)
		var pe *ParquetError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%T: %v", err, err)
		}
	})
}
