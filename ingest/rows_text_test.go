package ingest

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type textGeo struct {
	Lat float64 `parquet:"lat"`
	Tag *string `parquet:"tag,optional"`
}

type textRow struct {
	ID   int64    `parquet:"id"`
	S    string   `parquet:"s"`
	B    []byte   `parquet:"b"`
	F    float32  `parquet:"f"`
	D    *float64 `parquet:"d,optional"`
	OK   bool     `parquet:"ok"`
	U    uint32   `parquet:"u"`
	Geo  *textGeo `parquet:"geo,optional"`
	Last *string  `parquet:"last,optional"`
}

// textFile is rows written by parquet-go, in row groups of 3 rows.
func textFile(tb testing.TB, rows []textRow) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[textRow](&buf, parquet.MaxRowsPerRowGroup(3))
	if _, err := w.Write(rows); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// textFixture is textFile opened.
func textFixture(t *testing.T, rows []textRow) *ParquetFile {
	t.Helper()
	b := textFile(t, rows)
	p, err := OpenParquet("fix.parquet", bytes.NewReader(b), int64(len(b)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func ptr[T any](v T) *T { return &v }

var textRows6 = []textRow{
	{ID: 1, S: "plain", B: []byte("bytes"), F: 1.5, D: ptr(0.1), OK: true, U: 4294967295, Geo: &textGeo{Lat: -90, Tag: ptr("n")}, Last: ptr("x")},
	{ID: -2, S: "a,b", B: []byte{0xff, 0x00}, F: float32(math.NaN()), D: nil, OK: false, U: 0, Geo: nil, Last: nil},
	{ID: 3, S: "q\"uote\nline", B: nil, F: float32(math.Inf(-1)), D: ptr(1e21), U: 7, Geo: &textGeo{Lat: 12.25}, Last: ptr("")},
	{ID: 4, S: "", B: []byte("späce"), F: 0, D: ptr(math.Copysign(0, -1)), U: 8, Geo: &textGeo{Lat: 0.1}, Last: ptr("y")},
	{ID: 5, S: "tab\there", F: 2, U: 9},
	{ID: 6, S: "six", F: 3, U: 10, Last: ptr("z")},
}

// TestRowWriterCSV: RFC 4180 as encoding/csv reads it back, a header of
// column paths, values by the key text rules, NULL an empty field and an
// empty string "", rows in order across row groups and batches.
func TestRowWriterCSV(t *testing.T) {
	p := textFixture(t, textRows6)
	b, err := copyRowsAs(p, RowsCSV, 2, func(row int64) bool { return row != 4 })
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("%v in\n%s", err, b)
	}
	want := [][]string{
		{"id", "s", "b", "f", "d", "ok", "u", "geo.lat", "geo.tag", "last"},
		{"1", "plain", "bytes", "1.5", "0.1", "true", "4294967295", "-90", "n", "x"},
		{"-2", "a,b", "\xff\x00", "NaN", "", "false", "0", "", "", ""},
		{"3", "q\"uote\nline", "", "-Inf", "1e+21", "false", "7", "12.25", "", ""},
		{"5", "tab\there", "", "2", "", "false", "9", "", "", ""},
		{"6", "six", "", "3", "", "false", "10", "", "", "z"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(recs), len(want), b)
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Fatalf("record %d: %q, want %q", i, recs[i], want[i])
		}
	}
	// A NULL is an empty field, an empty string a quoted one.
	lines := strings.Split(string(b), "\n")
	if !strings.HasSuffix(lines[2], ",,,") || !strings.HasSuffix(lines[4], `,12.25,,""`) {
		t.Fatalf("NULL and empty: %q, %q", lines[2], lines[4])
	}
}

// TestRowWriterTSV: no quoting, so a value holding a TAB or a line break
// is an error naming its row and column, as fpdedup reads TSV.
func TestRowWriterTSV(t *testing.T) {
	p := textFixture(t, textRows6)
	b, err := copyRowsAs(p, RowsTSV, 10, func(row int64) bool { return row == 1 || row == 4 || row == 6 })
	if err != nil {
		t.Fatal(err)
	}
	want := "id\ts\tb\tf\td\tok\tu\tgeo.lat\tgeo.tag\tlast\n" +
		"1\tplain\tbytes\t1.5\t0.1\ttrue\t4294967295\t-90\tn\tx\n" +
		"4\t\tspäce\t0\t-0\tfalse\t8\t0.1\t\ty\n" +
		"6\tsix\t\t3\t\tfalse\t10\t\t\tz\n"
	if string(b) != want {
		t.Fatalf("got\n%q\nwant\n%q", b, want)
	}
	_, err = copyRowsAs(p, RowsTSV, 10, func(row int64) bool { return row == 5 })
	var re *RecordError
	if !errors.As(err, &re) || !errors.Is(err, ErrParquetNoText) || re.Record != 5 || re.RowGroup != 2 ||
		!strings.Contains(err.Error(), "fix.parquet: row group 1, row 5: column s:") {
		t.Fatalf("a TAB in a tsv value: %v", err)
	}
}

// TestRowWriterJSONL: each line is an object encoding/json reads, groups
// nested and a NULL group null, numbers as numbers, NaN and infinities as
// strings, bytes that are not UTF-8 as NAME_base64.
func TestRowWriterJSONL(t *testing.T) {
	p := textFixture(t, textRows6)
	b, err := copyRowsAs(p, RowsJSONL, 1, func(int64) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines:\n%s", len(lines), b)
	}
	want := []string{
		`{"id":1,"s":"plain","b":"bytes","f":1.5,"d":0.1,"ok":true,"u":4294967295,"geo":{"lat":-90,"tag":"n"},"last":"x"}`,
		`{"id":-2,"s":"a,b","b_base64":"/wA=","f":"NaN","d":null,"ok":false,"u":0,"geo":null,"last":null}`,
		`{"id":3,"s":"q\"uote\nline","b":"","f":"-Inf","d":1e+21,"ok":false,"u":7,"geo":{"lat":12.25,"tag":null},"last":""}`,
		`{"id":4,"s":"","b":"späce","f":0,"d":-0,"ok":false,"u":8,"geo":{"lat":0.1,"tag":null},"last":"y"}`,
		`{"id":5,"s":"tab\there","b":"","f":2,"d":null,"ok":false,"u":9,"geo":null,"last":null}`,
		`{"id":6,"s":"six","b":"","f":3,"d":null,"ok":false,"u":10,"geo":null,"last":"z"}`,
	}
	for i, l := range lines {
		if l != want[i] {
			t.Fatalf("line %d:\n%s\nwant\n%s", i+1, l, want[i])
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
	}
}

// TestRowWriterTextRefuses: a repeated column has no single value a row:
// refused when the schema is told, before any row.
func TestRowWriterTextRefuses(t *testing.T) {
	in := openFixture(t, "types.parquet")
	for _, f := range []RowFormat{RowsCSV, RowsTSV, RowsJSONL} {
		err := NewRowWriter(&bytes.Buffer{}, f).Schema(in)
		if !errors.Is(err, ErrParquetNoText) || !strings.Contains(err.Error(), "column l.list.element") {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := RowsCSV.ForRecords(FormatCSV); err == nil {
		t.Fatal("csv of csv records")
	}
	for _, f := range []RowFormat{RowsAsRead, RowsParquet, RowsCSV, RowsTSV, RowsJSONL} {
		if err := f.ForRecords(FormatParquet); err != nil {
			t.Fatalf("%s of Parquet: %v", f, err)
		}
	}
	if err := RowsAsRead.ForRecords(FormatLines); err != nil {
		t.Fatal(err)
	}
}

// TestRowWriterTextEmpty: no rows: csv and tsv the header, jsonl nothing.
func TestRowWriterTextEmpty(t *testing.T) {
	p := textFixture(t, textRows6)
	for f, want := range map[RowFormat]string{RowsCSV: "id,s,b,f,d,ok,u,geo.lat,geo.tag,last\n", RowsTSV: "id\ts\tb\tf\td\tok\tu\tgeo.lat\tgeo.tag\tlast\n", RowsJSONL: ""} {
		b, err := copyRowsAs(p, f, 4, func(int64) bool { return false })
		if err != nil || string(b) != want {
			t.Fatalf("%s: %q, %v", f, b, err)
		}
	}
}

// FuzzParquetText copies every row of a file as JSONL and as CSV: a file
// that reads gives lines encoding/json and encoding/csv read, one a row; a
// damaged one a *ParquetError or *RecordError, never a panic.
func FuzzParquetText(f *testing.F) {
	f.Add(textFile(f, textRows6))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), 4<<20) // a copy's buffers: 48 KiB a column
		if err != nil {
			return
		}
		defer p.Close()
		if p.Rows() > 1<<16 {
			return // the rows to copy are listed one by one here, as a footer claims them
		}
		for _, format := range []RowFormat{RowsJSONL, RowsCSV} {
			out, err := copyRowsAs(p, format, 2, func(int64) bool { return true })
			var re *RecordError
			switch {
			case isParquetError(err), errors.As(err, &re):
				continue
			case err != nil:
				t.Fatalf("%s: %T %v", format, err, err)
			}
			if format == RowsCSV {
				if _, err := csv.NewReader(bytes.NewReader(out)).ReadAll(); err != nil {
					t.Fatalf("csv: %v", err)
				}
				continue
			}
			for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
				if len(l) > 0 && !json.Valid(l) {
					t.Fatalf("not JSON: %s", l)
				}
			}
		}
	})
}

// schemaFile is a Parquet file of schema and rows, written by parquet-go.
func schemaFile(t *testing.T, schema *parquet.Schema, rows []parquet.Row) *ParquetFile {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[any](&buf, schema)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := OpenParquet("s.parquet", bytes.NewReader(buf.Bytes()), int64(buf.Len()), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestRowWriterTextNames: a column or group name that is not UTF-8 cannot
// be a JSON member: jsonl refuses the file before a row is written; csv
// writes the name's bytes.
func TestRowWriterTextNames(t *testing.T) {
	for _, schema := range []*parquet.Schema{
		parquet.NewSchema("r", parquet.Group{"a\"b\xff": parquet.Leaf(parquet.Int64Type)}),
		parquet.NewSchema("r", parquet.Group{"g\xfe": parquet.Group{"x": parquet.Leaf(parquet.Int64Type)}}),
	} {
		p := schemaFile(t, schema, []parquet.Row{{parquet.Int64Value(1).Level(0, 0, 0)}})
		_, err := copyRowsAs(p, RowsJSONL, 4, func(int64) bool { return true })
		if !errors.Is(err, ErrParquetNoText) || !strings.Contains(err.Error(), "not UTF-8") {
			t.Fatalf("jsonl of %v: %v", schema, err)
		}
		b, err := copyRowsAs(p, RowsCSV, 4, func(int64) bool { return true })
		if err != nil {
			t.Fatalf("csv of %v: %v", schema, err)
		}
		if lines := strings.Split(string(b), "\n"); len(lines) != 3 || lines[1] != "1" {
			t.Fatalf("csv of %v: %q", schema, b)
		}
	}
}

// TestRowWriterTextNullAlone: a NULL in a file of one column would be a
// blank line in csv and tsv, which readers skip or refuse (fpdedup's
// own: "blank line"): an error naming the row, and nothing written after
// it, not even by Close. jsonl writes it.
func TestRowWriterTextNullAlone(t *testing.T) {
	schema := parquet.NewSchema("r", parquet.Group{"v": parquet.Optional(parquet.String())})
	p := schemaFile(t, schema, []parquet.Row{
		{parquet.ByteArrayValue([]byte("x")).Level(0, 1, 0)},
		{parquet.NullValue().Level(0, 0, 0)},
	})
	for _, f := range []RowFormat{RowsCSV, RowsTSV} {
		var out bytes.Buffer
		w := NewRowWriter(&out, f)
		err := w.Write(p, 0, []int64{1, 2})
		var re *RecordError
		if !errors.As(err, &re) || re.Record != 2 || !strings.Contains(err.Error(), "blank line") {
			t.Fatalf("%s: %v", f, err)
		}
		before := out.Len()
		if cerr := w.Close(); cerr != err {
			t.Fatalf("%s: Close after a failed Write: %v, want the Write's error", f, cerr)
		}
		if out.Len() != before {
			t.Fatalf("%s: %q written after a failure", f, out.Bytes()[before:])
		}
	}
	b, err := copyRowsAs(p, RowsJSONL, 4, func(int64) bool { return true })
	if err != nil || string(b) != "{\"v\":\"x\"}\n{\"v\":null}\n" {
		t.Fatalf("jsonl: %q, %v", b, err)
	}
	// An empty string there: tsv cannot tell it from no row; csv quotes it.
	p = schemaFile(t, schema, []parquet.Row{{parquet.ByteArrayValue(nil).Level(0, 1, 0)}})
	if _, err := copyRowsAs(p, RowsTSV, 4, func(int64) bool { return true }); !strings.Contains(fmt.Sprint(err), "blank line in TSV") {
		t.Fatalf("tsv of an empty string alone: %v", err)
	}
	if b, err := copyRowsAs(p, RowsCSV, 4, func(int64) bool { return true }); err != nil || string(b) != "v\n\"\"\n" {
		t.Fatalf("csv of an empty string alone: %q, %v", b, err)
	}
}
