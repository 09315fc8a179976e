package etcdkv

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTemplateRender(t *testing.T) {
	rec := map[string]string{
		"user_id": "u1", "device_id": `d"\1` + "\n", "timestamp_ms": "1714579200000",
		"a.b": "nested", "user id": "spaced", "3": "col3", "neg": "-1.5e3", "t": "true",
		"text": "12abc", "bad": "\xff", "obj": "bkt1:log_20240501.zip",
	}
	field := func(n string) ([]byte, bool) { v, ok := rec[n]; return []byte(v), ok }
	for _, tc := range []struct{ tmpl, want string }{
		{``, ``},
		{`{"obj":"$obj","ts":$timestamp_ms}`, `{"obj":"bkt1:log_20240501.zip","ts":1714579200000}`},
		{`{"obj":"$user_id:$device_id","ts":$timestamp_ms}`, `{"obj":"u1:d\"\\1\n","ts":1714579200000}`},
		{`{"k":"$a.b.", "s":"${user id}", "c":"$3x", "d":"${3}x"}`, `{"k":"nested.", "s":"spaced", "c":"$3x", "d":"col3x"}`},
		{`[ $neg , $t, null ]`, `[ -1.5e3 , true, null ]`},
		{`$timestamp_ms`, `1714579200000`},
		{`{"price":"$$5 for $user_id"}`, `{"price":"$5 for u1"}`},
		{`"\\$user_id"`, `"\\u1"`},
	} {
		tp, err := ParseTemplate(tc.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", tc.tmpl, err)
		}
		got, err := tp.Render(nil, field)
		if tc.tmpl == `{"k":"$a.b.", "s":"${user id}", "c":"$3x", "d":"${3}x"}` {
			// $3x names the field "3x", which the record lacks.
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "3x" {
				t.Fatalf("%s: %v", tc.tmpl, err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Fatalf("%s: %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
		if len(got) > 0 && !json.Valid(got) {
			t.Fatalf("%s: %q is not JSON", tc.tmpl, got)
		}
	}
	tp, _ := ParseTemplate(`{"a":"$user_id","b":$timestamp_ms,"c":"$user_id"}`)
	if f := strings.Join(tp.Fields(), ","); f != "user_id,timestamp_ms" {
		t.Fatalf("Fields = %s", f)
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		tmpl string
		off  int
		want string
	}{
		{`{"a":1`, 6, "not JSON"},
		{`{"a":$}`, 5, "followed by a field name"},
		{`{"a":"${x"}`, 6, "may not hold"},
		{`{"a":"${x`, 6, "without its }"},
		{`{"a":"${}"}`, 6, "names no field"},
		{`{"a":1$x}`, 6, "after ':', ',' or '['"},
		{`{"a":$x1 2}`, 5, "before ','"},
		{`{"a":-$x}`, 6, "whole JSON value"},
		{`{"a":$x$y}`, 5, "whole JSON value"},
		{`{"a":"\$x"}`, 7, "not a JSON escape"},
		{`{"$a":1,}`, 8, "not JSON"},
		{`{"a":"x"} $b`, 10, "whole JSON value"},
	} {
		_, err := ParseTemplate(tc.tmpl)
		var te *TemplateError
		if !errors.As(err, &te) || !errors.Is(err, ErrTemplate) || te.Offset != tc.off || !strings.Contains(te.Reason, tc.want) {
			t.Errorf("%s: %v (offset %v); want %q at %d", tc.tmpl, err, te, tc.want, tc.off)
		}
	}
	rec := map[string]string{"text": "12abc", "bad": "\xff", "lead0": "01"}
	field := func(n string) ([]byte, bool) { v, ok := rec[n]; return []byte(v), ok }
	for _, tc := range []struct{ tmpl, field, want string }{
		{`{"a":$text}`, "text", "not a JSON number"},
		{`{"a":$lead0}`, "lead0", "not a JSON number"},
		{`{"a":"$bad"}`, "bad", "not valid UTF-8"},
		{`{"a":"$missing"}`, "missing", "not in the record"},
	} {
		tp, err := ParseTemplate(tc.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tp.Render(nil, field)
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrField) || fe.Field != tc.field || !strings.Contains(fe.Reason, tc.want) {
			t.Errorf("%s: %v; want field %s %q", tc.tmpl, err, tc.field, tc.want)
		}
	}
}

// FuzzTemplate: ParseTemplate never panics; what it accepts renders,
// whatever the fields hold, to valid JSON or a *FieldError.
func FuzzTemplate(f *testing.F) {
	f.Add(`{"obj":"$user_id:$device_id","ts":$timestamp_ms}`, "u\"1\\", "1714579200000")
	f.Add(`[$a, "${b c}$$"]`, "-0.5e+7", "x\x00y")
	f.Add(`$a`, "true", "")
	f.Fuzz(func(t *testing.T, tmpl, v1, v2 string) {
		tp, err := ParseTemplate(tmpl)
		if err != nil {
			var te *TemplateError
			if !errors.As(err, &te) || te.Offset < 0 || te.Offset > len(tmpl) {
				t.Fatalf("%q: %v", tmpl, err)
			}
			return
		}
		i := 0
		out, err := tp.Render(nil, func(string) ([]byte, bool) {
			i++
			if i%2 == 1 {
				return []byte(v1), true
			}
			return []byte(v2), true
		})
		if err != nil {
			if !errors.Is(err, ErrField) {
				t.Fatalf("%q: %v", tmpl, err)
			}
			return
		}
		if len(tmpl) > 0 && !json.Valid(out) {
			t.Fatalf("%q with %q, %q rendered %q, not JSON", tmpl, v1, v2, out)
		}
		if utf8.ValidString(tmpl) && !utf8.Valid(out) {
			t.Fatalf("%q rendered invalid UTF-8 %q", tmpl, out)
		}
	})
}
