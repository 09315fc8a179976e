// Package pqcraft damages real Parquet files on purpose, for the tests of
// what fpdedup refuses: a page header or a footer that lies about a file
// whose bytes are otherwise what a writer (DuckDB, parquet-go) wrote, as
// a two-byte patch or a crafted footer would. Nothing outside tests uses
// it.
package pqcraft

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/fpdedup/fpdedup/internal/thriftscan"
)

// Footer decodes the footer of the Parquet file b.
func Footer(b []byte) (*format.FileMetaData, error) {
	if len(b) < 12 || string(b[len(b)-4:]) != "PAR1" {
		return nil, fmt.Errorf("not a Parquet file")
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	if n > len(b)-12 {
		return nil, fmt.Errorf("a footer of %d bytes in %d", n, len(b))
	}
	md := new(format.FileMetaData)
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[len(b)-8-n:len(b)-8], md); err != nil {
		return nil, err
	}
	return md, nil
}

// WithFooter is b with its footer replaced by md.
func WithFooter(b []byte, md *format.FileMetaData) ([]byte, error) {
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), md)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(b[:len(b)-8-n])
	out = append(out, enc...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(enc)))
	return append(out, "PAR1"...), nil
}

// Leaf is the index among the leaves (a row group's columns) of the leaf
// whose dotted path is path, and its schema element's index, or -1s.
func Leaf(md *format.FileMetaData, path string) (leaf, elem int) {
	if len(md.RowGroups) > 0 {
		for i, c := range md.RowGroups[0].Columns {
			if joined(c.MetaData.PathInSchema) == path {
				leaf = i
				break
			}
			leaf = -1
		}
	}
	// The schema is flattened depth first; its leaves are in column order.
	seen := -1
	for i := 1; i < len(md.Schema); i++ {
		if n, ok := md.Schema[i].NumChildren.Get(); ok && n > 0 {
			continue
		}
		seen++
		if seen == leaf {
			return leaf, i
		}
	}
	return -1, -1
}

func joined(p []string) string {
	s := ""
	for i, n := range p {
		if i > 0 {
			s += "."
		}
		s += n
	}
	return s
}

// Page is a page of a column chunk: where its header starts, the header's
// length and what it says.
type Page struct {
	Offset    int64
	HeaderLen int
	Header    format.PageHeader
}

// Pages lists the pages of row group g's chunk of leaf c.
func Pages(b []byte, md *format.FileMetaData, g, c int) ([]Page, error) {
	m := md.RowGroups[g].Columns[c].MetaData
	at := m.DataPageOffset
	if d := m.DictionaryPageOffset; d > 0 && d < at {
		at = d
	}
	end := at + m.TotalCompressedSize
	var pages []Page
	for at < end {
		n, err := thriftscan.Struct(b[at:end], nil)
		if err != nil {
			return nil, fmt.Errorf("the page header at %d: %w", at, err)
		}
		p := Page{Offset: at, HeaderLen: n}
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[at:at+int64(n)], &p.Header); err != nil {
			return nil, err
		}
		pages = append(pages, p)
		at += int64(n) + int64(p.Header.CompressedPageSize)
	}
	return pages, nil
}

// DataPageValues adds delta to the value count of row group g's first
// data page of the leaf at path (a v2 page's row count too), in place: a
// page that no longer sums with the others to its row group's rows. The
// count must keep its encoded length (2048 and 2047 do).
func DataPageValues(b []byte, path string, g int, delta int32) error {
	md, err := Footer(b)
	if err != nil {
		return err
	}
	c, _ := Leaf(md, path)
	if c < 0 || g >= len(md.RowGroups) {
		return fmt.Errorf("no leaf %s in row group %d", path, g)
	}
	pages, err := Pages(b, md, g, c)
	if err != nil {
		return err
	}
	for _, p := range pages {
		var fields []int16 // the counts' field ids in the data page header
		switch {
		case p.Header.DataPageHeader.Valid:
			fields = []int16{1}
		case p.Header.DataPageHeaderV2.Valid:
			fields = []int16{1, 3}
		default:
			continue
		}
		for _, id := range fields {
			if err := addToField(b[p.Offset:p.Offset+int64(p.HeaderLen)], id, delta); err != nil {
				return fmt.Errorf("the page at %d: %w", p.Offset, err)
			}
		}
		return nil
	}
	return fmt.Errorf("leaf %s has no data page in row group %d", path, g)
}

// addToField adds delta to integer field id of the data page header
// nested in the page header h (field 5, or 8 for v2), in place. A page
// header's fields before it are integers (types, sizes, a CRC), as every
// writer orders them.
func addToField(h []byte, id int16, delta int32) error {
	at := 0
	uvarint := func() (uint64, int, error) {
		v, n := binary.Uvarint(h[at:])
		if n <= 0 {
			return 0, 0, fmt.Errorf("a varint at %d does not parse", at)
		}
		return v, n, nil
	}
	var field int16
	nested := false
	for at < len(h) {
		fh := h[at]
		at++
		typ := fh & 0x0f
		if typ == 0 {
			if nested {
				break
			}
			return fmt.Errorf("no data page header")
		}
		if fh>>4 == 0 {
			return fmt.Errorf("a long field header at %d", at-1)
		}
		field += int16(fh >> 4)
		switch {
		case typ == 12 && !nested && (field == 5 || field == 8):
			nested, field = true, 0
			continue
		case typ != 5 && typ != 6:
			return fmt.Errorf("field %d of type %d before the count", field, typ)
		}
		v, n, err := uvarint()
		if err != nil {
			return err
		}
		if nested && field == id {
			x := int32(v>>1) ^ -int32(v&1) + delta
			enc := binary.AppendUvarint(nil, uint64(uint32(x<<1)^uint32(x>>31)))
			if len(enc) != n {
				return fmt.Errorf("field %d: %d takes %d bytes, %d took %d", id, x, len(enc), x-delta, n)
			}
			copy(h[at:], enc)
			return nil
		}
		at += n
	}
	return fmt.Errorf("no field %d in the data page header", id)
}

// Required is b with the footer saying that the optional leaf at path is
// REQUIRED: its pages' definition levels are then read as values.
func Required(b []byte, path string) ([]byte, error) {
	md, err := Footer(b)
	if err != nil {
		return nil, err
	}
	_, e := Leaf(md, path)
	if e < 0 {
		return nil, fmt.Errorf("no leaf %s", path)
	}
	md.Schema[e].RepetitionType.Set(format.Required)
	return WithFooter(b, md)
}

// Int32 is b with the footer saying that the INT64 leaf at path is INT32,
// in its schema element and in every row group's chunk.
func Int32(b []byte, path string) ([]byte, error) {
	md, err := Footer(b)
	if err != nil {
		return nil, err
	}
	c, e := Leaf(md, path)
	if t, _ := md.Schema[e].Type.Get(); e < 0 || t != format.Int64 {
		return nil, fmt.Errorf("no INT64 leaf %s", path)
	}
	md.Schema[e].Type.Set(format.Int32)
	md.Schema[e].LogicalType = format.LogicalType{}
	md.Schema[e].ConvertedType.Reset()
	for i := range md.RowGroups {
		md.RowGroups[i].Columns[c].MetaData.Type = format.Int32
		md.RowGroups[i].Columns[c].MetaData.Statistics = format.Statistics{}
	}
	return WithFooter(b, md)
}

// RowGroupRows is b with the footer saying that row group g has delta
// rows more than it has.
func RowGroupRows(b []byte, g int, delta int64) ([]byte, error) {
	md, err := Footer(b)
	if err != nil {
		return nil, err
	}
	if g >= len(md.RowGroups) {
		return nil, fmt.Errorf("no row group %d", g)
	}
	md.RowGroups[g].NumRows += delta
	md.NumRows += delta
	return WithFooter(b, md)
}
