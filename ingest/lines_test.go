package ingest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func lineEvents(t testing.TB, r *LineReader) []event {
	t.Helper()
	var evs []event
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) || !errors.Is(err, ErrRecordTooLong) {
				t.Fatalf("Next: %v", err)
			}
			if re.Record != r.Record() || re.Line != r.Line() {
				t.Fatalf("error at %d@%d, Record/Line say %d@%d", re.Record, re.Line, r.Record(), r.Line())
			}
			evs = append(evs, event{Record: re.Record, Line: re.Line, TooLong: true})
			continue
		}
		evs = append(evs, event{Record: r.Record(), Line: r.Line(), Key: string(rec)})
	}
}

func TestLineReaderRules(t *testing.T) {
	for _, c := range []struct {
		in        string
		term      byte
		maxRecord int
	}{
		{"", '\n', 0},
		{"a", '\n', 0},
		{"a\n", '\n', 0},
		{"\n\n", '\n', 0},
		{"a\r\n\xef\xbb\xbfb\n\xff\x00\n", '\n', 0},
		{"a\nb\x00\nc\x00d", 0, 0},
		{"ab\nabcd\nx\n", '\n', 3},
		{"ab\nabcd", '\n', 3},
		{"a\nb\ncd\x00x\x00", 0, 3},
		{strings.Repeat("z", 100) + "\n" + strings.Repeat("y", 40) + "\nq", '\n', 0},
		{strings.Repeat("z", 100) + "\n" + strings.Repeat("y", 40) + "\nq", '\n', 50},
		{strings.Repeat("z\n", 30) + "\x00" + strings.Repeat("y", 40) + "\x00q", 0, 20},
	} {
		want := reference([]byte(c.in), c.term, c.maxRecord)
		got := lineEvents(t, newLineReaderSize(strings.NewReader(c.in), "f", c.term, c.maxRecord, 16))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q term %q max %d:\ngot  %v\nwant %v", c.in, c.term, c.maxRecord, got, want)
		}
	}
}

func TestLineReaderProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 3000; i++ {
		term := byte('\n')
		if i%3 == 0 {
			term = 0
		}
		data := randomStream(rng, term)
		maxRecord := 0
		if rng.IntN(3) == 0 {
			maxRecord = rng.IntN(40)
		}
		var in io.Reader = bytes.NewReader(data)
		if rng.IntN(2) == 0 {
			in = iotest.OneByteReader(in)
		}
		got := lineEvents(t, newLineReaderSize(in, "f", term, maxRecord, 16+rng.IntN(64)))
		if want := reference(data, term, maxRecord); !reflect.DeepEqual(got, want) {
			t.Fatalf("data %q term %q max %d:\ngot  %v\nwant %v", data, term, maxRecord, got, want)
		}
	}
}

func TestLineReaderTooLongMessage(t *testing.T) {
	r := NewLineReader(strings.NewReader("a\n\nbbbb\n"), "-", '\n', 3)
	for i := 0; i < 2; i++ {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := r.Next()
	if want := "-:3: record 3: record too long: more than 3 bytes"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestLineReaderDoesNotWait: a key typed at a terminal is answered before
// the next one is typed.
func TestLineReaderDoesNotWait(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	r := NewLineReader(pr, "-", '\n', 0)
	go pw.Write([]byte("k1\n"))
	done := make(chan string, 1)
	go func() {
		rec, _ := r.Next()
		done <- string(rec)
	}()
	select {
	case got := <-done:
		if got != "k1" {
			t.Errorf("Next = %q, want k1", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next waited for more input than one record")
	}
}

func TestLineReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewLineReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), "f", '\n', 0)
	if rec, err := r.Next(); err != nil || string(rec) != "a" {
		t.Fatalf("Next = %q, %v", rec, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Fatalf("Next: %v, want boom", err)
		}
	}
}
