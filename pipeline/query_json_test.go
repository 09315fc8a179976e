package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// decodeQueryJSON reads one query --json line back: the key's bytes (from
// "key" or "key_base64"), the record's (nil when absent), the fingerprint
// and the answer. Unknown or missing fields fail the test.
func decodeQueryJSON(t *testing.T, line []byte) (key, rec []byte, fp string, present bool) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	bytesOf := func(name string) []byte {
		s, text := m[name].(string)
		b64, enc := m[name+"_base64"].(string)
		delete(m, name)
		delete(m, name+"_base64")
		switch {
		case text && enc:
			t.Fatalf("%q: both %s and %s_base64", line, name, name)
		case text:
			return []byte(s)
		case enc:
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if len(b) == 0 {
				return []byte{}
			}
			return b
		}
		return nil
	}
	key, rec = bytesOf("key"), bytesOf("record")
	if key == nil {
		t.Fatalf("%q: no key", line)
	}
	fp, _ = m["fingerprint"].(string)
	present, ok := m["present"].(bool)
	delete(m, "fingerprint")
	delete(m, "present")
	if !ok || len(fp) != 32 || fp != string(bytes.ToLower([]byte(fp))) || len(m) != 0 {
		t.Fatalf("%q: fingerprint %q, present %v, other fields %v", line, fp, ok, m)
	}
	return key, rec, fp, present
}

// TestQueryJSONRoundTrip: every key comes back byte for byte, whatever its
// bytes: invalid UTF-8, CR, NUL, quotes, backslashes, control bytes, BOM,
// U+2028, the empty key.
func TestQueryJSONRoundTrip(t *testing.T) {
	keys := []string{"", "plain", "a\rb", "nul\x00byte", "\xff\xfe", "half \xe2\x82", `quote " and \ back`, "tab\tnl\nesc\x1bdel\x7f",
		"\ufeffbom", "line\u2028sep", "ünïcödé", "<html>&amp;", "\x00", "\r"}
	for _, k := range keys {
		fp := ingest.XXH3.Sum([]byte(k))
		for _, rec := range [][]byte{nil, []byte("r," + k), {}} {
			line := AppendQueryJSON(nil, []byte(k), rec, fp, len(k)%2 == 0)
			if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
				t.Fatalf("%q: not one line", line)
			}
			gotKey, gotRec, gotFP, present := decodeQueryJSON(t, line)
			if string(gotKey) != k || !bytes.Equal(gotRec, rec) || (gotRec == nil) != (rec == nil) || gotFP != fp.String() || present != (len(k)%2 == 0) {
				t.Fatalf("%q: got key %q record %q fp %s present %v", line, gotKey, gotRec, gotFP, present)
			}
		}
	}
}

// TestQueryJSONRecords: records keyed by fields print their joined key
// (the bytes that were hashed: the fingerprint is the key's) and the record,
// in input order, with and without a header, the BOM of a headless first
// record not part of its key; plain lines print only the key.
func TestQueryJSONRecords(t *testing.T) {
	dir := t.TempDir()
	bad, err := ingest.ParseOnBad("fail")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		spec  ingest.KeySpec
		input string
		keys  []string // the keys, in order
		recs  []string // the records, without line ends; nil for lines
	}{
		{"csv headless with a BOM", ingest.KeySpec{Format: ingest.FormatCSV, Keys: []string{"2", "1"}, Sep: ":", Term: '\n'},
			"\ufeffa,b,c\r\n\"x,y\",z\n\"q\"\"\",\xff\n",
			[]string{"b:a", "z:x,y", "\xff:q\""}, []string{"\ufeffa,b,c", `"x,y",z`, "\"q\"\"\",\xff"}},
		{"tsv with a header", ingest.KeySpec{Format: ingest.FormatTSV, Keys: []string{"id", "t"}, Sep: "|", Header: true, Term: '\n'},
			"t\tid\n1\tu1\n2\tu2\n",
			[]string{"u1|1", "u2|2"}, []string{"1\tu1", "2\tu2"}},
		{"jsonl", ingest.KeySpec{Format: ingest.FormatJSONL, Keys: []string{"u.id", "n"}, Sep: ":", Term: '\n'},
			`{"u":{"id":"a\u0000b"},"n":1.50}` + "\n" + `{"n":2,"u":{"id":"c"}}` + "\n",
			[]string{"a\x00b:1.50", "c:2"}, []string{`{"u":{"id":"a\u0000b"},"n":1.50}`, `{"n":2,"u":{"id":"c"}}`}},
		{"lines -z", ingest.KeySpec{Format: ingest.FormatLines, Term: 0},
			"a\r\x00b\nc\x00\xff\x00",
			[]string{"a\r", "b\nc", "\xff"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, "in")
			if err := os.WriteFile(in, []byte(tc.input), 0o644); err != nil {
				t.Fatal(err)
			}
			// The index holds the first key only.
			idx := filepath.Join(t.TempDir(), "x.fpx")
			w, err := fpstore.Create(idx, fpstore.WriterOptions{Spec: fpstore.Spec{Hash: ingest.XXH3.String()}, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Add(ingest.XXH3.Sum([]byte(tc.keys[0]))); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			x, err := fpstore.Open(idx)
			if err != nil {
				t.Fatal(err)
			}
			set, err := fpstore.NewSet([]*fpstore.Index{x})
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			for _, threads := range []int{1, 2} {
				opts := QueryOptions{Set: set, Output: QueryJSON, Threads: threads,
					Records: ingest.RecordOptions{Spec: tc.spec, Hash: ingest.XXH3, OnBad: bad, MaxRecord: 1 << 20}}
				var out bytes.Buffer
				st, err := Query(context.Background(), opts, []string{in}, &out)
				if err != nil {
					t.Fatal(err)
				}
				if st.Keys != int64(len(tc.keys)) || st.Present != 1 {
					t.Fatalf("threads %d: stats %+v", threads, st)
				}
				sc := bufio.NewScanner(&out)
				i := 0
				for ; sc.Scan(); i++ {
					if i >= len(tc.keys) {
						t.Fatalf("threads %d: more lines than keys: %q", threads, sc.Bytes())
					}
					key, rec, fp, present := decodeQueryJSON(t, sc.Bytes())
					want := ingest.XXH3.Sum(key).String()
					if string(key) != tc.keys[i] || fp != want || present != (i == 0) {
						t.Fatalf("threads %d, line %d: key %q fp %s present %v; want key %q fp %s", threads, i, key, fp, present, tc.keys[i], want)
					}
					if tc.recs == nil && rec != nil || tc.recs != nil && string(rec) != tc.recs[i] {
						t.Fatalf("threads %d, line %d: record %q, want %q", threads, i, rec, tc.recs)
					}
				}
				if i != len(tc.keys) {
					t.Fatalf("threads %d: %d lines for %d keys", threads, i, len(tc.keys))
				}
			}
			// Keys given as arguments: the key is the argument, no record.
			var out bytes.Buffer
			opts := QueryOptions{Set: set, Output: QueryJSON, Records: ingest.RecordOptions{Spec: tc.spec, Hash: ingest.XXH3}}
			if _, err := QueryKeys(opts, tc.keys, &out); err != nil {
				t.Fatal(err)
			}
			lines := bytes.SplitAfter(out.Bytes(), []byte("\n"))
			if len(lines) != len(tc.keys)+1 {
				t.Fatalf("%d lines for %d keys", len(lines)-1, len(tc.keys))
			}
			for i, line := range lines[:len(tc.keys)] {
				key, rec, _, present := decodeQueryJSON(t, line)
				if string(key) != tc.keys[i] || rec != nil || present != (i == 0) {
					t.Fatalf("argument %q: key %q record %q present %v", tc.keys[i], key, rec, present)
				}
			}
		})
	}
}
