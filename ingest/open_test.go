package ingest

import (
	"bytes"
	stdgzip "compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/klauspost/compress/zstd"
)

// textData gives n bytes of line-shaped, moderately compressible data.
func textData(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "u%d:d%d:%d\n", rng.IntN(100000), rng.IntN(1000), 1700000000000+rng.IntN(1e9))
	}
	return b.Bytes()[:n]
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := stdgzip.NewWriter(&b) // the standard library's writer: an independent encoder
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstdBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(data, nil)
}

// readAll opens data through NewInput and reads it whole.
func readAll(name string, data []byte) (*Input, []byte, error) {
	in, err := NewInput(name, bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	defer in.Close()
	out, err := io.ReadAll(in)
	return in, out, err
}

func TestRoundTrip(t *testing.T) {
	big := textData(3<<20, 1)
	small := []byte("a\nb\r\n\x00\xff\n")
	for _, c := range []struct {
		name, comp string
		raw, want  []byte
	}{
		{"plain", CompressionNone, big, big},
		{"plain-small", CompressionNone, small, small},
		{"empty", CompressionNone, nil, nil},
		{"gzip", CompressionGzip, gzipBytes(t, big), big},
		{"gzip-empty", CompressionGzip, gzipBytes(t, nil), nil},
		{"gzip-members", CompressionGzip,
			append(append(gzipBytes(t, big[:1000]), gzipBytes(t, nil)...), gzipBytes(t, big[1000:])...), big},
		{"zstd", CompressionZstd, zstdBytes(t, big), big},
		{"zstd-empty", CompressionZstd, zstdBytes(t, nil), nil},
		{"zstd-frames", CompressionZstd,
			append(append(zstdBytes(t, big[:12345]), zstdBytes(t, small)...), zstdBytes(t, big[12345:])...),
			append(append(append([]byte{}, big[:12345]...), small...), big[12345:]...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, slow := range []bool{false, true} {
				var r io.Reader = bytes.NewReader(c.raw)
				if slow {
					r = iotest.HalfReader(iotest.OneByteReader(r))
				}
				in, err := NewInput(c.name, r)
				if err != nil {
					t.Fatal(err)
				}
				if in.Compression != c.comp {
					t.Errorf("Compression = %q, want %q", in.Compression, c.comp)
				}
				got, err := io.ReadAll(in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, c.want) {
					t.Fatalf("read %d bytes, want %d (equal prefix %d)", len(got), len(c.want), commonPrefix(got, c.want))
				}
				if n := in.RawRead(); n != int64(len(c.raw)) {
					t.Errorf("RawRead = %d, want %d", n, len(c.raw))
				}
				if err := in.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func TestTruncated(t *testing.T) {
	data := textData(1<<20, 2)
	for _, c := range []struct {
		comp string
		raw  []byte
	}{
		{CompressionGzip, gzipBytes(t, data)},
		{CompressionZstd, zstdBytes(t, data)},
	} {
		t.Run(c.comp, func(t *testing.T) {
			// Every cut keeps the magic, so the error comes from the decoder.
			for _, cut := range []int{4, 10, 11, 100, len(c.raw) / 2, len(c.raw) - 9, len(c.raw) - 8, len(c.raw) - 4, len(c.raw) - 1} {
				_, _, err := readAll("events."+c.comp, c.raw[:cut])
				if err == nil {
					t.Errorf("cut at %d of %d: no error", cut, len(c.raw))
					continue
				}
				if !strings.HasPrefix(err.Error(), "events."+c.comp+": ") {
					t.Errorf("cut at %d: error %q does not name the file", cut, err)
				}
				t.Logf("cut at %d: %v", cut, err)
			}
		})
	}
}

func TestBitFlip(t *testing.T) {
	data := textData(1<<20, 3)
	rng := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		comp string
		raw  []byte
	}{
		{CompressionGzip, gzipBytes(t, data)},
		{CompressionZstd, zstdBytes(t, data)},
	} {
		t.Run(c.comp, func(t *testing.T) {
			for i := 0; i < 30; i++ {
				// Flip within the body: header fields such as gzip's mtime are
				// not covered by any checksum, and changing them changes no data.
				pos := len(c.raw)/8 + rng.IntN(len(c.raw)*3/4)
				bad := bytes.Clone(c.raw)
				bad[pos] ^= 1 << rng.IntN(8)
				_, out, err := readAll("x", bad)
				if err == nil {
					t.Errorf("flip at %d of %d: no error (output equal: %v)", pos, len(bad), bytes.Equal(out, data))
				} else if !strings.HasPrefix(err.Error(), "x: ") {
					t.Errorf("flip at %d: error %q does not name the file", pos, err)
				}
			}
		})
	}
}

func TestTrailingGarbage(t *testing.T) {
	for _, c := range []struct {
		comp string
		raw  []byte
	}{
		{CompressionGzip, append(gzipBytes(t, []byte("a\n")), 0, 0, 0, 0)},
		{CompressionGzip, append(gzipBytes(t, []byte("a\n")), "a\n"...)},
		{CompressionZstd, append(zstdBytes(t, []byte("a\n")), "a\n"...)},
	} {
		if _, _, err := readAll("x", c.raw); err == nil || !strings.HasPrefix(err.Error(), "x: ") {
			t.Errorf("%s with trailing garbage: error = %v, want one naming the file", c.comp, err)
		}
	}
}

func TestFixtures(t *testing.T) {
	want, err := os.ReadFile("testdata/lines.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, comp   string // comp "" means refused
		format, hint string
	}{
		{file: "lines.txt", comp: CompressionNone},
		{file: "lines.txt.gz", comp: CompressionGzip},
		{file: "lines.txt.zst", comp: CompressionZstd},
		{file: "lines.txt.pzst", comp: CompressionZstd},
		{file: "lines.txt.xz", format: "xz", hint: "xz -dc"},
		{file: "lines.txt.bz2", format: "bzip2", hint: "bzip2 -dc"},
		{file: "empty.bz2", format: "bzip2", hint: "bzip2 -dc"},
		{file: "lines.txt.lz4", format: "lz4", hint: "lz4 -dc"},
		{file: "lines.txt.lz4legacy", format: "lz4", hint: "lz4 -dc"},
		{file: "lines.txt.zip", format: "zip", hint: "unzip -p"},
	} {
		path := filepath.Join("testdata", c.file)
		in, err := Open(path)
		if c.comp == "" {
			if !errors.Is(err, ErrUnsupportedCompression) {
				t.Errorf("%s: error = %v, want ErrUnsupportedCompression", c.file, err)
				continue
			}
			for _, s := range []string{path + ": ", c.format, c.hint} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: error %q does not say %q", c.file, err, s)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		got, err := io.ReadAll(in)
		if err != nil || !bytes.Equal(got, want) || in.Compression != c.comp {
			t.Errorf("%s: read %q (%s), %v; want %q (%s)", c.file, got, in.Compression, err, want, c.comp)
		}
		st, _ := os.Stat(path)
		if in.Size() != st.Size() || in.RawRead() != st.Size() {
			t.Errorf("%s: Size %d RawRead %d, want %d", c.file, in.Size(), in.RawRead(), st.Size())
		}
		if err := in.Close(); err != nil {
			t.Error(err)
		}
		if err := in.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}

// TestDetectPlain: data that merely begins like a magic number is plain.
func TestDetectPlain(t *testing.T) {
	for _, s := range []string{
		"\x1f", "\x28\xb5\x2f", "\xfd7zXZ", "BZ", "BZh", "BZh9", "BZh9 is a model\n", "BZh91AY&S",
		"PK", "PK\x03", "PKZIP\n", "P", "P*M", "\x50\x2a\x4d\x18\x04", "\x04\x22\x4d",
		"\n", "\x00\x00\x00\x00", "plain text\n",
	} {
		for _, slow := range []bool{false, true} {
			var r io.Reader = strings.NewReader(s)
			if slow {
				r = iotest.OneByteReader(r)
			}
			in, err := NewInput("x", r)
			if err != nil {
				if s == "\x50\x2a\x4d\x18\x04" {
					continue // a truncated skippable frame: zstd's error is fine
				}
				t.Errorf("%q: %v", s, err)
				continue
			}
			got, err := io.ReadAll(in)
			if in.Compression == CompressionNone && (err != nil || string(got) != s) {
				t.Errorf("%q: read %q, %v", s, got, err)
			}
			if in.Compression != CompressionNone && s != "\x50\x2a\x4d\x18\x04" {
				t.Errorf("%q detected as %s", s, in.Compression)
			}
		}
	}
}

// TestDetectDoesNotBlock: a terminal or a slow pipe that has delivered one
// short line must not be held up waiting for a full buffer.
func TestDetectDoesNotBlock(t *testing.T) {
	for _, first := range []string{"a\n", "key\n", "B\n", "P\n"} {
		pr, pw := io.Pipe()
		go pw.Write([]byte(first))
		done := make(chan error, 1)
		go func() {
			in, err := NewInput("-", pr)
			if err == nil {
				buf := make([]byte, 10)
				var n int
				n, err = in.Read(buf)
				if err == nil && string(buf[:n]) != first {
					err = fmt.Errorf("read %q", buf[:n])
				}
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%q: %v", first, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%q: NewInput blocked waiting for more input", first)
		}
		pw.Close()
	}
}

func TestZstdWindowTooLarge(t *testing.T) {
	// Frame header: no content size, window descriptor 2^30 (exponent 20),
	// then an empty last raw block.
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 20 << 3, 0x01, 0x00, 0x00}
	_, _, err := readAll("big.zst", frame)
	if err == nil || !strings.HasPrefix(err.Error(), "big.zst: ") || !strings.Contains(err.Error(), "window") {
		t.Errorf("error = %v, want one naming the file and the window", err)
	}
}

func TestReadErrorUnderDecoder(t *testing.T) {
	boom := errors.New("boom")
	raw := gzipBytes(t, textData(1<<20, 4))
	r := io.MultiReader(bytes.NewReader(raw[:len(raw)/2]), iotest.ErrReader(boom))
	_, _, err := readAll("x.gz", raw)
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewInput("x.gz", r)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(in)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "x.gz: cannot read: ") {
		t.Errorf("error = %v, want x.gz: cannot read: boom", err)
	}
	if _, again := in.Read(make([]byte, 10)); again != err {
		t.Errorf("second Read error = %v, want the same sticky error", again)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: error = %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: error = %v", err)
	}
}

func TestOpenStdin(t *testing.T) {
	f, err := os.Open("testdata/lines.txt.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(3, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = saved }()
	// Stdin positioned past the magic: the rest is read as it is, and Size
	// counts only what is left.
	in, err := Open("-")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if in.Name != "-" || in.Compression != CompressionNone || in.Size() != st.Size()-3 {
		t.Errorf("Name %q Compression %q Size %d", in.Name, in.Compression, in.Size())
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(); err != nil {
		t.Errorf("Close closed stdin: %v", err)
	}
}

func TestNewInputSizeUnknown(t *testing.T) {
	in, err := NewInput("x", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	if in.Size() != -1 {
		t.Errorf("Size = %d, want -1", in.Size())
	}
}

// TestInputChangedWhileRead: a regular file appended to, truncated or
// rewritten in place between Open and the end of reading is an error
// naming it, plain or compressed; one left alone is not.
func TestInputChangedWhileRead(t *testing.T) {
	plain := bytes.Repeat([]byte("a line of an input\n"), 100_000) // 1.9 MB: several reads
	var gz bytes.Buffer
	zw := stdgzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	for _, tc := range []struct {
		name   string
		data   []byte
		change func(path string) error
	}{
		{"unchanged", plain, nil},
		{"appended", plain, func(p string) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString("more\n")
			return errors.Join(err, f.Close())
		}},
		{"truncated", plain, func(p string) error { return os.Truncate(p, 1000) }},
		{"rewritten in place", plain, func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteAt([]byte("A"), 5)
			f.Close()
			return errors.Join(err, os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)))
		}},
		{"gzip appended", gz.Bytes(), func(p string) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = f.Write(gz.Bytes())
			return errors.Join(err, f.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			in, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if _, err := io.ReadFull(in, make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				if err := tc.change(path); err != nil {
					t.Fatal(err)
				}
			}
			_, err = io.Copy(io.Discard, in)
			if tc.change == nil {
				if err != nil {
					t.Fatalf("unchanged file: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInputChanged) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got %v, want ErrInputChanged naming %s", err, path)
			}
		})
	}
}
