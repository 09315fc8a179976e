package ingest

import (
	"testing"
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
