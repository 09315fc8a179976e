package ingest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/failpoint"
)

// Values of Input.Compression.
const (
	CompressionNone = "none"
	CompressionGzip = "gzip"
	CompressionZstd = "zstd"
)

const (
	// rawBufSize buffers the raw file: large enough for the magic-byte peek
	// (including a zstd skippable frame in front of the first real frame) and
	// for gzip, which reads its input byte by byte through this buffer.
	rawBufSize = 256 << 10

	// zstdConcurrency 1 decodes synchronously in the reading goroutine and
	// starts no goroutines. An async decoder gains nothing for a single
	// stream: decoding alone it is slower, and feeding the chunk reader it
	// competes with the hashing workers for the cores, with no reliable
	// gain in A/B runs of a zstd file against the synchronous one.
	zstdConcurrency = 1

	// zstdMaxWindow bounds the memory a zstd stream may demand (its window
	// must be held in RAM). The zstd CLI decodes up to 128 MiB windows
	// without --memory; 512 MiB admits `zstd --long=29` files too.
	zstdMaxWindow = 512 << 20
)

// Input is one opened input: its decompressed bytes, its name for errors
// ("-" for stdin) and what was detected. Read errors always name the input.
// RawRead may be called from another goroutine (a progress bar) while Read
// runs; everything else is for a single goroutine.
type Input struct {
	Name        string
	Compression string // CompressionNone, CompressionGzip or CompressionZstd

	r      io.Reader // the decompressed stream
	raw    *bufio.Reader
	count  countingReader
	file   *os.File // closed by Close: Open opened it
	gz     *gzip.Reader
	zr     *zstd.Decoder
	size   int64
	err    error // sticky: a decoder that failed once is not read again
	closed bool
	// poll: the descriptor Idle watches (a pipe, FIFO, socket or terminal:
	// input that can stall), or -1.
	poll int
}

// countingReader counts the raw bytes consumed and remembers a failure of
// the raw reader, so that an I/O error under a decoder is reported as an I/O
// error, not as a corrupt stream.
type countingReader struct {
	r      io.Reader
	n      atomic.Int64
	rawErr atomic.Pointer[error] // the first failure; the zstd decoder may read from its own goroutine
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if err != nil && err != io.EOF {
		c.rawErr.CompareAndSwap(nil, &err)
	}
	return n, err
}

// Open opens path ("-" means stdin, named "-" in errors) and returns a reader
// of its decompressed bytes. Compression is detected by magic bytes (gzip
// 1f 8b, zstd 28 b5 2f fd, or a zstd skippable frame), never by file name:
// `cat a.gz b.gz` is read in full, and a .gz that is really plain text is
// read as text. xz, bzip2, lz4 and zip are recognised and refused with
// ErrUnsupportedCompression, naming the format and a way round it, because
// hashing their bytes as lines would be a silent wrong answer.
func Open(path string) (*Input, error) {
	if path == "-" {
		size := regularSize(os.Stdin) // before detection reads ahead
		in, err := NewInput("-", watch(os.Stdin, "-"))
		if err != nil {
			return nil, err
		}
		in.size = size
		in.poll = pollable(os.Stdin)
		return in, nil
	}
	if err := failpoint.Hit(failpoint.Open, path); err != nil {
		return nil, fmt.Errorf("%s: cannot open: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *fs.PathError already names the file
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	size := regularSize(f)
	in, err := NewInput(path, watch(f, path))
	if err != nil {
		f.Close()
		return nil, err
	}
	in.file, in.size = f, size
	in.poll = pollable(f)
	return in, nil
}

// pollable is f's descriptor when reading it can wait for a writer (not a
// regular file), else -1.
func pollable(f *os.File) int {
	if st, err := f.Stat(); err != nil || st.Mode().IsRegular() || st.IsDir() {
		return -1
	}
	return int(f.Fd())
}

// Idle reports whether the input has nothing to read now and nothing comes
// within wait: a pipe, FIFO or terminal whose writer has paused (tail -f,
// keys typed by hand), with nothing left in the read buffer. A regular
// file, or an input that cannot tell, is never idle. A decoder may still
// hold bytes when Idle says true: a reader that then hands on what it has
// only hands it on sooner.
func (in *Input) Idle(wait time.Duration) bool {
	if in.poll < 0 || in.raw.Buffered() > 0 {
		return false
	}
	// poll is never restarted after a signal, and the runtime's own
	// (preemption, the profiler) land on this thread more often the busier
	// the machine: an EINTR is waited out, not taken for input.
	deadline := time.Now().Add(wait)
	for {
		fds := []unix.PollFd{{Fd: int32(in.poll), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(time.Until(deadline), 0)/time.Millisecond))
		if err != unix.EINTR {
			return err == nil && n == 0
		}
	}
}

// watchedFile reads a file and, when it is a regular file, checks at the
// end that its size and modification time are still those it had at the
// start: a log still being appended to, a file rewritten in place. Reads go through the fault seam.
type watchedFile struct {
	f     *os.File
	r     io.Reader
	start os.FileInfo // nil: not a regular file, nothing to compare
}

func watch(f *os.File, name string) io.Reader {
	w := &watchedFile{f: f, r: failpoint.Reader(f, name)}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		w.start = st
	}
	return w
}

func (w *watchedFile) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err == io.EOF && w.start != nil {
		if st, serr := w.f.Stat(); serr == nil && (st.Size() != w.start.Size() || !st.ModTime().Equal(w.start.ModTime())) {
			err = fmt.Errorf("%w (size %d → %d bytes, modified %s → %s); rerun once it is complete",
				ErrInputChanged, w.start.Size(), st.Size(), w.start.ModTime().Format(time.RFC3339Nano), st.ModTime().Format(time.RFC3339Nano))
		}
	}
	return n, err
}

// regularSize gives the bytes left to read in f when it is a regular file
// (stdin redirected from a file may already be partly read), else -1.
func regularSize(f *os.File) int64 {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil || off > st.Size() {
		return -1
	}
	return st.Size() - off
}

// NewInput detects the compression of r as Open does and returns a reader of
// its decompressed bytes. Close releases the decoder but does not close r.
func NewInput(name string, r io.Reader) (*Input, error) {
	in := &Input{Name: name, Compression: CompressionNone, size: -1, poll: -1}
	in.count.r = r
	in.raw = bufio.NewReaderSize(&in.count, rawBufSize)
	in.r = in.raw

	// Look at as few bytes as decide the format: a bigger Peek would block
	// an interactive stdin (query reading keys from a terminal) until the
	// buffer filled.
	var f format
	for need := 1; ; {
		_, err := in.raw.Peek(need)
		if err != nil && err != io.EOF {
			return nil, in.wrap(err)
		}
		head, _ := in.raw.Peek(in.raw.Buffered())
		if f, need = detect(head, err == io.EOF); need == 0 {
			break
		}
	}
	switch f {
	case formatNone:
	case formatGzip:
		in.Compression = CompressionGzip
		gz, err := gzip.NewReader(in.raw) // reads the member header now
		if err != nil {
			return nil, in.wrap(err)
		}
		in.gz, in.r = gz, gz
	case formatZstd:
		in.Compression = CompressionZstd
		zr, err := zstd.NewReader(in.raw,
			zstd.WithDecoderConcurrency(zstdConcurrency),
			zstd.WithDecoderMaxMemory(zstdMaxWindow))
		if err != nil {
			return nil, fmt.Errorf("%s: cannot start zstd decoder: %w", name, err)
		}
		in.zr, in.r = zr, zr
	case formatParquet:
		return nil, fmt.Errorf("%s: %w", name, ErrParquetAsText)
	default:
		return nil, fmt.Errorf("%s: %w: %s data (decompress with %s and pipe it in)",
			name, ErrUnsupportedCompression, f, refused[f])
	}
	return in, nil
}

// Read reads decompressed bytes. A truncated or corrupt stream is an error
// naming the input, never a short read that ends in io.EOF.
func (in *Input) Read(p []byte) (int, error) {
	if in.err != nil {
		return 0, in.err
	}
	if in.closed {
		return 0, fmt.Errorf("%s: read after close", in.Name)
	}
	n, err := in.r.Read(p)
	if err != nil && err != io.EOF {
		in.err = in.wrap(err)
		err = in.err
	}
	return n, err
}

// wrap names the input in err and says whether the fault is the medium (an
// I/O error) or the data (a truncated or corrupt compressed stream).
func (in *Input) wrap(err error) error {
	if p := in.count.rawErr.Load(); p != nil {
		raw := *p
		var pe *fs.PathError
		if errors.As(raw, &pe) {
			raw = pe.Err // its path would repeat the name
		}
		return fmt.Errorf("%s: cannot read: %w", in.Name, raw)
	}
	rawRead := in.RawRead()
	switch {
	case in.Compression == CompressionNone:
		return fmt.Errorf("%s: cannot read: %w", in.Name, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: %w (truncated %s stream? %d compressed bytes read)",
			in.Name, err, in.Compression, rawRead)
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return fmt.Errorf("%s: %w (zstd window over %d MiB: decompress with zstd -dc --long=31 and pipe it in)",
			in.Name, err, zstdMaxWindow>>20)
	case errors.Is(err, gzip.ErrHeader) && in.gz != nil:
		return fmt.Errorf("%s: %w (trailing garbage after a gzip member, or corrupt gzip stream; %d compressed bytes read)",
			in.Name, err, rawRead)
	}
	return fmt.Errorf("%s: %w (corrupt %s stream; %d compressed bytes read)",
		in.Name, err, in.Compression, rawRead)
}

// Close releases the decoder and closes the file if Open opened it (never
// stdin). It is safe to call more than once.
func (in *Input) Close() error {
	if in.closed {
		return nil
	}
	in.closed = true
	if in.zr != nil {
		in.zr.Close()
	}
	var err error
	if in.gz != nil {
		err = in.gz.Close()
	}
	if in.file != nil {
		if cerr := in.file.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Size is the size in bytes of the raw (possibly compressed) input when it is
// a regular file, else -1; with RawRead it drives a progress bar.
func (in *Input) Size() int64 { return in.size }

// RawRead is the number of raw (compressed) bytes consumed so far, including
// read-ahead not yet decompressed. Safe to call from another goroutine.
func (in *Input) RawRead() int64 { return in.count.n.Load() }
