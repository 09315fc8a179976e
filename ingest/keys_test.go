package ingest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestKeySpecValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		spec KeySpec
		err  string // a substring of the error; "" for valid
	}{
		{"lines", KeySpec{Format: FormatLines, Term: '\n'}, ""},
		{"lines -z", KeySpec{Format: FormatLines, Term: 0}, ""},
		{"lines with a key", KeySpec{Format: FormatLines, Keys: []string{"1"}}, "--key needs --format csv, tsv, jsonl or parquet"},
		{"lines with a header", KeySpec{Format: FormatLines, Header: true}, "--header needs --format csv or tsv"},
		{"lines, odd terminator", KeySpec{Format: FormatLines, Term: ';'}, "record terminator"},
		{"unknown format", KeySpec{Format: 7, Keys: []string{"1"}}, "unknown format"},
		{"csv numbers", KeySpec{Format: FormatCSV, Keys: []string{"1", "3", "2"}}, ""},
		{"csv names", KeySpec{Format: FormatCSV, Keys: []string{"user_id", "2"}, Header: true}, ""},
		{"csv without keys", KeySpec{Format: FormatCSV}, "--format csv needs --key"},
		{"tsv without keys", KeySpec{Format: FormatTSV, Header: true}, "--format tsv needs --key"},
		{"jsonl without keys", KeySpec{Format: FormatJSONL}, "--format jsonl needs --key"},
		{"csv name without header", KeySpec{Format: FormatCSV, Keys: []string{"1", "user_id"}}, `--key "user_id" is a column name: it needs --header`},
		{"tsv name without header", KeySpec{Format: FormatTSV, Keys: []string{"x1"}}, "needs --header"},
		{"negative is a name", KeySpec{Format: FormatCSV, Keys: []string{"-1"}}, "needs --header"},
		{"column 0", KeySpec{Format: FormatCSV, Keys: []string{"0"}}, "columns are numbered from 1"},
		{"column 00", KeySpec{Format: FormatTSV, Keys: []string{"00"}, Header: true}, "columns are numbered from 1"},
		{"column 007", KeySpec{Format: FormatCSV, Keys: []string{"007"}}, ""},
		{"huge column", KeySpec{Format: FormatCSV, Keys: []string{"99999999999999999999"}}, "column number too large"},
		{"empty item", KeySpec{Format: FormatCSV, Keys: []string{"1", ""}}, "an empty item"},
		{"jsonl", KeySpec{Format: FormatJSONL, Keys: []string{"a", "b.c", `d\.e`, `f\\`}}, ""},
		{"jsonl digits are names", KeySpec{Format: FormatJSONL, Keys: []string{"0"}}, ""},
		{"jsonl with a header", KeySpec{Format: FormatJSONL, Keys: []string{"a"}, Header: true}, "--header needs --format csv or tsv"},
		{"jsonl empty item", KeySpec{Format: FormatJSONL, Keys: []string{""}}, "an empty field name"},
		{"jsonl double dot", KeySpec{Format: FormatJSONL, Keys: []string{"a..b"}}, `--key "a..b": an empty field name`},
		{"jsonl trailing dot", KeySpec{Format: FormatJSONL, Keys: []string{"a."}}, "an empty field name"},
		{"jsonl trailing backslash", KeySpec{Format: FormatJSONL, Keys: []string{`a\`}}, "a backslash escapes only"},
		{"jsonl odd escape", KeySpec{Format: FormatJSONL, Keys: []string{`a\b`}}, "a backslash escapes only"},
	} {
		err := c.spec.Validate()
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(sayFlags(err), c.err)) {
			t.Errorf("%s: Validate() = %v, want %q", c.name, err, c.err)
		}
	}
}

func TestSplitPath(t *testing.T) {
	for in, want := range map[string][]string{
		"a":         {"a"},
		"a.b.c":     {"a", "b", "c"},
		`a\.b`:      {"a.b"},
		`a\.b.c`:    {"a.b", "c"},
		`a\\.b`:     {`a\`, "b"},
		`a\\\.b`:    {`a\.b`},
		"user id.é": {"user id", "é"},
	} {
		if got, err := splitPath(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestNewKeyerHeader(t *testing.T) {
	csvSpec := func(keys ...string) KeySpec {
		return KeySpec{Format: FormatCSV, Keys: keys, Sep: ":", Header: true}
	}
	for _, c := range []struct {
		name   string
		spec   KeySpec
		header string
		err    string
	}{
		{"resolved", csvSpec("b", "1"), "a,b\n", ""},
		{"missing name lists the header", csvSpec("user"), "\xef\xbb\xbfid,\"na,me\",ts\r\n", `--key "user": no such column in the header, whose columns are "id", "na,me", "ts"`},
		{"names are byte-exact", csvSpec("Id"), "id\n", "no such column"},
		{"no trimming", csvSpec("id"), " id \n", "no such column"},
		{"ambiguous name", csvSpec("x"), "x,y,x\n", `--key "x": columns 1 and 3 of the header both have that name; give the column number instead`},
		{"number past the header", csvSpec("3"), "a,b\n", "--key 3: the header has only 2 columns"},
		{"no header record", csvSpec("a"), "", "the input has no header record"},
		{"blank header", csvSpec("a"), "\r\n", "the header record is a blank line"},
		{"bad header", csvSpec("a"), "a,\"b\n", "the header record is bad: unterminated quoted field 2"},
		{"tsv quotes are data", KeySpec{Format: FormatTSV, Keys: []string{`"b"`}, Header: true}, "a\t\"b\"\n", ""},
		{"invalid spec", KeySpec{Format: FormatCSV, Keys: []string{"a"}}, "a,b\n", "needs --header"},
	} {
		var header []byte
		if c.header != "" {
			header = []byte(c.header)
		}
		_, err := NewKeyer(c.spec, header)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(sayFlags(err), c.err)) {
			t.Errorf("%s: NewKeyer() = %v, want %q", c.name, err, c.err)
		}
	}
	names := make([]string, 100)
	for i := range names {
		names[i] = "c" + strings.Repeat("x", i%3)
	}
	_, err := NewKeyer(csvSpec("nope"), []byte(strings.Join(names, ",")+"\n"))
	if err == nil || !strings.Contains(err.Error(), "… (100 in all)") {
		t.Errorf("a long header is listed as %v", err)
	}
}

// sayFlags says err as a command line whose flags are --key, --header
// and --format does; a *KeyError with the library's own words must not
// name a flag.
func sayFlags(err error) string {
	var ke *KeyError
	if !errors.As(err, &ke) {
		return err.Error()
	}
	if plain := ke.Error(); strings.Contains(plain, "--") {
		return "library words name a flag: " + plain
	}
	return ke.Say(Words{Key: "--key", TimeField: "--time-field", Header: "--header", Format: "--format"})
}
