package fpstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// recordingFile keeps what it is given and the size of every write; after
// limit bytes it fails (with errFull, or with no error if short is set:
// a broken io.Writer).
type recordingFile struct {
	data   []byte
	writes []int
	limit  int
	short  bool
}

var errFull = errors.New("no space left")

func (f *recordingFile) Write(p []byte) (int, error) {
	if f.limit > 0 && len(f.data)+len(p) > f.limit {
		n := f.limit - len(f.data)
		f.data = append(f.data, p[:n]...)
		f.writes = append(f.writes, n)
		if f.short {
			return n, nil
		}
		return n, errFull
	}
	f.data = append(f.data, p...)
	f.writes = append(f.writes, len(p))
	return len(p), nil
}

// TestExtentWriterWritesWholeExtents: whatever the sizes of the writes
// it is given (a header of a few bytes, segments of megabytes, padding),
// the file receives the same bytes in writes that start and end on extent
// boundaries, but for the last.
func TestExtentWriterWritesWholeExtents(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 4*extentSize)
	for i := 0; i < len(src); i += 8 {
		binary.LittleEndian.PutUint64(src[i:], r.Uint64())
	}
	rounds := 8
	if testing.Short() {
		rounds = 2 // -race checks every byte the rounds copy: 8 rounds took 32 s there
	}
	for round := 0; round < rounds; round++ {
		var want []byte
		f := &recordingFile{}
		e := newExtentWriter(f)
		for i := 0; i < 20; i++ {
			var n int
			switch r.IntN(3) {
			case 0:
				n = r.IntN(100)
			case 1:
				n = r.IntN(3 * extentSize)
			default:
				n = extentSize * (1 + r.IntN(3)) // whole extents, at any offset
			}
			from := r.IntN(len(src) - n)
			p := src[from : from+n]
			if m, err := e.Write(p); m != n || err != nil {
				t.Fatalf("Write(%d bytes) = %d, %v", n, m, err)
			}
			want = append(want, p...)
		}
		if err := e.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.data, want) {
			t.Fatalf("round %d: the file got %d bytes, not the %d written", round, len(f.data), len(want))
		}
		for i, n := range f.writes[:len(f.writes)-1] {
			if n == 0 || n%extentSize != 0 {
				t.Fatalf("round %d: write %d of %d is %d bytes, not whole extents", round, i, len(f.writes), n)
			}
		}
	}
}

func TestExtentWriterKeepsTheFirstError(t *testing.T) {
	f := &recordingFile{limit: extentSize + 10}
	e := newExtentWriter(f)
	n, err := e.Write(make([]byte, 3*extentSize))
	if !errors.Is(err, errFull) || n != extentSize+10 {
		t.Fatalf("Write past the limit = %d, %v; want %d, %v", n, err, extentSize+10, errFull)
	}
	if n, err := e.Write([]byte("more")); n != 0 || !errors.Is(err, errFull) {
		t.Fatalf("Write after the error = %d, %v", n, err)
	}
	if err := e.Flush(); !errors.Is(err, errFull) {
		t.Fatalf("Flush after the error = %v", err)
	}

	// A failure of the buffered part shows at Flush.
	f = &recordingFile{limit: 5}
	e = newExtentWriter(f)
	if _, err := e.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); !errors.Is(err, errFull) {
		t.Fatalf("Flush = %v, want %v", err, errFull)
	}
}

// A writer that takes less than it is given without saying why is an
// io.ErrShortWrite, in the direct path and at a flush alike (not a loop,
// not a silently misaligned file).
func TestExtentWriterShortWrite(t *testing.T) {
	f := &recordingFile{limit: extentSize + 10, short: true}
	e := newExtentWriter(f)
	if _, err := e.Write(make([]byte, 3*extentSize)); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("direct Write to a short writer = %v, want %v", err, io.ErrShortWrite)
	}
	f = &recordingFile{limit: 5, short: true}
	e = newExtentWriter(f)
	if _, err := e.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := e.Flush(); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("Flush to a short writer = %v, want %v", err, io.ErrShortWrite)
	}
}
