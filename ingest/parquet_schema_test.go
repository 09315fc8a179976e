package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	pformat "github.com/parquet-go/parquet-go/format"
)

// mapFile is a Parquet file of schema and rows (maps of column names to
// values), written by parquet-go; then each pair of renames (old, new, of
// one length) is applied to its footer's bytes, for what parquet-go will
// not write: two columns of one name.
func mapFile(t testing.TB, schema *parquet.Schema, rows []any, renames ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[any](&buf, schema)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	footer := b[len(b)-8-n : len(b)-8]
	for i := 0; i+1 < len(renames); i += 2 {
		copy(footer, bytes.ReplaceAll(footer, []byte(renames[i]), []byte(renames[i+1])))
	}
	return b
}

func openBytes(t *testing.T, name string, b []byte) *ParquetFile {
	t.Helper()
	p, err := OpenParquet(name, bytes.NewReader(b), int64(len(b)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestParquetKeyNames: a --key path that names two leaves (two columns of
// one name; a column named "a.b" beside group a's leaf b) is refused,
// listing them with their leaf numbers, never one of them picked; a
// group's path lists its leaves; the leaf numbers choose.
func TestParquetKeyNames(t *testing.T) {
	schema := parquet.NewSchema("m", parquet.Group{
		"a.b":     parquet.Leaf(parquet.Int64Type),
		"a":       parquet.Group{"b": parquet.Leaf(parquet.Int64Type), "c": parquet.String()},
		"user_id": parquet.String(),
		"user_ie": parquet.Leaf(parquet.Int64Type),
	})
	rows := []any{map[string]any{"a.b": int64(1), "a": map[string]any{"b": int64(2), "c": "c"}, "user_id": "u", "user_ie": int64(3)}}
	p := openBytes(t, "names.parquet", mapFile(t, schema, rows, "user_ie", "user_id"))
	for _, c := range []struct {
		item, want string
		key        string // when it resolves: row 1's key
	}{
		{item: "user_id", want: `names.parquet: key "user_id": 2 leaf columns of the file have that path: leaf 4 ("user_id", BYTE_ARRAY (STRING)), leaf 5 ("user_id", INT64 (INT(64,true))); give the leaf number instead`},
		{item: "a.b", want: `names.parquet: key "a.b": 2 leaf columns of the file have that path: leaf 1 ("a"."b", INT64 (INT(64,true))), leaf 3 ("a.b", INT64 (INT(64,true))); give the leaf number instead`},
		{item: "a", want: `names.parquet: key "a": a group, not a leaf column: its leaf columns are a.b (leaf 1), a.c (leaf 2); give the ones that make the key`},
		{item: "a.c", key: "c"},
		{item: "1", key: "2"},
		{item: "3", key: "1"},
		{item: "4", key: "u"},
		{item: "5", key: "3"},
	} {
		cols, err := p.ResolveKey([]string{c.item})
		if c.want != "" {
			if err == nil || err.Error() != c.want {
				t.Errorf("%q: %v (%v),\nwant %s", c.item, err, cols, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.item, err)
			continue
		}
		if got := keysOf(t, p, c.item); strings.Join(got, ",") != c.key {
			t.Errorf("%q: keys %q, want %q", c.item, got, c.key)
		}
	}
}

// TestSameSchema: inputs of one Parquet output must have one schema, node
// by node: which node is nullable, a timestamp's unit, a leaf's type and
// nesting tell two schemas apart; the root's name and annotations that say
// the same thing two ways do not.
func TestSameSchema(t *testing.T) {
	i64 := func() parquet.Node { return parquet.Leaf(parquet.Int64Type) }
	file := func(name string, g parquet.Group) *ParquetFile {
		return openBytes(t, name, mapFile(t, parquet.NewSchema(name, g), nil))
	}
	for _, c := range []struct {
		name string
		a, b parquet.Group
		want string
	}{
		{"nullable group or leaf",
			parquet.Group{"id": i64(), "g": parquet.Optional(parquet.Group{"b": i64()})},
			parquet.Group{"id": i64(), "g": parquet.Group{"b": parquet.Optional(i64())}},
			"a.parquet and b.parquet differ at schema element 1: g optional group vs g required group: the inputs of one Parquet output share one schema"},
		{"timestamp unit",
			parquet.Group{"ts": parquet.Timestamp(parquet.Millisecond)},
			parquet.Group{"ts": parquet.Timestamp(parquet.Microsecond)},
			"differ at schema element 1: ts required INT64 (TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)) vs ts required INT64 (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS))"},
		{"a leaf moved into a group",
			parquet.Group{"g": parquet.Group{"a": i64()}, "h": i64()},
			parquet.Group{"g": parquet.Group{"a": i64(), "h": i64()}},
			"differ at schema element 3: h required INT64 vs g.h required INT64"},
		{"a column more",
			parquet.Group{"a": i64()},
			parquet.Group{"a": i64(), "b": parquet.String()},
			"b.parquet has b required BYTE_ARRAY (STRING) (schema element 2), which a.parquet lacks"},
		{"a column less",
			parquet.Group{"a": i64(), "b": parquet.String()},
			parquet.Group{"a": i64()},
			"b.parquet lacks b required BYTE_ARRAY (STRING) (schema element 2) of a.parquet"},
		{"a dotted name",
			parquet.Group{"a.b": i64()},
			parquet.Group{"a": parquet.Group{"b": i64()}},
			`differ at schema element 1: "a.b" required INT64 vs a required group`},
		{"a decimal's scale",
			parquet.Group{"d": parquet.Decimal(2, 18, parquet.Int64Type)},
			parquet.Group{"d": parquet.Decimal(3, 18, parquet.Int64Type)},
			"d required INT64 (DECIMAL(18,2)) vs d required INT64 (DECIMAL(18,3))"},
		{"the same, roots named otherwise", parquet.Group{"a": i64(), "s": parquet.Optional(parquet.String())}, parquet.Group{"a": i64(), "s": parquet.Optional(parquet.String())}, ""},
	} {
		err := sameSchema(file("a.parquet", c.a), file("b.parquet", c.b))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v,\nwant %s", c.name, err, c.want)
		}
	}
	// DuckDB's files: the same file twice; the nested one has a group
	// where the other has event.
	a, b := openFixture(t, "events.parquet"), openFixture(t, "events-nested.parquet")
	if err := sameSchema(a, openFixture(t, "events.parquet")); err != nil {
		t.Error(err)
	}
	if err := sameSchema(a, b); err == nil || !strings.Contains(err.Error(), "differ at schema element 5: event optional BYTE_ARRAY (STRING) vs meta optional group") {
		t.Errorf("events vs events-nested: %v", err)
	}
}

// TestAnnotation: one text for each meaning of a node's annotation,
// whichever way a writer put it: a logical type, its converted type, or
// both; a signed integer as wide as its physical type as none; the
// converted types without a logical one by their spec names.
func TestAnnotation(t *testing.T) {
	conv := func(c deprecated.ConvertedType) thrift.Null[deprecated.ConvertedType] { return thrift.New(c) }
	lt := func(v pformat.LogicalTypeValue) pformat.LogicalType { return pformat.LogicalType{Value: v} }
	ms := pformat.TimeUnit{Value: &pformat.MilliSeconds{}}
	for _, c := range []struct {
		e    pformat.SchemaElement
		phys pformat.Type
		want string
	}{
		{pformat.SchemaElement{ConvertedType: conv(deprecated.UTF8)}, pformat.ByteArray, "STRING"},
		{pformat.SchemaElement{LogicalType: lt(&pformat.StringType{})}, pformat.ByteArray, "STRING"},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.TimestampMillis)}, pformat.Int64, "TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)"},
		{pformat.SchemaElement{LogicalType: lt(&pformat.TimestampType{IsAdjustedToUTC: true, Unit: ms}), ConvertedType: conv(deprecated.TimestampMillis)}, pformat.Int64, "TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)"},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.Int32)}, pformat.Int32, ""},
		{pformat.SchemaElement{LogicalType: lt(&pformat.IntType{BitWidth: 64, IsSigned: true})}, pformat.Int64, ""},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.Int16)}, pformat.Int32, "INT(16,true)"},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.Uint64)}, pformat.Int64, "INT(64,false)"},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.Decimal), Scale: thrift.New[int32](2), Precision: thrift.New[int32](9)}, pformat.Int32, "DECIMAL(9,2)"},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.Interval)}, pformat.FixedLenByteArray, "INTERVAL"},
		{pformat.SchemaElement{ConvertedType: conv(deprecated.MapKeyValue)}, 0, "MAP_KEY_VALUE"},
		{pformat.SchemaElement{ConvertedType: conv(99)}, pformat.Int32, "unknown converted type 99"},
		{pformat.SchemaElement{}, pformat.Int64, ""},
	} {
		if got := annotation(&c.e, c.phys); got != c.want {
			t.Errorf("%+v on %v: %q, want %q", c.e, c.phys, got, c.want)
		}
	}
}

// TestParquetColumnType: a column's type is said in the spec's names,
// never a Thrift number: DuckDB's converted types (INT_32, UTF8), and a
// number the spec does not name as such.
func TestParquetColumnType(t *testing.T) {
	types := map[string]string{}
	for _, c := range openFixture(t, "events-nested.parquet").Columns() {
		types[c.Path] = c.Type
	}
	for path, want := range map[string]string{
		"meta.ver": "INT32 (INT_32)", "event": "BYTE_ARRAY (UTF8)", "user_id": "INT64 (INT_64)",
		"ts": "INT64 (TIMESTAMP(isAdjustedToUTC=false,unit=MILLIS))", "meta.geo.lat": "DOUBLE",
	} {
		if types[path] != want {
			t.Errorf("%s: %q, want %q", path, types[path], want)
		}
	}
	for _, c := range []struct {
		e         pformat.SchemaElement
		want, bad string
	}{
		{pformat.SchemaElement{Type: thrift.New(pformat.Int32), ConvertedType: thrift.New(deprecated.ConvertedType(99))}, "INT32 (unknown converted type 99)", ""},
		{pformat.SchemaElement{Type: thrift.New(pformat.FixedLenByteArray), ConvertedType: thrift.New(deprecated.Interval)}, "FIXED_LEN_BYTE_ARRAY (INTERVAL)", ""},
		{pformat.SchemaElement{Type: thrift.New(pformat.Type(9))}, "unknown physical type 9", "unknown physical type 9 values have no key text"},
	} {
		col := leafColumn(&c.e)
		if col.Type != c.want || !strings.HasPrefix(col.bad, c.bad) {
			t.Errorf("%+v: %q (%q), want %q (%q)", c.e, col.Type, col.bad, c.want, c.bad)
		}
	}
}

// isNumber: an item ResolveKey reads as a leaf number.
func isNumber(item string) bool { _, err := strconv.Atoi(item); return err == nil }

// FuzzParquetSchema: any bytes that open as a Parquet file have a schema
// equal to itself (sameSchema walks every node), and each leaf's path
// resolves to that leaf (or, all digits, to that leaf number), to a *KeyError listing the leaves of that path,
// or to a *ParquetError (a column that cannot be a key), as does each
// group's path: never a panic.
func FuzzParquetSchema(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", "small.parquet"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(mapFile(f, parquet.NewSchema("m", parquet.Group{
		"a.b": parquet.Leaf(parquet.Int64Type),
		"a":   parquet.Optional(parquet.Group{"b": parquet.Leaf(parquet.Int64Type), "c": parquet.Repeated(parquet.String())}),
		"u_1": parquet.String(), "u_2": parquet.Decimal(2, 9, parquet.Int32Type),
	}), nil, "u_2", "u_1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := OpenParquet("f.parquet", bytes.NewReader(b), int64(len(b)), 1<<20)
		if err != nil {
			return
		}
		defer p.Close()
		if err := sameSchema(p, p); err != nil {
			t.Fatalf("a schema differs from itself: %v", err)
		}
		for i, c := range p.Columns() {
			paths := []string{c.Path}
			for k := 1; k < len(c.names); k++ {
				paths = append(paths, strings.Join(c.names[:k], "."))
			}
			for _, path := range paths {
				cols, err := p.ResolveKey([]string{path})
				var ke *KeyError
				var pe *ParquetError
				switch {
				case err == nil && path == c.Path && p.columns[cols[0]].Path != path && !isNumber(path):
					t.Fatalf("%q resolves to leaf %d, %q", path, cols[0]+1, p.columns[cols[0]].Path)
				case err != nil && !errors.As(err, &ke) && !errors.As(err, &pe):
					t.Fatalf("%q (leaf %d): %T %v", path, i+1, err, err)
				}
			}
		}
	})
}

// TestEncodingName: page encodings in errors by the spec's names, never a
// Thrift number or the library's "Encoding(?)".
func TestEncodingName(t *testing.T) {
	for e, want := range map[int64]string{
		0: "PLAIN", 1: "unknown encoding 1", 2: "PLAIN_DICTIONARY", 3: "RLE", 4: "BIT_PACKED",
		8: "RLE_DICTIONARY", 9: "BYTE_STREAM_SPLIT", 10: "unknown encoding 10", -1: "unknown encoding -1",
	} {
		if got := encodingName(e); got != want {
			t.Errorf("encodingName(%d) = %q, want %q", e, got, want)
		}
	}
}
