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

// csvReference is the definition of csv records over a whole input, the
// way SplitFormat cuts one big chunk: records end at a '\n' outside quotes,
// a final record gets its terminator, a record's line is 1 plus the line
// feeds before it, and a record over maxRecord bytes (its '\n' not counted)
// is reported.
func csvReference(data []byte, maxRecord int) []event {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(bytes.Clone(data), '\n')
	}
	var evs []event
	line := int64(1)
	SplitFormat(data, FormatCSV, '\n', func(rec []byte) bool {
		e := event{Record: int64(len(evs) + 1), Line: line, Key: string(rec)}
		if maxRecord > 0 && len(rec)-1 > maxRecord {
			e.Key, e.TooLong = "", true
		}
		evs = append(evs, e)
		line += int64(CountLines(rec))
		return true
	})
	return evs
}

// csvChunkEvents reads r to the end, splitting chunks with Chunk.Split as
// the pipeline does, and checks each chunk's invariants: among them that
// the reader calls a chunk quote-free exactly when it is, and that a record
// Split calls simple holds no quote and no line feed but its last byte.
func csvChunkEvents(t testing.TB, r *ChunkReader, release func(int) bool) []event {
	t.Helper()
	var evs []event
	nextRecord, nextLine := int64(1), int64(1)
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
		if len(c.Data) == 0 || c.Data[len(c.Data)-1] != '\n' {
			t.Fatalf("chunk %d does not end with a newline: %q", i, c.Data)
		}
		if c.FirstRecord != nextRecord {
			t.Fatalf("chunk %d FirstRecord %d, want %d", i, c.FirstRecord, nextRecord)
		}
		if c.FirstLine < nextLine {
			t.Fatalf("chunk %d FirstLine %d, before %d", i, c.FirstLine, nextLine)
		}
		if quote := bytes.IndexByte(c.Data, '"'); c.plainCSV != (quote < 0) {
			t.Fatalf("chunk %d: called quote-free %v, its first quote at %d: %q", i, c.plainCSV, quote, c.Data)
		}
		n, line := 0, c.FirstLine
		c.Split(c.Data, FormatCSV, '\n', func(rec []byte, simple bool) bool {
			if simple && (bytes.IndexByte(rec, '"') >= 0 || bytes.IndexByte(rec, '\n') < len(rec)-1) {
				t.Fatalf("chunk %d: record %q called simple", i, rec)
			}
			evs = append(evs, event{Record: c.FirstRecord + int64(n), Line: line, Key: string(rec)})
			line += int64(CountLines(rec))
			n++
			return true
		})
		if n != c.Records {
			t.Fatalf("chunk %d Records %d, SplitFormat found %d", i, c.Records, n)
		}
		nextRecord += int64(n)
		nextLine = line
		if release(i) {
			r.Release(c)
		}
	}
	return evs
}

func TestCSVChunkReaderRules(t *testing.T) {
	for _, c := range []struct {
		name, in  string
		maxRecord int
		want      []event
	}{
		{"empty input", "", 0, nil},
		{"plain", "a,b\nc,d\n", 0, []event{{1, 1, "a,b\n", false}, {2, 2, "c,d\n", false}}},
		{"no final newline", "a\n\"b\"", 0, []event{{1, 1, "a\n", false}, {2, 2, "\"b\"\n", false}}},
		{"newline in quotes", "\"a\nb\",c\r\nd\n", 0, []event{{1, 1, "\"a\nb\",c\r\n", false}, {2, 3, "d\n", false}}},
		{"doubled quotes and newlines", "\"x\"\"\n\"\"y\"\n\n\"\"\n", 0, []event{{1, 1, "\"x\"\"\n\"\"y\"\n", false}, {2, 3, "\n", false}, {3, 4, "\"\"\n", false}}},
		{"unterminated quote takes the rest", "a\n\"b\nc\nd", 0, []event{{1, 1, "a\n", false}, {2, 2, "\"b\nc\nd\n", false}}},
		{"stray quote ends at the next", "a\"b\nc\"\nd\n", 0, []event{{1, 1, "a\"b\nc\"\n", false}, {2, 3, "d\n", false}}},
		{"at the limit", "\"a\nb\"\nx\n", 5, []event{{1, 1, "\"a\nb\"\n", false}, {2, 3, "x\n", false}}},
		{"over the limit", "ab\n\"a\nbc\"\nx\n", 5, []event{{1, 1, "ab\n", false}, {2, 2, "", true}, {3, 4, "x\n", false}}},
		{"over the limit with a newline past it", "\"a\nbcdefg\nh\"\nx\n", 5, []event{{1, 1, "", true}, {2, 4, "x\n", false}}},
		{"stray quote over the limit", "ok\n\"open\nand\nthe\nrest\nof\nthe\ninput\n", 8, []event{{1, 1, "ok\n", false}, {2, 2, "", true}}},
		{"stray quote closed past the limit", "\"open\nand\nclosed\"\nx\n", 8, []event{{1, 1, "", true}, {2, 4, "x\n", false}}},
	} {
		for _, size := range []int{1, 2, 3, 5, 64, 1 << 20} {
			t.Run(fmt.Sprintf("%s/chunk%d", c.name, size), func(t *testing.T) {
				if got := csvReference([]byte(c.in), c.maxRecord); !reflect.DeepEqual(got, c.want) {
					t.Fatalf("reference itself gives %v, want %v", got, c.want)
				}
				r := NewFormatChunkReader(strings.NewReader(c.in), "f", FormatCSV, 0, size, c.maxRecord)
				got := csvChunkEvents(t, r, func(int) bool { return true })
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("got  %v\nwant %v", got, c.want)
				}
			})
		}
	}
}

// TestCSVChunkReaderStrayQuoteBounded checks that an unclosed quote near
// the start of a big input costs a too-long error, not a buffer the size of
// the input.
func TestCSVChunkReaderStrayQuoteBounded(t *testing.T) {
	in := io.MultiReader(strings.NewReader("a,\"b\n"), &endless{data: []byte("c,d\n")})
	r := NewFormatChunkReader(io.LimitReader(in, 64<<20), "f.csv", FormatCSV, '\n', 64<<10, 1<<20)
	c, err := r.Next()
	if err == nil {
		t.Fatalf("Next = %d bytes, want a too-long error", len(c.Data))
	}
	if want := "f.csv:1: record 1: record too long: more than 1048576 bytes"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	// The rest of the input is the too-long record: skipped, then EOF.
	if c, err := r.Next(); err != io.EOF {
		t.Fatalf("Next after the error = %v, %v; want io.EOF", c, err)
	}
}

func TestFormatChunkReaderOtherFormats(t *testing.T) {
	// tsv and jsonl cut at every '\n', quotes or not; lines keeps its term.
	for _, f := range []Format{FormatTSV, FormatJSONL} {
		r := NewFormatChunkReader(strings.NewReader("\"a\nb\"\n"), "f", f, 0, 1<<20, 0)
		c, err := r.Next()
		if err != nil || c.Records != 2 {
			t.Errorf("%v: Next = %v, %v; want 2 records", f, c, err)
		}
	}
	r := NewFormatChunkReader(strings.NewReader("a\nb\x00"), "f", FormatLines, 0, 1<<20, 0)
	if c, err := r.Next(); err != nil || c.Records != 1 {
		t.Errorf("lines -z: Next = %v, %v; want 1 record", c, err)
	}
}

// randomCSVStream mixes what csv chunking is about: quoted newlines, CRLF,
// doubled quotes, stray quotes, blank lines, long records, a final record
// with or without its newline.
func randomCSVStream(rng *rand.Rand) []byte {
	var b []byte
	for n := rng.IntN(30); n > 0; n-- {
		switch rng.IntN(6) {
		case 0:
			b = append(b, bytes.Repeat([]byte{'L'}, rng.IntN(100))...)
		case 1:
			b = append(b, `"`...)
			for k := rng.IntN(10); k > 0; k-- {
				b = append(b, "a,\n\r\"\""[rng.IntN(6)])
			}
			b = append(b, `"`...)
		default:
			for k := rng.IntN(8); k > 0; k-- {
				b = append(b, "ab,,\r\n\n\"\xff"[rng.IntN(9)])
			}
		}
		if rng.IntN(8) > 0 {
			b = append(b, '\n')
		}
	}
	return b
}

func TestCSVChunkReaderProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 3000; i++ {
		data := randomCSVStream(rng)
		size := 1 + rng.IntN(64)
		maxRecord := 0
		if rng.IntN(3) == 0 {
			maxRecord = rng.IntN(60)
		}
		var in io.Reader = bytes.NewReader(data)
		switch rng.IntN(3) {
		case 1:
			in = iotest.OneByteReader(in)
		case 2:
			in = iotest.DataErrReader(iotest.HalfReader(in))
		}
		r := NewFormatChunkReader(in, "f", FormatCSV, '\n', size, maxRecord)
		got := csvChunkEvents(t, r, func(int) bool { return rng.IntN(4) > 0 })
		if want := csvReference(data, maxRecord); !reflect.DeepEqual(got, want) {
			t.Fatalf("data %q chunk %d max %d:\ngot  %v\nwant %v", data, size, maxRecord, got, want)
		}
	}
}

func FuzzCSVChunks(f *testing.F) {
	f.Add([]byte("a,\"b\nc\"\r\nd\n"), uint8(3), uint8(0))
	f.Add([]byte("\"\"\"\n\"\n\"x"), uint8(1), uint8(2))
	f.Add([]byte("a\"b\nc\nd\"\ne"), uint8(2), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, size, maxRecord uint8) {
		r := NewFormatChunkReader(iotest.HalfReader(bytes.NewReader(data)), "f", FormatCSV, '\n', int(size)+1, int(maxRecord%64))
		got := csvChunkEvents(t, r, func(i int) bool { return i%2 == 0 })
		if want := csvReference(data, int(maxRecord%64)); !reflect.DeepEqual(got, want) {
			t.Fatalf("got  %v\nwant %v", got, want)
		}
	})
}

// TestQuoteParityScans checks the word-at-a-time scans against a byte loop
// over random bytes rich in quotes and newlines, from every start state.
func TestQuoteParityScans(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for i := 0; i < 20000; i++ {
		data := make([]byte, rng.IntN(80))
		for j := range data {
			// 0xa2 and 0x8a differ from '"' and '\n' in the top bit only.
			data[j] = "\"\n\"\nab\x80\xff\xa2\x8a"[rng.IntN(10)]
			if rng.IntN(3) == 0 {
				data[j] = 'x'
			}
		}
		start := rng.IntN(len(data) + 1)
		inQuotes := rng.IntN(2) == 0
		// The reference: a byte loop.
		var ends []int
		in := inQuotes
		for p := start; p < len(data); p++ {
			switch data[p] {
			case '"':
				in = !in
			case '\n':
				if !in {
					ends = append(ends, p+1)
				}
			}
		}
		wantEnd, wantLast := -1, 0
		if len(ends) > 0 {
			wantEnd, wantLast = ends[0], ends[len(ends)-1]-start
		}
		// The state at the end matters only when no record ends.
		if end, endIn := quotedEnd(data, start, inQuotes); end != wantEnd || end < 0 && endIn != in {
			t.Fatalf("quotedEnd(%q, %d, %v) = %d, %v; want %d, %v", data, start, inQuotes, end, endIn, wantEnd, in)
		}
		var c quoteCursor
		if end, endIn := c.end(data, start, inQuotes); end != wantEnd || end < 0 && endIn != in {
			t.Fatalf("end(%q, %d, %v) = %d, %v; want %d, %v", data, start, inQuotes, end, endIn, wantEnd, in)
		}
		count, last, endIn, quote := scanRecords(data[start:], inQuotes)
		if wantQuote := bytes.IndexByte(data[start:], '"'); count != len(ends) || last != wantLast || endIn != in || quote != wantQuote {
			t.Fatalf("scanRecords(%q, %v) = %d, %d, %v, %d; want %d, %d, %v, %d", data[start:], inQuotes, count, last, endIn, quote, len(ends), wantLast, in, wantQuote)
		}
	}
}

// TestCSVFirstLong: the windowed search over the quote-free lines and the
// record walk after them find the record a walk over every record finds,
// on chunks with and without quotes, long records before, at and after the
// first quote, a last record without its terminator, and limits around the
// records' lengths.
func TestCSVFirstLong(t *testing.T) {
	walk := func(data []byte, maxRecord int) int {
		first := -1
		SplitFormat(data, FormatCSV, '\n', func(rec []byte) bool {
			if len(trimTerm(rec)) > maxRecord {
				first = cap(data) - cap(rec)
				return false
			}
			return true
		})
		return first
	}
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 3000 {
		var b []byte
		for range 1 + r.IntN(12) {
			n := r.IntN(30)
			switch r.IntN(5) {
			case 0: // quoted, a line feed inside
				b = append(b, '"')
				b = append(b, bytes.Repeat([]byte{'x'}, n)...)
				b = append(b, "\n\"\",y\"\n"...)
			case 1:
				b = append(b, "a,\"b\",c\n"...)
			default:
				b = append(b, bytes.Repeat([]byte{'a'}, n)...)
				b = append(b, '\n')
			}
		}
		if trial%3 == 0 { // no terminator after the last record
			b = b[:len(b)-1]
		}
		data := b[:len(b):len(b)]
		for _, maxRecord := range []int{0, 1, 5, 10, 20, 29, 30, 40, len(data) - 1, len(data), 1 << 20} {
			if got, want := csvFirstLong(data, maxRecord, bytes.IndexByte(data, '"')), walk(data, maxRecord); got != want {
				t.Fatalf("trial %d, %q, max %d: %d, want %d", trial, data, maxRecord, got, want)
			}
		}
	}
}

// trimTerm is a record without its '\n'.
func trimTerm(rec []byte) []byte { return bytes.TrimSuffix(rec, []byte{'\n'}) }
