package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() { scriptCmds["mkparquet"] = cmdMkParquet }

// parquetFixture is a small Parquet file's schema and rows, written by
// parquet-go; renames (old, new of one length) are then applied to its
// footer's bytes, for what parquet-go will not write (two columns of one
// name).
type parquetFixture struct {
	schema   *parquet.Schema
	rows     []any
	renames  []string
	perGroup int64 // rows a row group, when not all in one
}

// parquetFixtures are the files mkparquet writes, by kind.
var parquetFixtures = map[string]func() parquetFixture{
	// Two leaves of path a.b (group a's b, and a column named "a.b") and
	// two columns named user_id.
	"names": func() parquetFixture {
		return parquetFixture{
			schema: parquet.NewSchema("m", parquet.Group{
				"a.b":     parquet.Leaf(parquet.Int64Type),
				"a":       parquet.Group{"b": parquet.Leaf(parquet.Int64Type), "c": parquet.String()},
				"user_id": parquet.String(),
				"user_ie": parquet.Leaf(parquet.Int64Type),
			}),
			rows: []any{
				map[string]any{"a.b": int64(1), "a": map[string]any{"b": int64(2), "c": "x"}, "user_id": "u1", "user_ie": int64(3)},
				map[string]any{"a.b": int64(1), "a": map[string]any{"b": int64(5), "c": "y"}, "user_id": "u2", "user_ie": int64(3)},
			},
			renames: []string{"user_ie", "user_id"},
		}
	},
	// Strings holding what ends a line or a field, each twice.
	"text": func() parquetFixture {
		var rows []any
		for range 2 {
			for _, v := range []string{"x\ty", "p\nq\r", `back\slash`, "nul\x00", "plain"} {
				rows = append(rows, map[string]any{"s": v})
			}
		}
		return parquetFixture{schema: parquet.NewSchema("m", parquet.Group{"s": parquet.String()}), rows: rows}
	},
	// Events in time order but the fourth, in the second row group.
	"late": func() parquetFixture {
		var rows []any
		for i, ts := range []int64{10, 20, 30, 25, 40} {
			rows = append(rows, map[string]any{"id": int64(i), "ts": ts})
		}
		return parquetFixture{schema: parquet.NewSchema("m", parquet.Group{"id": parquet.Leaf(parquet.Int64Type), "ts": parquet.Leaf(parquet.Int64Type)}), rows: rows, perGroup: 3}
	},
	// 40 distinct key strings of 512 KiB in one row group: 20 MiB of key
	// text, in pages of one value each.
	"bigtext": func() parquetFixture {
		var rows []any
		for i := range 40 {
			rows = append(rows, map[string]any{"s": string(rune('A'+i)) + strings.Repeat("x", 512<<10-1)})
		}
		return parquetFixture{schema: parquet.NewSchema("m", parquet.Group{"s": parquet.String()}), rows: rows}
	},
	// optgroup and reqgroup differ only in which node is nullable: the
	// group or its leaf (both leaves' definition levels go to 1).
	"optgroup": func() parquetFixture {
		return parquetFixture{
			schema: parquet.NewSchema("m", parquet.Group{"id": parquet.Leaf(parquet.Int64Type), "g": parquet.Optional(parquet.Group{"b": parquet.Leaf(parquet.Int64Type)})}),
			rows:   []any{map[string]any{"id": int64(1), "g": map[string]any{"b": int64(10)}}, map[string]any{"id": int64(2), "g": nil}},
		}
	},
	"reqgroup": func() parquetFixture {
		return parquetFixture{
			schema: parquet.NewSchema("m", parquet.Group{"id": parquet.Leaf(parquet.Int64Type), "g": parquet.Group{"b": parquet.Optional(parquet.Leaf(parquet.Int64Type))}}),
			rows:   []any{map[string]any{"id": int64(3), "g": map[string]any{"b": int64(30)}}, map[string]any{"id": int64(4), "g": map[string]any{"b": nil}}},
		}
	},
}

// mkparquet FILE KIND writes the Parquet fixture KIND (parquetFixtures).
func cmdMkParquet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkparquet FILE KIND")
	}
	mk, ok := parquetFixtures[args[1]]
	if !ok {
		var kinds []string
		for k := range parquetFixtures {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		ts.Fatalf("mkparquet: no kind %q (%s)", args[1], strings.Join(kinds, ", "))
	}
	fx := mk()
	var buf bytes.Buffer
	opts := []parquet.WriterOption{fx.schema}
	if fx.perGroup > 0 {
		opts = append(opts, parquet.MaxRowsPerRowGroup(fx.perGroup))
	}
	w := parquet.NewGenericWriter[any](&buf, opts...)
	// A row a Write: the writer cuts a page when its buffer passes its size
	// between writes, never within one.
	for _, r := range fx.rows {
		_, err := w.Write([]any{r})
		ts.Check(err)
	}
	ts.Check(w.Close())
	b := buf.Bytes()
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	footer := b[len(b)-8-n : len(b)-8]
	for i := 0; i+1 < len(fx.renames); i += 2 {
		copy(footer, bytes.ReplaceAll(footer, []byte(fx.renames[i]), []byte(fx.renames[i+1])))
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
}
