package etcdkeys

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
)

// The values kept from records: looked up by whole digest whatever order
// they came in, the first record of a key winning; a fixed template needs
// no record; a value over MaxValue and values past the budget are refused
// with their errors, keeping nothing of the one refused.
func TestValues(t *testing.T) {
	d := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	type rec struct {
		key    string
		fields []string
	}
	for _, c := range []struct {
		name, tmpl string
		budget     int64
		recs       []rec
		want       map[string]string // key -> value; "" with ok false: none
		err        string            // of the last record's keep
	}{
		{name: "fixed", tmpl: `{"src":"fpdedup"}`, budget: 1 << 20,
			want: map[string]string{"a": `{"src":"fpdedup"}`, "never kept": `{"src":"fpdedup"}`}},
		{name: "empty", tmpl: "", budget: 1 << 20, want: map[string]string{"a": ""}},
		{name: "fields, first record wins", tmpl: `{"o":"$obj","ts":$ts}`, budget: 1 << 20,
			recs: []rec{{"b", []string{"ob", "2"}}, {"a", []string{"oa", "1"}}, {"b", []string{"later", "3"}}, {"c", []string{`q"\`, "4"}}},
			want: map[string]string{"a": `{"o":"oa","ts":1}`, "b": `{"o":"ob","ts":2}`, "c": `{"o":"q\"\\","ts":4}`}},
		{name: "not a number", tmpl: `{"ts":$ts}`, budget: 1 << 20, recs: []rec{{"a", []string{"x", "1"}}, {"b", []string{"x", "nan"}}},
			want: map[string]string{"a": `{"ts":1}`}, err: "not a JSON number"},
		{name: "over MaxValue", tmpl: `"$obj"`, budget: 4 << 20, recs: []rec{{"a", []string{strings.Repeat("v", MaxValue), ""}}},
			want: map[string]string{}, err: "over 1048576"},
		// Repeats of a key take no room: two keys fit in the room of two,
		// however many records repeat them (the budget counted records).
		{name: "repeats within the budget", tmpl: `"$obj"`, budget: 2*entryBytes + 8, recs: []rec{{"a", []string{"1", ""}}, {"a", []string{"x", ""}}, {"a", []string{"y", ""}}, {"b", []string{"2", ""}}, {"a", []string{"z", ""}}, {"b", []string{"w", ""}}},
			want: map[string]string{"a": `"1"`, "b": `"2"`}},
		{name: "over the budget", tmpl: `"$obj"`, budget: 3 * entryBytes, recs: []rec{{"a", []string{"1", ""}}, {"b", []string{"2", ""}}, {"c", []string{"3", ""}}},
			want: map[string]string{"a": `"1"`, "b": `"2"`}, err: "do not fit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := newValues(c.tmpl, c.budget)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range c.recs {
				var fs [][]byte
				for _, name := range v.t.Fields() {
					switch name {
					case "obj":
						fs = append(fs, []byte(r.fields[0]))
					case "ts":
						fs = append(fs, []byte(r.fields[1]))
					}
				}
				err := v.keep(d(r.key), fs)
				if i < len(c.recs)-1 || c.err == "" {
					if err != nil {
						t.Fatalf("record %d: %v", i, err)
					}
				} else if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("the last record: %v, want %q", err, c.err)
				}
			}
			for k, want := range c.want {
				dg := d(k)
				got, ok := v.of(&dg, true)
				if !ok || string(got) != want {
					t.Fatalf("%s: %q (%v), want %q", k, got, ok, want)
				}
			}
			if len(v.t.Fields()) > 0 {
				dg := d("never kept")
				if _, ok := v.of(&dg, true); ok {
					t.Fatal("a value for a key no record gave")
				}
			}
		})
	}
	var te *etcdkv.TemplateError
	if _, err := CheckValue(`{"a":$`); !errors.As(err, &te) {
		t.Fatalf("CheckValue of a broken template: %v", err)
	}
	if fs, err := CheckValue(`{"a":"$x:${y z}","b":$x}`); err != nil || strings.Join(fs, ",") != "x,y z" {
		t.Fatalf("CheckValue: %q %v", fs, err)
	}
}
