package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKeyJSONL(t *testing.T) {
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString(`{"k":"v"`)
		for i := range 40 {
			fmt.Fprintf(&b, `,"m%d":%d`, i, i)
		}
		if dup {
			b.WriteString(`,"m7":0`)
		}
		return b.String() + "}\n"
	}
	runKeyCases(t, FormatJSONL, []keyCase{
		{name: "strings, number, bool", keys: "a|b|c", rec: `{"a":"x","b":17,"c":true}` + "\n", want: "x:17:true"},
		{name: "false", keys: "a", rec: `{"a":false}` + "\n", want: "false"},
		{name: "order as given", keys: "b|a", rec: `{"a":"x","b":"y"}` + "\n", want: "y:x"},
		{name: "numbers as written", keys: "a|b|c|d|e|f", rec: `{"a":1.50,"b":1e3,"c":-0,"d":1E+3,"e":0.0e-0,"f":-12.5E-07}` + "\n", want: "1.50:1e3:-0:1E+3:0.0e-0:-12.5E-07"},
		{name: "big integer as written", keys: "a", rec: `{"a":123456789012345678901234567890}` + "\n", want: "123456789012345678901234567890"},
		{name: "CRLF", keys: "a", rec: `{"a":"x"}` + "\r\n", want: "x"},
		{name: "whitespace", keys: "a|b", rec: " \t{ \"a\" : \"x\" ,\r\"b\":\t1 } \t\n", want: "x:1"},
		{name: "no terminator", keys: "a", rec: `{"a":"x"}`, want: "x"},
		{name: "escapes", keys: "a", rec: `{"a":"q\"b\\s\/\b\f\n\r\t."}` + "\n", want: "q\"b\\s/\b\f\n\r\t."},
		{name: "unicode escapes", keys: "a", rec: `{"a":"\u00e9\u20AC\u0000!"}` + "\n", want: "é€\x00!"},
		{name: "surrogate pair", keys: "a", rec: `{"a":"\ud83d\ude00"}` + "\n", want: "😀"},
		{name: "raw UTF-8 kept", keys: "a", rec: `{"a":"é😀"}` + "\n", want: "é😀"},
		{name: "invalid UTF-8 kept", keys: "a", rec: "{\"a\":\"\xff\xfe\xc3\"}\n", want: "\xff\xfe\xc3"},
		{name: "invalid UTF-8 kept beside an escape", keys: "a", rec: "{\"a\":\"\xff\\n\"}\n", want: "\xff\n"},
		{name: "lone high surrogate", keys: "a", rec: `{"a":"\ud800"}` + "\n", bad: `field "a": lone surrogate \ud800`},
		{name: "lone low surrogate", keys: "a", rec: `{"a":"x\udc00"}` + "\n", bad: "lone surrogate"},
		{name: "high surrogate then not a low one", keys: "a", rec: `{"a":"\ud800\u0041"}` + "\n", bad: "lone surrogate"},
		{name: "reversed pair", keys: "a", rec: `{"a":"\ude00\ud83d"}` + "\n", bad: "lone surrogate"},
		{name: "lone surrogate outside the key", keys: "a", rec: `{"a":"x","b":"\ud800"}` + "\n", want: "x"},
		{name: "nested", keys: "a.b", rec: `{"a":{"b":"x"}}` + "\n", want: "x"},
		{name: "nested deeper, with siblings", keys: "u.d.id|t", rec: `{"u":{"x":[1,{"d":2}],"d":{"id":7,"o":{}}},"t":"z"}` + "\n", want: "7:z"},
		{name: "two keys in one object", keys: "a.b|a.c", rec: `{"a":{"c":2,"b":1}}` + "\n", want: "1:2"},
		{name: "literal dot", keys: `a\.b`, rec: `{"a.b":"x","a":{"b":"y"}}` + "\n", want: "x"},
		{name: "literal backslash", keys: `a\\`, rec: `{"a\\":"x"}` + "\n", want: "x"},
		{name: "literal dot is no path", keys: `a\.b`, rec: `{"a":{"b":"y"}}` + "\n", bad: `missing field "a\\.b"`},
		{name: "escaped member name", keys: "user", rec: `{"us\u0065r":"x"}` + "\n", want: "x"},
		{name: "BOM skipped in the first record", keys: "a", rec: "\xef\xbb\xbf{\"a\":1}\n", first: true, want: "1"},
		{name: "BOM elsewhere is invalid", keys: "a", rec: "\xef\xbb\xbf{\"a\":1}\n", bad: "invalid JSON at column 1"},
		{name: "blank line", keys: "a", rec: "\n", bad: "blank line"},
		{name: "blank CRLF line", keys: "a", rec: "\r\n", bad: "blank line"},
		{name: "only spaces", keys: "a", rec: "  \n", bad: "invalid JSON"},
		{name: "missing field", keys: "a|b", rec: `{"a":1}` + "\n", bad: `missing field "b"`},
		{name: "empty object", keys: "a", rec: "{}\n", bad: `missing field "a"`},
		{name: "missing nested field", keys: "a.b", rec: `{"a":{"c":1}}` + "\n", bad: `missing field "a.b"`},
		{name: "path through a string", keys: "a.b", rec: `{"a":"b"}` + "\n", bad: `missing field "a.b"`},
		{name: "path through an array", keys: "a.b", rec: `{"a":[{"b":1}]}` + "\n", bad: `missing field "a.b"`},
		{name: "null", keys: "a", rec: `{"a":null}` + "\n", bad: `field "a" is null`},
		{name: "object", keys: "a", rec: `{"a":{"b":1}}` + "\n", bad: `field "a" is an object`},
		{name: "array", keys: "a", rec: `{"a":[1]}` + "\n", bad: `field "a" is an array`},
		{name: "key and a path below it", keys: "a|a.b", rec: `{"a":{"b":1}}` + "\n", bad: `field "a" is an object`},
		{name: "duplicate key member", keys: "a", rec: `{"a":1,"a":2}` + "\n", bad: `duplicate member "a"`},
		{name: "duplicate other member of the key object", keys: "a", rec: `{"a":1,"x":2,"x":3}` + "\n", bad: `duplicate member "x"`},
		{name: "duplicate through an escape", keys: "a", rec: `{"a":1,"\u0061":2}` + "\n", bad: `duplicate member "a"`},
		{name: "duplicate in a nested key object", keys: "a.b", rec: `{"a":{"b":1,"b":2}}` + "\n", bad: `duplicate member "b"`},
		{name: "duplicate of a path member", keys: "a.b", rec: `{"a":{"b":1},"a":{"b":1}}` + "\n", bad: `duplicate member "a"`},
		{name: "duplicate in a payload object is allowed", keys: "a", rec: `{"a":1,"p":{"x":1,"x":2}}` + "\n", want: "1"},
		{name: "same name in sibling objects", keys: "a.x|b.x", rec: `{"a":{"x":1},"b":{"x":2}}` + "\n", want: "1:2"},
		{name: "distinct lone surrogate names", keys: "a", rec: `{"a":1,"\ud800":2,"\ud801":3}` + "\n", want: "1"},
		{name: "many members", keys: "k", rec: many(false), want: "v"},
		{name: "many members, a duplicate", keys: "k", rec: many(true), bad: `duplicate member "m7"`},
		{name: "top-level array", keys: "a", rec: "[1,2]\n", bad: "the line holds an array, not an object"},
		{name: "top-level string", keys: "a", rec: `"a"` + "\n", bad: "the line holds a string, not an object"},
		{name: "top-level invalid", keys: "a", rec: "[1,\n", bad: "invalid JSON"},
		{name: "unclosed object", keys: "a", rec: `{"a":1` + "\n", bad: "invalid JSON: expected ',' or '}' after an object member at the end of the line"},
		{name: "text after the object", keys: "a", rec: `{"a":1}x` + "\n", bad: "invalid JSON at column 8: text after the top-level value"},
		{name: "two objects", keys: "a", rec: `{"a":1}{"a":1}` + "\n", bad: "invalid JSON"},
		{name: "unquoted name", keys: "a", rec: "{a:1}\n", bad: "expected a member name"},
		{name: "leading zero", keys: "a", rec: `{"a":01}` + "\n", bad: "invalid JSON"},
		{name: "bare minus", keys: "a", rec: `{"a":-}` + "\n", bad: "invalid JSON"},
		{name: "bare point", keys: "a", rec: `{"a":1.}` + "\n", bad: "after the decimal point"},
		{name: "bare exponent", keys: "a", rec: `{"a":1e+}` + "\n", bad: "in the exponent"},
		{name: "plus sign", keys: "a", rec: `{"a":+1}` + "\n", bad: "invalid JSON"},
		{name: "trailing comma", keys: "a", rec: `{"a":1,}` + "\n", bad: "expected a member name"},
		{name: "trailing comma in a payload", keys: "a", rec: `{"a":1,"p":[1,]}` + "\n", bad: "invalid JSON"},
		{name: "mismatched brackets", keys: "a", rec: `{"a":1,"p":[1}}` + "\n", bad: "invalid JSON"},
		{name: "raw tab in a string", keys: "a", rec: "{\"a\":\"x\ty\"}\n", bad: "control character in a string"},
		{name: "raw NUL in a payload string", keys: "a", rec: "{\"a\":1,\"b\":\"\x00\"}\n", bad: "control character"},
		{name: "bad escape", keys: "a", rec: `{"a":"\x"}` + "\n", bad: "bad escape"},
		{name: "short unicode escape", keys: "a", rec: `{"a":"\u12"}` + "\n", bad: `bad \u escape`},
		{name: "unterminated string", keys: "a", rec: `{"a":"x` + "\n", bad: "unterminated string"},
		{name: "misspelt literal", keys: "a", rec: `{"a":tru}` + "\n", bad: "invalid JSON"},
		{name: "misspelt null", keys: "a", rec: `{"a":nul}` + "\n", bad: "invalid JSON"},
		{name: "NUL outside strings", keys: "a", rec: "{\"a\":1}\x00\n", bad: "invalid JSON"},
	})
}

// jsonDuplicates says whether any object in line, valid JSON, has a member
// name twice, as encoding/json decodes names.
func jsonDuplicates(line []byte) bool {
	type frame struct {
		obj, wantName bool
		names         map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(line))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.obj && top.wantName {
			if top.names[name] {
				return true
			}
			top.names[name], top.wantName = true, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, wantName: true, names: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].wantName = true
		}
	}
}

// FuzzKeyJSONL checks the JSON scanner against encoding/json: it accepts
// only what json.Valid accepts; it calls no line invalid that json.Valid
// accepts and that has no duplicate member; and each top-level member, as a
// key, gives what encoding/json decodes (strings where the line is valid
// UTF-8, numbers as written).
func FuzzKeyJSONL(f *testing.F) {
	for _, s := range []string{
		`{"a":"x","b":{"c":1.50}}`, `{"a":"\ud83d\ude00","b":{"c":"\u00e9"}}`, `{"a":"\ud800"}`,
		`{"a":1,"a":2}`, `{"a":null,"b":[1,{"c":{}}]}`, `[1,"a",{"b":true}]`, "{\"a\":\"\xff\"}",
		`{"a.b":-0,"x\\":1e3}`, ` {"a" : false , "b" : { "c" : true } } `, `{"a":1}x`, `{"a":01}`,
	} {
		f.Add([]byte(s))
	}
	fixed, err := NewKeyer(KeySpec{Format: FormatJSONL, Keys: []string{"a", "b.c"}, Sep: ":"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return // one line
		}
		rec := append(bytes.Clone(line), '\n')
		_, err := fixed.Key(rec, false)
		valid := json.Valid(line)
		if err == nil && !valid {
			t.Fatalf("%q: accepted, but json.Valid says it is invalid", line)
		}
		var br *BadRecord
		if err != nil && !errors.As(err, &br) {
			t.Fatalf("%q: error %v is no BadRecord", line, err)
		}
		if !valid || jsonDuplicates(line) {
			return
		}
		if err != nil && strings.HasPrefix(br.Reason, "invalid JSON") {
			t.Fatalf("%q: %v, but json.Valid accepts it", line, err)
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if dec.Decode(&m) != nil {
			return // not an object
		}
		for name, v := range m {
			if strings.ContainsRune(name, utf8.RuneError) || name == "" {
				continue // a lone surrogate or invalid UTF-8 that encoding/json replaced
			}
			item := strings.NewReplacer(`\`, `\\`, `.`, `\.`).Replace(name)
			k, err := NewKeyer(KeySpec{Format: FormatJSONL, Keys: []string{item}}, nil)
			if err != nil {
				t.Fatalf("--key %q: %v", item, err)
			}
			key, err := k.Key(rec, false)
			var want string
			switch v := v.(type) {
			case string:
				if err != nil && strings.Contains(err.Error(), "lone surrogate") && strings.ContainsRune(v, utf8.RuneError) {
					continue
				}
				if !utf8.Valid(line) {
					continue
				}
				want = v
			case json.Number:
				want = string(v)
			case bool:
				want = strconv.FormatBool(v)
			case nil:
				if err == nil || !strings.Contains(err.Error(), "is null") {
					t.Fatalf("%q: key %q of null: %q, %v", line, item, key, err)
				}
				continue
			default:
				if err == nil {
					t.Fatalf("%q: key %q of %T: %q, want an error", line, item, v, key)
				}
				continue
			}
			if err != nil || string(key) != want {
				t.Fatalf("%q: key %q = %q, %v; encoding/json says %q", line, item, key, err, want)
			}
		}
	})
}

// BenchmarkKeyJSONL compares the hand-written scanner with encoding/json
// decoding each line into a map (numbers kept as json.Number, their text)
// and into a map of RawMessage (values undecoded: strings would still need
// unescaping).
func BenchmarkKeyJSONL(b *testing.B) {
	data := benchEvents(FormatJSONL, false)
	keys := []string{"user_id", "device_id", "timestamp_ms"}
	b.Run("hand", func(b *testing.B) { runKeyBench(b, data, handKeys(b, FormatJSONL)) })
	b.Run("encoding-json/map", func(b *testing.B) {
		var key []byte
		runKeyBench(b, data, func(data []byte) int {
			n := 0
			SplitFormat(data, FormatJSONL, '\n', func(rec []byte) bool {
				var m map[string]any
				dec := json.NewDecoder(bytes.NewReader(rec))
				dec.UseNumber()
				if err := dec.Decode(&m); err != nil {
					b.Fatal(err)
				}
				key = key[:0]
				for i, k := range keys {
					if i > 0 {
						key = append(key, ':')
					}
					switch v := m[k].(type) {
					case string:
						key = append(key, v...)
					case json.Number:
						key = append(key, v...)
					}
				}
				benchSink += len(key)
				n++
				return true
			})
			return n
		})
	})
	b.Run("encoding-json/rawmessage", func(b *testing.B) {
		var key []byte
		runKeyBench(b, data, func(data []byte) int {
			n := 0
			SplitFormat(data, FormatJSONL, '\n', func(rec []byte) bool {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(rec, &m); err != nil {
					b.Fatal(err)
				}
				key = key[:0]
				for i, k := range keys {
					if i > 0 {
						key = append(key, ':')
					}
					key = append(key, m[k]...)
				}
				benchSink += len(key)
				n++
				return true
			})
			return n
		})
	})
}
