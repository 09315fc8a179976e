package ingest

import (
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
)

// writableSchema is s with every leaf's encoding one the writer can write
// for the leaf's type: the file's where it can, else none (the writer's
// default). parquet-go takes a read column's encoding from its first chunk's
// list of encodings, and a list may name one the type cannot take (RLE,
// listed first for the levels, on an INT64 column; an encoding no library
// knows; RLE, which needs a bit width a column does not give, on an INT32
// column): a copy written with it would fail at its first page. s itself when
// every leaf's encoding is writable.
func writableSchema(s *parquet.Schema) *parquet.Schema {
	if allWritable(s) {
		return s
	}
	return parquet.NewSchema(s.Name(), writableNode{s})
}

func allWritable(n parquet.Node) bool {
	if n.Leaf() {
		return writable(n)
	}
	for _, f := range n.Fields() {
		if !allWritable(f) {
			return false
		}
	}
	return true
}

func writable(n parquet.Node) bool {
	e := n.Encoding()
	if e == nil {
		return true
	}
	if k := e.Encoding(); k == parquet.PlainDictionary.Encoding() || k == parquet.RLEDictionary.Encoding() {
		return true // the writer's dictionary holds values of any type
	}
	if e.Encoding() == parquet.RLE.Encoding() {
		// The library's RLE says it encodes INT32 but needs a bit width a
		// file's column does not give: its values are booleans only.
		return n.Type().Kind() == parquet.Boolean
	}
	switch n.Type().Kind() {
	case parquet.Boolean:
		return encoding.CanEncodeBoolean(e)
	case parquet.Int32:
		return encoding.CanEncodeInt32(e)
	case parquet.Int64:
		return encoding.CanEncodeInt64(e)
	case parquet.Int96:
		return encoding.CanEncodeInt96(e)
	case parquet.Float:
		return encoding.CanEncodeFloat(e)
	case parquet.Double:
		return encoding.CanEncodeDouble(e)
	case parquet.ByteArray:
		return encoding.CanEncodeByteArray(e)
	case parquet.FixedLenByteArray:
		return encoding.CanEncodeFixedLenByteArray(e)
	}
	return false
}

// writableNode is a node whose leaves, at any depth, have writable
// encodings (writableSchema).
type writableNode struct{ parquet.Node }

func (n writableNode) Encoding() encoding.Encoding { return writableEncoding(n.Node) }

func (n writableNode) Fields() []parquet.Field { return writableFields(n.Node) }

type writableField struct{ parquet.Field }

func (f writableField) Encoding() encoding.Encoding { return writableEncoding(f.Field) }

func (f writableField) Fields() []parquet.Field { return writableFields(f.Field) }

func writableEncoding(n parquet.Node) encoding.Encoding {
	if n.Leaf() && !writable(n) {
		return nil
	}
	return n.Encoding()
}

func writableFields(n parquet.Node) []parquet.Field {
	fs := n.Fields()
	out := make([]parquet.Field, len(fs))
	for i, f := range fs {
		out[i] = writableField{f}
	}
	return out
}
