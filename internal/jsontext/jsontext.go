// Package jsontext writes JSON strings: the one escaping every JSON output
// of fpdedup uses (query --json, Parquet rows as JSONL).
package jsontext

import (
	"encoding/base64"
	"unicode/utf8"
)

// AppendBytes appends the member "name":"b" when b is valid UTF-8, else
// "name_base64":"b in base64": a JSON string holds text, and bytes that
// are not text keep every bit this way. name is escaped as a string.
func AppendBytes(buf []byte, name string, b []byte) []byte {
	if !utf8.Valid(b) {
		buf = AppendString(buf, []byte(name+"_base64"))
		buf = append(buf, ':', '"')
		buf = base64.StdEncoding.AppendEncode(buf, b)
		return append(buf, '"')
	}
	buf = AppendString(buf, []byte(name))
	buf = append(buf, ':')
	return AppendString(buf, b)
}

// AppendString appends b, valid UTF-8, as a quoted JSON string: '"' and
// '\' escaped, control characters and DEL as \n, \r, \t or \u00XX, every
// other byte as it is.
func AppendString(buf, b []byte) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
		case c == '\n':
			buf = append(buf, '\\', 'n')
		case c == '\r':
			buf = append(buf, '\\', 'r')
		case c == '\t':
			buf = append(buf, '\\', 't')
		case c < 0x20 || c == 0x7f:
			buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, '"')
}
