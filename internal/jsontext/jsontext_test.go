package jsontext

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendString: what AppendString writes is a JSON string that
// encoding/json reads back as the bytes given.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s", "\x00\x1f\x7f\n\r\t", "späce ✓ \u2028"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !utf8.Valid(b) {
			return
		}
		out := AppendString([]byte("x"), b)
		var got string
		if err := json.Unmarshal(out[1:], &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", b, out[1:], err)
		}
		if got != string(b) || out[0] != 'x' {
			t.Fatalf("%q came back as %q", b, got)
		}
	})
}
