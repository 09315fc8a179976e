package ingest

import (
	"bytes"
	"encoding/csv"
	"io"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestKeyCSV(t *testing.T) {
	runKeyCases(t, FormatCSV, []keyCase{
		{name: "plain", keys: "1|3", rec: "a,b,c\n", want: "a:c"},
		{name: "order as given", keys: "3|1", rec: "a,b,c\n", want: "c:a"},
		{name: "a column twice", keys: "2|2", rec: "a,b,c\n", want: "b:b"},
		{name: "CRLF", keys: "3", rec: "a,b,c\r\n", want: "c"},
		{name: "no terminator", keys: "2", rec: "a,b", want: "b"},
		{name: "CR inside a field kept", keys: "1", rec: "a\rb,c\n", want: "a\rb"},
		{name: "CR before CRLF kept", keys: "2", rec: "a,b\r\r\n", want: "b\r"},
		{name: "spaces kept", keys: "1", rec: " a ,b\n", want: " a "},
		{name: "invalid UTF-8 kept", keys: "1", rec: "\xff\xfe,b\n", want: "\xff\xfe"},
		{name: "NUL kept", keys: "1", rec: "a\x00b,c\n", want: "a\x00b"},
		{name: "empty fields", keys: "1|2|3", rec: ",,\n", want: "::"},
		{name: "trailing comma", keys: "2", rec: "a,\n", want: ""},
		{name: "quoted comma", keys: "1|2", rec: "\"a,b\",c\n", want: "a,b:c"},
		{name: "quoted last field, CRLF", keys: "2", rec: "a,\"b\"\r\n", want: "b"},
		{name: "quoted empty", keys: "1|2", rec: "\"\",x\n", want: ":x"},
		{name: "doubled quotes", keys: "1", rec: "\"a\"\"b\"\"\",c\n", want: "a\"b\""},
		{name: "only a doubled quote", keys: "1", rec: "\"\"\"\"\n", want: "\""},
		{name: "embedded LF", keys: "1|2", rec: "\"a\nb\",c\n", want: "a\nb:c"},
		{name: "embedded CRLF kept", keys: "1", rec: "\"a\r\nb\",c\r\n", want: "a\r\nb"},
		{name: "quoted CR at the end kept", keys: "2", rec: "a,\"b\r\"\n", want: "b\r"},
		{name: "quoted after quoted", keys: "2", rec: "\"a\",\"b\"\n", want: "b"},
		{name: "unquoted after quoted escapes", keys: "1|2", rec: "\"x\"\"\",y\n", want: "x\":y"},
		{name: "BOM skipped in the first record", keys: "1", rec: "\xef\xbb\xbfa,b\n", first: true, want: "a"},
		{name: "BOM before a quote", keys: "1", rec: "\xef\xbb\xbf\"a\",b\n", first: true, want: "a"},
		{name: "BOM elsewhere is data", keys: "1", rec: "\xef\xbb\xbfa,b\n", want: "\xef\xbb\xbfa"},
		{name: "blank line", keys: "1", rec: "\n", bad: "blank line"},
		{name: "blank CRLF line", keys: "1", rec: "\r\n", bad: "blank line"},
		{name: "BOM-only first line", keys: "1", rec: "\xef\xbb\xbf\n", first: true, bad: "blank line"},
		{name: "missing column", keys: "1|3", rec: "a,b\n", bad: "no column 3: the record has 2 fields"},
		{name: "missing column, quoted", keys: "4", rec: "\"a\",b\n", bad: "no column 4: the record has 2 fields"},
		{name: "missing column by name", keys: "c", header: "a,b,c\n", rec: "x,y\n", bad: `no column 3 ("c"): the record has 2 fields`},
		{name: "unterminated quote", keys: "1", rec: "\"abc\n", bad: "unterminated quoted field 1"},
		{name: "unterminated after a doubled quote", keys: "1", rec: "a,\"b\"\"\n", bad: "unterminated quoted field 2"},
		{name: "bare quote", keys: "1", rec: "a\"b,c\n", bad: "bare quote in unquoted field 1"},
		{name: "space before a quote", keys: "2", rec: "a, \"b\"\n", bad: "bare quote in unquoted field 2"},
		{name: "text after the closing quote", keys: "1", rec: "\"a\"b,c\n", bad: "text after the closing quote of field 1"},
		{name: "CR after the closing quote", keys: "1", rec: "\"a\"\r,c\n", bad: "text after the closing quote"},
		{name: "bad quoting outside the key", keys: "1", rec: "a,b,c\"d\n", bad: "bare quote in unquoted field 3"},
		{name: "header name", keys: "name", header: "id,name\n", rec: "1,bob\n", want: "bob"},
		{name: "header names, any order", keys: "c|a", header: "a,b,c\r\n", rec: "1,2,3\r\n", want: "3:1"},
		{name: "header with BOM and quotes", keys: "na,me", header: "\xef\xbb\xbf\"id\",\"na,me\"\r\n", rec: "1,x\n", want: "x"},
		{name: "column number with a header", keys: "2", header: "id,name\n", rec: "1,bob\n", want: "bob"},
		{name: "digits name a column number", keys: "1", header: "2,1\n", rec: "a,b\n", want: "a"},
	})
}

// writeCSV is a reference writer: it quotes a field that needs it (or, at
// random, one that does not), doubling its quotes, and ends each record with
// "\n" or "\r\n", the last one perhaps with none.
func writeCSV(rng *rand.Rand, records [][]string) []byte {
	var b []byte
	for i, fields := range records {
		for j, f := range fields {
			if j > 0 {
				b = append(b, ',')
			}
			// A lone empty field unquoted would be a blank line.
			if strings.ContainsAny(f, ",\"\r\n") || len(fields) == 1 && f == "" || rng.IntN(5) == 0 {
				b = append(b, '"')
				b = append(b, strings.ReplaceAll(f, `"`, `""`)...)
				b = append(b, '"')
			} else {
				b = append(b, f...)
			}
		}
		switch {
		case i == len(records)-1 && rng.IntN(3) == 0:
		case rng.IntN(2) == 0:
			b = append(b, "\r\n"...)
		default:
			b = append(b, '\n')
		}
	}
	return b
}

func randomCSVRecords(rng *rand.Rand) [][]string {
	const alphabet = "ab,\"\n\r \x00\t\xff"
	records := make([][]string, 1+rng.IntN(8))
	for i := range records {
		fields := make([]string, 1+rng.IntN(5))
		for j := range fields {
			var f []byte
			for k := rng.IntN(7); k > 0; k-- {
				if rng.IntN(10) == 0 {
					f = append(f, "é"...)
				} else {
					f = append(f, alphabet[rng.IntN(len(alphabet))])
				}
			}
			fields[j] = string(f)
		}
		records[i] = fields
	}
	return records
}

// TestCSVWriteReadProperty writes random records with a reference writer and
// checks that SplitFormat and Key give every field back, byte for byte, and
// that reading the same bytes in random small chunks gives the same records.
func TestCSVWriteReadProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	keyers := map[int]*Keyer{} // key: all of a record's columns
	columns := []*Keyer{}      // columns[j]: column j+1 alone
	keyer := func(keys []string) *Keyer {
		k, err := NewKeyer(KeySpec{Format: FormatCSV, Keys: keys, Sep: "|"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for n := 1; n <= 5; n++ {
		var keys []string
		for j := 1; j <= n; j++ {
			keys = append(keys, strconv.Itoa(j))
		}
		keyers[n] = keyer(keys)
		columns = append(columns, keyer([]string{strconv.Itoa(n)}))
	}
	for i := 0; i < 5000; i++ {
		records := randomCSVRecords(rng)
		data := writeCSV(rng, records)
		recs := splitAll(data, FormatCSV, '\n')
		if len(recs) != len(records) {
			t.Fatalf("%q: SplitFormat found %d records, want %d: %q", data, len(recs), len(records), recs)
		}
		for r, rec := range recs {
			want := records[r]
			key, err := keyers[len(want)].Key([]byte(rec), r == 0)
			if err != nil || string(key) != strings.Join(want, "|") {
				t.Fatalf("record %q: key %q, %v; want %q", rec, key, err, strings.Join(want, "|"))
			}
			for j, f := range want {
				if key, err := columns[j].Key([]byte(rec), r == 0); err != nil || string(key) != f {
					t.Fatalf("record %q column %d: %q, %v; want %q", rec, j+1, key, err, f)
				}
			}
			if len(want) < len(columns) {
				if key, err := columns[len(want)].Key([]byte(rec), r == 0); err == nil {
					t.Fatalf("record %q column %d: %q, want a missing column", rec, len(want)+1, key)
				}
			}
		}
		if data[len(data)-1] != '\n' {
			recs[len(recs)-1] += "\n" // as the chunk reader completes it
		}
		r := NewFormatChunkReader(iotest.HalfReader(bytes.NewReader(data)), "f", FormatCSV, '\n', 1+rng.IntN(32), 0)
		var got []string
		for {
			c, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, splitAll(c.Data, FormatCSV, '\n')...)
			r.Release(c)
		}
		if !reflect.DeepEqual(got, recs) {
			t.Fatalf("%q in chunks: %q, want %q", data, got, recs)
		}
	}
}

// FuzzKeyCSV splits arbitrary bytes into csv records and takes keys from
// them: every key (single, adjacent and other columns, 1- and 2-byte
// separators) is its columns' fields from csvSplit joined, or an error
// where csvSplit has one; and where encoding/csv can judge (a record
// without CR, which it would drop), csvSplit gives the same verdict and the
// same fields.
func FuzzKeyCSV(f *testing.F) {
	for _, s := range []string{
		"a,b,c\n", "\"a\nb\",c\r\n", "\"a\"\"b\",\n", "a\"b,c\n", "\"a\"b\n", "\"abc\n",
		",,\n\n", "\xef\xbb\xbfa,b\n", "\xff,\"\x00\"\n", "\"\"\"\",\"\"\n",
		"u1918327,d7029f77dd,1764633600002,order_create,148.57\n", "u1,d2,1764633600002123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789,x\n",
	} {
		f.Add([]byte(s))
	}
	keyers := fuzzKeyers(f, FormatCSV)
	f.Fuzz(func(t *testing.T, data []byte) {
		first := true
		var header []byte
		SplitShaped(data, FormatCSV, '\n', func(rec []byte, simple bool) bool {
			line := trimNewline(rec)
			if first {
				line = bytes.TrimPrefix(line, []byte(bom))
			}
			ref, refErr := csvSplit(line)
			checkFuzzKeys(t, keyers, rec, first, simple, len(line) == 0 || refErr != nil, ref)
			if first {
				header = rec
			}
			first = false
			line = trimNewline(rec) // encoding/csv keeps a BOM: so does this comparison
			if len(line) == 0 || bytes.IndexByte(rec, '\r') >= 0 {
				return true
			}
			mine, err := csvSplit(line)
			rd := csv.NewReader(bytes.NewReader(rec))
			rd.FieldsPerRecord = -1
			rows, stdErr := rd.ReadAll()
			switch {
			case stdErr != nil && err == nil:
				t.Fatalf("%q: encoding/csv: %v, ours: %q", rec, stdErr, mine)
			case stdErr == nil && err != nil:
				t.Fatalf("%q: encoding/csv: %q, ours: %v", rec, rows, err)
			case stdErr == nil && len(rows) != 1:
				t.Fatalf("%q: encoding/csv reads %d records: %q", rec, len(rows), rows)
			case stdErr == nil:
				var want [][]byte
				for _, f := range rows[0] {
					want = append(want, []byte(f))
				}
				if !reflect.DeepEqual(mine, want) {
					t.Fatalf("%q: fields %q, encoding/csv %q", rec, mine, want)
				}
			}
			return true
		})
		if header != nil {
			// Names from the header resolve to their columns.
			if names, err := headerNames(FormatCSV, header); err == nil && len(names[0]) > 0 {
				if _, isNum, _ := columnNumber(string(names[0])); !isNum {
					spec := KeySpec{Format: FormatCSV, Keys: []string{string(names[0])}, Header: true}
					k, err := NewKeyer(spec, header)
					if err == nil {
						if key, err := k.Key(header, true); err != nil || !bytes.Equal(key, names[0]) {
							t.Fatalf("header %q: key of itself %q, %v", header, key, err)
						}
					}
				}
			}
		}
	})
}

// BenchmarkKeyCSV compares the hand-written scanner with encoding/csv
// (ReuseRecord, FieldsPerRecord -1) on the same events, keyed the same way.
func BenchmarkKeyCSV(b *testing.B) {
	for _, quoted := range []bool{false, true} {
		data := benchEvents(FormatCSV, quoted)
		name := map[bool]string{false: "plain", true: "quoted"}[quoted]
		b.Run("hand/"+name, func(b *testing.B) { runKeyBench(b, data, handKeys(b, FormatCSV)) })
		b.Run("encoding-csv/"+name, func(b *testing.B) {
			var key []byte
			runKeyBench(b, data, func(data []byte) int {
				rd := csv.NewReader(bytes.NewReader(data))
				rd.ReuseRecord, rd.FieldsPerRecord = true, -1
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
}
