package ingest

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// mapFile is a Parquet file of schema and rows (maps of column names to
// values), written by parquet-go; then each pair of renames (old, new, of
// one length) is applied to its footer's bytes, for what parquet-go will
// not write: two columns of one name.
func mapFile(t *testing.T, schema *parquet.Schema, rows []any, renames ...string) []byte {
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
