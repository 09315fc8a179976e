package ingest

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/fpdedup/fpdedup/internal/jsontext"
)

// RowFormat is how the rows of Parquet inputs are written out
// (--output-format): as read (Parquet), or converted to text.
type RowFormat uint8

const (
	RowsAsRead  RowFormat = iota // no format asked for: Parquet rows as Parquet
	RowsParquet                  // asked for by name
	RowsCSV
	RowsTSV
	RowsJSONL
)

var rowFormatNames = [...]string{RowsAsRead: "", RowsParquet: "parquet", RowsCSV: "csv", RowsTSV: "tsv", RowsJSONL: "jsonl"}

// ParseRowFormat reads an --output-format value ("" is RowsAsRead).
func ParseRowFormat(s string) (RowFormat, error) {
	for f, n := range rowFormatNames {
		if n == s {
			return RowFormat(f), nil
		}
	}
	return 0, fmt.Errorf("unknown output format %q (valid: parquet, csv, tsv, jsonl)", s)
}

func (f RowFormat) String() string {
	if f == RowsAsRead {
		return "as read"
	}
	if int(f) < len(rowFormatNames) {
		return rowFormatNames[f]
	}
	return fmt.Sprintf("RowFormat(%d)", uint8(f))
}

func (f RowFormat) text() bool { return f >= RowsCSV }

// ForRecords is the one rule of an output format: it converts Parquet
// rows; records of the text formats are written as read, bytes unchanged.
func (f RowFormat) ForRecords(in Format) error {
	if f != RowsAsRead && in != FormatParquet {
		return fmt.Errorf("--output-format %s converts Parquet rows: %s records are written as they are read", f, in)
	}
	return nil
}

// textRows writes rows as text, one line a row, each leaf column's value
// by the key text rules (DESIGN: integers in decimal, strings and byte
// arrays as their bytes, booleans true/false, floats as the shortest text
// that reads back the same, DECIMAL as plain decimal text with its scale,
// DATE/TIME/TIMESTAMP as the stored integer in the file's unit):
//   - csv: a header of the column paths (a.b for a column in a group),
//     then RFC 4180 fields, quoted when they hold a comma, a quote or a
//     line break; NULL an empty field, an empty string "".
//   - tsv: the same header and fields split by TAB, with no quoting (as
//     fpdedup reads TSV), so a value holding a TAB or a line break is an
//     error naming its row; NULL an empty field.
//   - csv and tsv: a NULL in a file of one column would be a blank line,
//     which readers skip or refuse: an error naming its row; so is an
//     empty string there in tsv (csv quotes it).
//   - jsonl: an object a row, groups as nested objects (so --format jsonl
//     --key a.b reads them back); integers, DECIMALs and finite floats as
//     numbers, NaN and infinities as strings, booleans as true/false, NULL
//     as null, text as strings and bytes that are not UTF-8 as NAME_base64
//     members, as query --json writes them; a column or group whose name
//     is not UTF-8 is refused before any row is written.
//
// A column inside a repeated group or LIST has no single value a row: the
// text formats refuse the file before any row is written.
type textRows struct {
	out    io.Writer
	format RowFormat
	cols   []ParquetColumn
	buf    []byte
	open   []string // jsonl: the groups the last member is in
}

// textColumns refuses a schema that rows of format cannot hold.
func textColumns(format RowFormat, p *ParquetFile) error {
	for _, c := range p.columns {
		why := c.bad
		if c.maxRep > 0 {
			why = fmt.Sprintf("it repeats (a LIST or repeated group): --output-format %s writes one value a column; Parquet (the default) keeps it", format)
		}
		if format == RowsJSONL {
			for _, n := range c.names {
				if !utf8.ValidString(n) {
					why = fmt.Sprintf("the name %q is not UTF-8, and a JSON member's name is text", n)
				}
			}
		}
		if why != "" {
			return &ParquetError{Name: p.name, Column: c.Path, Err: ErrParquetNoText, Detail: why}
		}
	}
	return nil
}

func newTextRows(out io.Writer, format RowFormat, p *ParquetFile) (*textRows, error) {
	if err := textColumns(format, p); err != nil {
		return nil, err
	}
	t := &textRows{out: out, format: format, cols: p.columns}
	if format == RowsJSONL {
		return t, nil
	}
	for i, c := range t.cols {
		if i > 0 {
			t.buf = append(t.buf, t.sep())
		}
		if err := t.field([]byte(c.Path)); err != nil {
			return nil, &ParquetError{Name: p.name, Column: c.Path, Err: ErrParquetNoText, Detail: "its name " + err.Error()}
		}
	}
	t.buf = append(t.buf, '\n')
	return t, nil
}

func (t *textRows) sep() byte {
	if t.format == RowsTSV {
		return '\t'
	}
	return ','
}

// write appends rows, numbered at in file p's row group g, and writes
// them out when the buffer holds a MiB.
func (t *textRows) write(p *ParquetFile, g int, rows []parquet.Row, at []int64) error {
	var scratch []byte
	for r, row := range rows {
		if len(row) != len(t.cols) {
			return &ParquetError{Name: p.name, Err: ErrParquetDamaged, Detail: fmt.Sprintf("row group %d: row %d has %d values for %d columns", g, at[r], len(row), len(t.cols))}
		}
		if t.format == RowsJSONL {
			t.buf = t.jsonRow(t.buf, row, &scratch)
		} else {
			for i, v := range row {
				if i > 0 {
					t.buf = append(t.buf, t.sep())
				}
				if v.IsNull() {
					if len(row) == 1 {
						return &RecordError{Name: p.name, Record: at[r], RowGroup: g + 1, Err: nullAlone(&t.cols[i])}
					}
					continue
				}
				scratch = t.cols[i].appendText(scratch[:0], v)
				if len(row) == 1 && len(scratch) == 0 && t.format == RowsTSV {
					return &RecordError{Name: p.name, Record: at[r], RowGroup: g + 1,
						Err: fmt.Errorf("column %s: %w: an empty string in the only column is a blank line in TSV, which has no quoting: write csv or jsonl", t.cols[i].Path, ErrParquetNoText)}
				}
				if err := t.field(scratch); err != nil {
					return &RecordError{Name: p.name, Record: at[r], RowGroup: g + 1,
						Err: fmt.Errorf("column %s: %w: %v", t.cols[i].Path, ErrParquetNoText, err)}
				}
			}
		}
		t.buf = append(t.buf, '\n')
	}
	if len(t.buf) >= 1<<20 {
		return t.flush()
	}
	return nil
}

// field appends one csv or tsv field.
func (t *textRows) field(b []byte) error {
	if t.format == RowsTSV {
		if bytes.ContainsAny(b, "\t\n\r") {
			return fmt.Errorf("holds a TAB or a line break, and TSV has no quoting: write csv or jsonl")
		}
		t.buf = append(t.buf, b...)
		return nil
	}
	if len(b) > 0 && !bytes.ContainsAny(b, ",\"\r\n") {
		t.buf = append(t.buf, b...)
		return nil
	}
	// Quoted: an empty string too, so that it differs from NULL.
	t.buf = append(t.buf, '"')
	for {
		i := bytes.IndexByte(b, '"')
		if i < 0 {
			break
		}
		t.buf = append(t.buf, b[:i+1]...)
		t.buf = append(t.buf, '"')
		b = b[i+1:]
	}
	t.buf = append(t.buf, b...)
	t.buf = append(t.buf, '"')
	return nil
}

// jsonRow appends row as a JSON object, its groups nested; a NULL group
// is null, not an object of nulls.
func (t *textRows) jsonRow(b []byte, row parquet.Row, scratch *[]byte) []byte {
	t.open = t.open[:0]
	var null []string // the path of the NULL group the columns are in
	b = append(b, '{')
	first := true
	for i, v := range row {
		c := &t.cols[i]
		groups := c.names[:len(c.names)-1]
		if null != nil && len(groups) >= len(null) && slices.Equal(groups[:len(null)], null) {
			continue
		}
		null = nil
		// Close the groups this column is not in, open those it is.
		same := 0
		for same < len(t.open) && same < len(groups) && t.open[same] == groups[same] {
			same++
		}
		for range len(t.open) - same {
			b = append(b, '}')
		}
		t.open = t.open[:same]
		if !first {
			b = append(b, ',')
		}
		for k := same; k < len(groups); k++ {
			b = jsontext.AppendString(b, []byte(groups[k]))
			if v.DefinitionLevel() < c.defs[k] {
				b = append(b, ":null"...)
				null = groups[:k+1]
				break
			}
			b = append(b, ':', '{')
			t.open = append(t.open, groups[k])
		}
		first = false
		if null == nil {
			b = t.jsonMember(b, c, v, scratch)
		}
	}
	for range t.open {
		b = append(b, '}')
	}
	return append(b, '}')
}

// jsonMember appends "name":value for the value v of column c.
func (t *textRows) jsonMember(b []byte, c *ParquetColumn, v parquet.Value, scratch *[]byte) []byte {
	name := c.names[len(c.names)-1]
	if v.IsNull() {
		b = jsontext.AppendString(b, []byte(name))
		return append(b, ":null"...)
	}
	*scratch = c.appendText((*scratch)[:0], v)
	switch c.render {
	case renderBytes:
		return jsontext.AppendBytes(b, name, *scratch)
	case renderFloat, renderDouble:
		f := float64(v.Float())
		if c.render == renderDouble {
			f = v.Double()
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return jsontext.AppendBytes(b, name, *scratch) // JSON has no such numbers
		}
	}
	b = jsontext.AppendString(b, []byte(name))
	b = append(b, ':')
	return append(b, *scratch...)
}

// flush writes what the buffer holds.
func (t *textRows) flush() error {
	if len(t.buf) == 0 {
		return nil
	}
	_, err := t.out.Write(t.buf)
	t.buf = t.buf[:0]
	return err
}

// nullAlone is why a NULL in a file's only column has no csv or tsv row.
func nullAlone(c *ParquetColumn) error {
	return fmt.Errorf("column %s: %w: a NULL in the only column is a blank line, which CSV and TSV readers skip or refuse: write jsonl", c.Path, ErrParquetNoText)
}
