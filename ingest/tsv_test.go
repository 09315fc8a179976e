package ingest

import (
	"bytes"
	"encoding/csv"
	"io"
	"slices"
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
	for _, s := range []string{"a\tb\tc\n", "\"a\tb\r\n", "\t\t\n\n", "\xef\xbb\xbfa\tb\n", "\xff\x00\tq\"\n", "u1918327\td7029f77dd\t1764633600002\torder\n"} {
		f.Add([]byte(s))
	}
	keyers := fuzzKeyers(f, FormatTSV)
	f.Fuzz(func(t *testing.T, data []byte) {
		first := true
		SplitShaped(data, FormatTSV, '\n', func(rec []byte, simple bool) bool {
			line := trimNewline(rec)
			if first {
				line = bytes.TrimPrefix(line, []byte(bom))
			}
			checkFuzzKeys(t, keyers, rec, first, simple, len(line) == 0, bytes.Split(line, []byte{'\t'}))
			first = false
			return true
		})
	})
}

// fuzzKeyer is a Keyer with what it was made of, for checkFuzzKeys.
type fuzzKeyer struct {
	k    *Keyer
	cols []int // 0-based
	sep  string
}

// fuzzKeyers makes keyers of single columns, adjacent columns in order
// (the one-copy join, with a separator that is the delimiter too) and
// others, with one- and two-byte separators.
func fuzzKeyers(f *testing.F, format Format) []fuzzKeyer {
	var ks []fuzzKeyer
	for _, c := range []struct {
		cols []int
		sep  string
	}{
		{[]int{0}, ":"}, {[]int{1}, ":"}, {[]int{2}, ":"}, {[]int{1, 0}, ":"}, {[]int{0, 2}, ":"},
		{[]int{0, 1, 2}, ":"}, {[]int{1, 2}, ","}, {[]int{0, 1}, "\t"}, {[]int{0, 1}, "::"}, {[]int{1, 2, 3}, "|"},
	} {
		var keys []string
		for _, col := range c.cols {
			keys = append(keys, strconv.Itoa(col+1))
		}
		k, err := NewKeyer(KeySpec{Format: format, Keys: keys, Sep: c.sep}, nil)
		if err != nil {
			f.Fatal(err)
		}
		ks = append(ks, fuzzKeyer{k, c.cols, c.sep})
	}
	return ks
}

// checkFuzzKeys checks each keyer's key of rec against the reference
// fields of its line: an error when bad is set or a key column is missing,
// else the columns' fields joined by the separator, byte for byte, and
// each Item the column's field. It checks Key, and KeyShaped with simple,
// what SplitShaped said of rec; and what simple promises: no line feed but
// a final one, and in csv no quote.
func checkFuzzKeys(t *testing.T, keyers []fuzzKeyer, rec []byte, first, simple, bad bool, fields [][]byte) {
	t.Helper()
	if lf := bytes.IndexByte(rec, '\n'); simple && (lf >= 0 && lf < len(rec)-1 || keyers[0].k.format == FormatCSV && bytes.IndexByte(rec, '"') >= 0) {
		t.Fatalf("%q: SplitShaped calls it simple", rec)
	}
	for _, fk := range keyers {
		for _, shaped := range []bool{false, true} {
			var key []byte
			var err error
			if shaped {
				key, err = fk.k.KeyShaped(rec, first, simple)
			} else {
				key, err = fk.k.Key(rec, first)
			}
			if bad || slices.Max(fk.cols) >= len(fields) {
				if err == nil {
					t.Fatalf("%q columns %v (shaped %v): key %q, want an error", rec, fk.cols, shaped, key)
				}
				if _, err := fk.k.Fingerprint(rec, first, shaped && simple, XXH3); err == nil {
					t.Fatalf("%q columns %v (shaped %v): a fingerprint, want an error", rec, fk.cols, shaped)
				}
				if item := fk.k.Item(0); item != nil {
					t.Fatalf("%q columns %v (shaped %v): item %q after an error, want nil", rec, fk.cols, shaped, item)
				}
				continue
			}
			var want []byte
			for i, c := range fk.cols {
				if i > 0 {
					want = append(want, fk.sep...)
				}
				want = append(want, fields[c]...)
			}
			if err != nil || !bytes.Equal(key, want) {
				t.Fatalf("%q columns %v sep %q (shaped %v): key %q, %v; want %q", rec, fk.cols, fk.sep, shaped, key, err, want)
			}
			for _, h := range []Hash{SHA256, XXH3} { // XXH3 last: Item is checked after its path
				if fp, err := fk.k.Fingerprint(rec, first, shaped && simple, h); err != nil || fp != h.Sum(want) {
					t.Fatalf("%q columns %v sep %q (shaped %v): %v fingerprint %v, %v; want %v", rec, fk.cols, fk.sep, shaped, h, fp, err, h.Sum(want))
				}
			}
			for i, c := range fk.cols {
				if item := fk.k.Item(i); !bytes.Equal(item, fields[c]) {
					t.Fatalf("%q columns %v (shaped %v): item %d %q, want %q", rec, fk.cols, shaped, i, item, fields[c])
				}
			}
		}
	}
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
