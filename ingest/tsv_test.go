package ingest

import (
	"bytes"
	"encoding/csv"
	"io"
	"strconv"
	"testing"
)

func TestKeyTSV(t *testing.T) {
	runKeyCases(t, FormatTSV, []keyCase{
		{name: "plain", keys: "1|3", rec: "a\tb\tc\n", want: "a:c"},
		{name: "CRLF", keys: "2", rec: "a\tb\r\n", want: "b"},
		{name: "CR before CRLF kept", keys: "2", rec: "a\tb\r\r\n", want: "b\r"},
		{name: "no terminator", keys: "2", rec: "a\tb", want: "b"},
		{name: "quotes are data", keys: "1|2", rec: "\"a\"\tb\"c\n", want: "\"a\":b\"c"},
		{name: "an open quote is data", keys: "1", rec: "\"a\tb\n", want: "\"a"},
		{name: "commas are data", keys: "1", rec: "a,b\tc\n", want: "a,b"},
		{name: "empty fields", keys: "1|2", rec: "\t\n", want: ":"},
		{name: "spaces kept", keys: "1", rec: " a \tb\n", want: " a "},
		{name: "invalid UTF-8 and NUL kept", keys: "1", rec: "\xff\x00\tb\n", want: "\xff\x00"},
		{name: "BOM skipped in the first record", keys: "1", rec: "\xef\xbb\xbfa\tb\n", first: true, want: "a"},
		{name: "BOM elsewhere is data", keys: "1", rec: "\xef\xbb\xbfa\tb\n", want: "\xef\xbb\xbfa"},
		{name: "blank line", keys: "1", rec: "\n", bad: "blank line"},
		{name: "blank CRLF line", keys: "1", rec: "\r\n", bad: "blank line"},
		{name: "missing column", keys: "3", rec: "a\tb\n", bad: "no column 3: the record has 2 fields"},
		{name: "header names", keys: "ts|user", header: "\xef\xbb\xbfuser\t\"ts\"\tts\r\n", rec: "u\tt\tx\n", want: "x:u"},
		{name: "header name with a quote", keys: "\"ts\"|user", header: "user\t\"ts\"\n", rec: "u\tt\n", want: "t:u"},
		{name: "missing column by name", keys: "b", header: "a\tb\n", rec: "x\n", bad: `no column 2 ("b"): the record has 1 field`},
	})
}

// FuzzKeyTSV splits arbitrary bytes into tsv records: no panic, and each
// key column is what bytes.Split on TAB gives.
func FuzzKeyTSV(f *testing.F) {
	for _, s := range []string{"a\tb\tc\n", "\"a\tb\r\n", "\t\t\n\n", "\xef\xbb\xbfa\tb\n", "\xff\x00\tq\"\n"} {
		f.Add([]byte(s))
	}
	var keyers []*Keyer
	for c := 1; c <= 3; c++ {
		k, err := NewKeyer(KeySpec{Format: FormatTSV, Keys: []string{strconv.Itoa(c)}}, nil)
		if err != nil {
			f.Fatal(err)
		}
		keyers = append(keyers, k)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first := true
		SplitFormat(data, FormatTSV, '\n', func(rec []byte) bool {
			line := trimNewline(rec)
			if first {
				line = bytes.TrimPrefix(line, []byte(bom))
			}
			fields := bytes.Split(line, []byte{'\t'})
			for c, k := range keyers {
				key, err := k.Key(rec, first)
				switch {
				case len(line) == 0 || c >= len(fields):
					if err == nil {
						t.Fatalf("%q column %d: %q, want an error", rec, c+1, key)
					}
				case err != nil || !bytes.Equal(key, fields[c]):
					t.Fatalf("%q column %d: %q, %v; want %q", rec, c+1, key, err, fields[c])
				}
			}
			first = false
			return true
		})
	})
}

// BenchmarkKeyTSV compares the hand-written split with bytes.Split and
// with encoding/csv reading TAB-separated fields.
func BenchmarkKeyTSV(b *testing.B) {
	data := benchEvents(FormatTSV, false)
	b.Run("hand", func(b *testing.B) { runKeyBench(b, data, handKeys(b, FormatTSV)) })
	b.Run("bytes-split", func(b *testing.B) {
		var key []byte
		runKeyBench(b, data, func(data []byte) int {
			n := 0
			SplitFormat(data, FormatTSV, '\n', func(rec []byte) bool {
				f := bytes.Split(trimNewline(rec), []byte{'\t'})
				key = bytes.Join(f[:3], []byte{':'})
				benchSink += len(key)
				n++
				return true
			})
			return n
		})
	})
	b.Run("encoding-csv", func(b *testing.B) {
		var key []byte
		runKeyBench(b, data, func(data []byte) int {
			rd := csv.NewReader(bytes.NewReader(data))
			rd.Comma, rd.ReuseRecord, rd.FieldsPerRecord = '\t', true, -1
			n := 0
			for {
				rec, err := rd.Read()
				if err == io.EOF {
					return n
				}
				if err != nil {
					b.Fatal(err)
				}
				key = append(append(append(append(append(key[:0], rec[0]...), ':'), rec[1]...), ':'), rec[2]...)
				benchSink += len(key)
				n++
			}
		})
	})
}
