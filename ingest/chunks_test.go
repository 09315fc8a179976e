package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// event is one thing a reader reports: a record, or a too-long record.
type event struct {
	Record, Line int64
	Key          string
	TooLong      bool
}

func (e event) String() string {
	if e.TooLong {
		return fmt.Sprintf("%d@%d:TOO LONG", e.Record, e.Line)
	}
	return fmt.Sprintf("%d@%d:%q", e.Record, e.Line, e.Key)
}

// reference is the definition, written the obvious way with bytes.Split: a
// record is the bytes up to term; a final record without term is a record; an
// input ending with term has no empty record after it; a record's line is 1
// plus the line feeds before it; a record over maxRecord bytes is reported.
func reference(data []byte, term byte, maxRecord int) []event {
	if len(data) == 0 {
		return nil
	}
	parts := bytes.Split(data, []byte{term})
	if data[len(data)-1] == term {
		parts = parts[:len(parts)-1]
	}
	var evs []event
	line := int64(1)
	for i, p := range parts {
		e := event{Record: int64(i + 1), Line: line, Key: string(p)}
		if maxRecord > 0 && len(p) > maxRecord {
			e.Key, e.TooLong = "", true
		}
		evs = append(evs, e)
		line += int64(bytes.Count(p, []byte{'\n'}))
		if term == '\n' {
			line++
		}
	}
	return evs
}

// chunkEvents reads r to the end and checks each chunk's invariants.
func chunkEvents(t testing.TB, r *ChunkReader, term byte, release func(int) bool) []event {
	t.Helper()
	var evs []event
	var kept []*Chunk
	var keptData [][]byte
	nextRecord := int64(1)
	for i := 0; ; i++ {
		c, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrRecordTooLong) {
				t.Fatalf("Next: %v", err)
			}
			evs = append(evs, event{Record: re.Record, Line: re.Line, TooLong: true})
			nextRecord = re.Record + 1
			continue
		}
		if len(c.Data) == 0 || c.Data[len(c.Data)-1] != term {
			t.Fatalf("chunk %d does not end with its terminator: %q", i, c.Data)
		}
		if c.FirstRecord != nextRecord {
			t.Fatalf("chunk %d FirstRecord %d, want %d", i, c.FirstRecord, nextRecord)
		}
		n, line := 0, c.FirstLine
		SplitRecords(c.Data, term, func(rec []byte) bool {
			evs = append(evs, event{Record: c.FirstRecord + int64(n), Line: line, Key: string(rec)})
			line += int64(bytes.Count(rec, []byte{'\n'}))
			if term == '\n' {
				line++
			}
			n++
			return true
		})
		if n != c.Records {
			t.Fatalf("chunk %d Records %d, SplitRecords found %d", i, c.Records, n)
		}
		nextRecord += int64(n)
		if release(i) {
			r.Release(c)
		} else {
			kept, keptData = append(kept, c), append(keptData, bytes.Clone(c.Data))
		}
	}
	for i, c := range kept {
		if !bytes.Equal(c.Data, keptData[i]) {
			t.Fatalf("a chunk kept by the caller was changed by the reader")
		}
	}
	return evs
}

func TestChunkReaderRules(t *testing.T) {
	for _, c := range []struct {
		name, in  string
		term      byte
		maxRecord int
		want      []event
	}{
		{"empty input", "", '\n', 0, nil},
		{"no final newline", "a", '\n', 0, []event{{1, 1, "a", false}}},
		{"final newline", "a\n", '\n', 0, []event{{1, 1, "a", false}}},
		{"empty line", "\n", '\n', 0, []event{{1, 1, "", false}}},
		{"empty lines", "\n\na\n\n", '\n', 0, []event{{1, 1, "", false}, {2, 2, "", false}, {3, 3, "a", false}, {4, 4, "", false}}},
		{"CR kept", "a\r\nb\r\n", '\n', 0, []event{{1, 1, "a\r", false}, {2, 2, "b\r", false}}},
		{"lone CR", "a\rb\n", '\n', 0, []event{{1, 1, "a\rb", false}}},
		{"BOM kept", "\xef\xbb\xbfa\nb\n", '\n', 0, []event{{1, 1, "\xef\xbb\xbfa", false}, {2, 2, "b", false}}},
		{"NUL kept", "a\x00b\n\x00\n", '\n', 0, []event{{1, 1, "a\x00b", false}, {2, 2, "\x00", false}}},
		{"invalid UTF-8 kept", "\xff\xfe\n\xc3\n", '\n', 0, []event{{1, 1, "\xff\xfe", false}, {2, 2, "\xc3", false}}},
		{"spaces kept", " a \t\n", '\n', 0, []event{{1, 1, " a \t", false}}},
		{"NUL records", "a\x00b\x00", 0, 0, []event{{1, 1, "a", false}, {2, 1, "b", false}}},
		{"NUL records with newlines", "a\nb\x00\nc\x00d", 0, 0, []event{{1, 1, "a\nb", false}, {2, 2, "\nc", false}, {3, 3, "d", false}}},
		{"NUL empty records", "\x00\x00", 0, 0, []event{{1, 1, "", false}, {2, 1, "", false}}},
		{"at the limit", "abc\n", '\n', 3, []event{{1, 1, "abc", false}}},
		{"over the limit", "ab\nabcd\nx\n", '\n', 3, []event{{1, 1, "ab", false}, {2, 2, "", true}, {3, 3, "x", false}}},
		{"over the limit, last, unterminated", "ab\nabcd", '\n', 3, []event{{1, 1, "ab", false}, {2, 2, "", true}}},
		{"over the limit, first", "abcdefgh\nx", '\n', 3, []event{{1, 1, "", true}, {2, 2, "x", false}}},
		{"over the limit, NUL", "a\nb\ncd\x00x\x00", 0, 3, []event{{1, 1, "", true}, {2, 3, "x", false}}},
	} {
		for _, size := range []int{1, 2, 3, 5, 64, 1 << 20} {
			t.Run(fmt.Sprintf("%s/chunk%d", c.name, size), func(t *testing.T) {
				if got := reference([]byte(c.in), c.term, c.maxRecord); !reflect.DeepEqual(got, c.want) {
					t.Fatalf("reference itself gives %v, want %v", got, c.want)
				}
				r := NewChunkReader(strings.NewReader(c.in), "f", c.term, size, c.maxRecord)
				got := chunkEvents(t, r, c.term, func(int) bool { return true })
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("got  %v\nwant %v", got, c.want)
				}
			})
		}
	}
}

func TestChunkReaderAppendsTerminator(t *testing.T) {
	r := NewChunkReader(strings.NewReader("a\nb"), "f", '\n', 1<<20, 0)
	c, err := r.Next()
	if err != nil || string(c.Data) != "a\nb\n" || c.Records != 2 {
		t.Fatalf("Next = %q (%d records), %v; want \"a\\nb\\n\" (2)", c.Data, c.Records, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("second Next: %v, want io.EOF", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next after EOF: %v, want io.EOF", err)
	}
}

func TestChunkReaderTooLongError(t *testing.T) {
	in := "ok\n" + strings.Repeat("x", 100) + "\nok\n"
	r := NewChunkReader(strings.NewReader(in), "events.gz", '\n', 16, 10)
	if c, err := r.Next(); err != nil || string(c.Data) != "ok\n" {
		t.Fatalf("first Next = %v, %v", c, err)
	}
	_, err := r.Next()
	var re *RecordError
	if !errors.Is(err, ErrRecordTooLong) || !errors.As(err, &re) {
		t.Fatalf("error %v, want a RecordError wrapping ErrRecordTooLong", err)
	}
	if want := "events.gz:2: record 2: record too long: more than 10 bytes"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestChunkReaderLongRecordGrows(t *testing.T) {
	long := strings.Repeat("y", 10<<20) // a 10 MB line: longer than any default buffer
	in := "a\n" + long + "\nb"
	r := NewChunkReader(strings.NewReader(in), "f", '\n', 64<<10, 0)
	var keys []string
	for {
		c, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		SplitRecords(c.Data, '\n', func(rec []byte) bool { keys = append(keys, string(rec)); return true })
		r.Release(c)
	}
	if len(keys) != 3 || keys[0] != "a" || keys[1] != long || keys[2] != "b" {
		t.Fatalf("got %d records", len(keys))
	}
}

func TestChunkReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewChunkReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), "f", '\n', 1<<20, 0)
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next: %v, want boom", err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("second Next: %v, want boom again", err)
	}
}

func TestChunkReaderNoProgress(t *testing.T) {
	r := NewChunkReader(zeroReader{}, "f", '\n', 1<<20, 0)
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("Next: %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// randomStream mixes the cases the rules are about: empty records, CR, NUL,
// line feeds inside NUL records, invalid UTF-8, long records, and a final
// record with or without its terminator.
func randomStream(rng *rand.Rand, term byte) []byte {
	var b []byte
	for n := rng.IntN(40); n > 0; n-- {
		switch rng.IntN(8) {
		case 0: // empty record
		case 1:
			b = append(b, '\r')
		case 2:
			b = append(b, bytes.Repeat([]byte{'L'}, rng.IntN(200))...)
		default:
			for k := rng.IntN(12); k > 0; k-- {
				b = append(b, "ab\x00\n\r\xff\xef"[rng.IntN(7)])
			}
		}
		if rng.IntN(10) > 0 {
			b = append(b, term)
		}
	}
	return b
}

func TestChunkReaderProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 3000; i++ {
		term := byte('\n')
		if i%3 == 0 {
			term = 0
		}
		data := randomStream(rng, term)
		size := 1 + rng.IntN(64)
		maxRecord := 0
		if rng.IntN(3) == 0 {
			maxRecord = rng.IntN(40)
		}
		var in io.Reader = bytes.NewReader(data)
		switch rng.IntN(3) {
		case 1:
			in = iotest.OneByteReader(in)
		case 2:
			in = iotest.DataErrReader(iotest.HalfReader(in))
		}
		r := NewChunkReader(in, "f", term, size, maxRecord)
		// An input that pauses now and then (a pipe from tail -f): the
		// chunks are cut sooner, the records and errors are the same.
		idle := i%2 == 1
		if idle {
			r.Idle = func() bool { return rng.IntN(3) == 0 }
		}
		got := chunkEvents(t, r, term, func(int) bool { return rng.IntN(4) > 0 })
		if want := reference(data, term, maxRecord); !reflect.DeepEqual(got, want) {
			t.Fatalf("data %q term %q chunk %d max %d idle %v:\ngot  %v\nwant %v", data, term, size, maxRecord, idle, got, want)
		}
	}
}

// TestChunkReaderStalled: once the input pauses, the records read so far
// make a chunk, marked Stalled, without waiting for the chunk to fill; the
// part of a record read so far waits for the rest.
func TestChunkReaderStalled(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewChunkReader(pr, "f", '\n', 1<<20, 0)
	paused := make(chan bool, 1)
	r.Idle = func() bool {
		select {
		case <-paused:
			return true
		default:
			return false
		}
	}
	go func() {
		paused <- true
		io.WriteString(pw, "a\nb\npart")
		paused <- true
		io.WriteString(pw, "ial\nc\n")
		pw.Close()
	}()
	var got []string
	var stalled []bool
	for {
		c, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got, stalled = append(got, string(c.Data)), append(stalled, c.Stalled)
		r.Release(c)
	}
	if want := []string{"a\nb\n", "partial\nc\n"}; !reflect.DeepEqual(got, want) || !stalled[0] {
		t.Fatalf("chunks %q (stalled %v), want %q, the first stalled", got, stalled, want)
	}
}

func FuzzChunkReader(f *testing.F) {
	f.Add([]byte("a\nb\n\nc"), uint8(3), uint8(0), false)
	f.Add([]byte("a\x00b\nc\x00"), uint8(1), uint8(2), true)
	f.Add([]byte("\r\n\xef\xbb\xbf\xff\n"), uint8(2), uint8(1), false)
	f.Fuzz(func(t *testing.T, data []byte, size, maxRecord uint8, nul bool) {
		term := byte('\n')
		if nul {
			term = 0
		}
		r := NewChunkReader(iotest.HalfReader(bytes.NewReader(data)), "f", term, int(size)+1, int(maxRecord%64))
		got := chunkEvents(t, r, term, func(i int) bool { return i%2 == 0 })
		if want := reference(data, term, int(maxRecord%64)); !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %v\nwant %v", got, want)
		}
	})
}

func TestSplitRecords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a\n", []string{"a"}},
		{"\n", []string{""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"a\r\n", []string{"a\r"}},
	} {
		var got []string
		SplitRecords([]byte(c.in), '\n', func(rec []byte) bool { got = append(got, string(rec)); return true })
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitRecords(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	n := 0
	SplitRecords([]byte("a\nb\nc\n"), '\n', func([]byte) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("SplitRecords went on after fn returned false: %d calls", n)
	}
}

// endless repeats its data forever without allocating.
type endless struct {
	data []byte
	off  int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m := copy(p[n:], e.data[e.off:])
		n += m
		e.off = (e.off + m) % len(e.data)
	}
	return n, nil
}

func TestChunkReaderSteadyStateAllocs(t *testing.T) {
	r := NewChunkReader(&endless{data: textData(1<<16, 5)}, "f", '\n', 64<<10, 1<<10)
	cycle := func() {
		c, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		r.Release(c)
	}
	for i := 0; i < 10; i++ {
		cycle() // fill the free list
	}
	if n := testing.AllocsPerRun(200, cycle); n != 0 {
		t.Errorf("Next+Release allocates %v times per chunk", n)
	}
}

// BenchmarkSplitHash is the per-core floor of every command: cut 1 MiB
// chunks of ~50-byte lines, split them and hash each record ("split" only
// splits, to show what the hash costs on top).
func BenchmarkSplitHash(b *testing.B) {
	var lines bytes.Buffer
	SplitRecords(textData(64<<20, 6), '\n', func(rec []byte) bool {
		fmt.Fprintf(&lines, "%s,%024d\n", rec, len(rec)) // ~26-byte keys padded to ~50
		return true
	})
	data := lines.Bytes()
	records := bytes.Count(data, []byte{'\n'})
	for _, c := range []struct {
		name string
		hash func([]byte) uint64
	}{
		{"split", func(rec []byte) uint64 { return uint64(len(rec)) }},
		{"xxh3", func(rec []byte) uint64 { return XXH3.Sum(rec).Lo }},
		{"sha256", func(rec []byte) uint64 { return SHA256.Sum(rec).Lo }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var acc uint64
			for b.Loop() {
				r := NewChunkReader(bytes.NewReader(data), "f", '\n', 1<<20, 0)
				for {
					ch, err := r.Next()
					if err != nil {
						break
					}
					SplitRecords(ch.Data, '\n', func(rec []byte) bool {
						acc += c.hash(rec)
						return true
					})
					r.Release(ch)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
			b.ReportMetric(float64(len(data))/float64(records), "B/record")
		})
	}
}

// zeros is n zero bytes, made as they are read.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.n))
	clear(p[:n])
	z.n -= int64(n)
	return n, nil
}

// A record past MaxRecordLimit is too long whatever limit the caller asks
// for (0, or more): records are addressed by 32-bit offsets downstream,
// and a 2 GiB record under --max-record 0 panicked dedup.
func TestChunkReaderRecordLimit(t *testing.T) {
	for _, asked := range []int{0, -1, 1 << 40} {
		if r := NewChunkReader(strings.NewReader(""), "-", '\n', 0, asked); r.maxRecord != MaxRecordLimit {
			t.Fatalf("maxRecord %d asked: %d, want %d", asked, r.maxRecord, MaxRecordLimit)
		}
	}
	if testing.Short() {
		t.Skip("reads 1 GiB")
	}
	in := io.MultiReader(&zeros{MaxRecordLimit + 1}, strings.NewReader("\nnext\n"))
	r := NewChunkReader(in, "big", '\n', 1<<20, 0)
	_, err := r.Next()
	var re *RecordError
	if !errors.Is(err, ErrRecordTooLong) || !errors.As(err, &re) || re.Record != 1 {
		t.Fatalf("got %v, want record 1 too long", err)
	}
}
