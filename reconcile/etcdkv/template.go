package etcdkv

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/fpdedup/fpdedup/internal/jsontext"
)

// A Template makes a key's value from a record's fields. The language:
//
//   - The template is JSON text, and stays valid JSON whatever the fields
//     hold; an empty template makes an empty value.
//   - $name is the record's field name: letters, digits and '_', with
//     single dots between them for nested JSONL fields ($a.b). ${name}
//     takes any other name (up to the '}'): ${user id}, or ${ts}ms where
//     letters follow. A csv/tsv column number is a name too: $3.
//   - Inside a JSON string ("$user_id:$device_id") the field's bytes are
//     written JSON-escaped ('"', '\' and control characters); the field
//     must be valid UTF-8, since a JSON string holds text.
//   - Outside a string the placeholder must be a whole value ({"ts":$ts},
//     [$a,$b]), and the field's text a JSON number, true, false or null,
//     written as it is: quote the placeholder to write any text as a
//     string.
//   - $$ is a literal '$'.
//
// Parse checks all of that but the fields' contents, which Render checks
// per record (a *FieldError). A Template is immutable and safe for
// concurrent use.
type Template struct {
	parts  []tpart
	fields []string
}

type tpart struct {
	lit   []byte // literal text, when field is empty
	field string
	bare  bool // outside a string: the field must be a JSON literal
}

// ParseTemplate reads a template (see Template); a *TemplateError says
// where it is wrong.
func ParseTemplate(src string) (*Template, error) {
	t := &Template{}
	var lit []byte
	// probe is src with each bare placeholder as 0 and each quoted one as
	// nothing, at[i] the offset in src of probe[i]: json.Valid on it checks
	// the template whatever the fields hold.
	var probe []byte
	var at []int
	inStr, esc := false, false
	seen := map[string]bool{}
	flush := func() {
		if len(lit) > 0 {
			t.parts = append(t.parts, tpart{lit: lit})
			lit = nil
		}
	}
	for i := 0; i < len(src); {
		c := src[i]
		if c != '$' {
			switch {
			case esc:
				esc = false
			case inStr && c == '\\':
				esc = true
			case c == '"':
				inStr = !inStr
			}
			lit = append(lit, c)
			probe, at = append(probe, c), append(at, i)
			i++
			continue
		}
		if esc {
			return nil, &TemplateError{Offset: i, Reason: `"\$" is not a JSON escape; write $$ for a literal $`}
		}
		if i+1 < len(src) && src[i+1] == '$' {
			lit = append(lit, '$')
			probe, at = append(probe, '$'), append(at, i)
			i += 2
			continue
		}
		name, n, err := placeholder(src[i+1:])
		if err != nil {
			return nil, &TemplateError{Offset: i, Reason: err.Error()}
		}
		if !inStr {
			if p := lastNonSpace(probe); p != 0 && p != ':' && p != ',' && p != '[' {
				return nil, &TemplateError{Offset: i, Reason: fmt.Sprintf("$%s outside a string must be a whole JSON value (after ':', ',' or '['); quote it to put it inside text", name)}
			}
			if q := firstNonSpace(src[i+1+n:]); q != 0 && q != ',' && q != '}' && q != ']' {
				return nil, &TemplateError{Offset: i, Reason: fmt.Sprintf("$%s outside a string must be a whole JSON value (before ',', '}' or ']'); quote it to put it inside text", name)}
			}
			probe, at = append(probe, '0'), append(at, i)
		}
		flush()
		t.parts = append(t.parts, tpart{field: name, bare: !inStr})
		if !seen[name] {
			seen[name] = true
			t.fields = append(t.fields, name)
		}
		i += 1 + n
	}
	flush()
	if len(src) > 0 && !json.Valid(probe) {
		var v any
		err := json.Unmarshal(probe, &v)
		off := len(src)
		var se *json.SyntaxError
		// Offset counts the byte at fault; at the end of the input there is none.
		if errors.As(err, &se) && se.Offset > 0 && int(se.Offset) <= len(at) && se.Error() != "unexpected end of JSON input" {
			off = at[se.Offset-1]
		}
		return nil, &TemplateError{Offset: off, Reason: fmt.Sprintf("not JSON: %v", err)}
	}
	return t, nil
}

// placeholder reads the name after a '$': its length in s with braces.
func placeholder(s string) (name string, n int, err error) {
	if len(s) > 0 && s[0] == '{' {
		for j := 1; j < len(s); j++ {
			switch c := s[j]; {
			case c == '}':
				if j == 1 {
					return "", 0, errors.New("${} names no field")
				}
				if !utf8.ValidString(s[1:j]) {
					return "", 0, errors.New("a field name must be UTF-8")
				}
				return s[1:j], j + 1, nil
			case c == '"' || c == '\\' || c < 0x20:
				return "", 0, errors.New("a ${name} may not hold '\"', '\\' or control characters")
			}
		}
		return "", 0, errors.New("${ without its }")
	}
	j := 0
	for j < len(s) {
		for j < len(s) && nameByte(s[j]) {
			j++
		}
		if j+1 < len(s) && s[j] == '.' && nameByte(s[j+1]) && j > 0 {
			j++
			continue
		}
		break
	}
	if j == 0 {
		return "", 0, errors.New("a $ must be followed by a field name, {name} or another $")
	}
	return s[:j], j, nil
}

func nameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// lastNonSpace is b's last byte that is not JSON white space, 0 for none.
func lastNonSpace(b []byte) byte {
	for i := len(b) - 1; i >= 0; i-- {
		if !isSpace(b[i]) {
			return b[i]
		}
	}
	return 0
}

func firstNonSpace(s string) byte {
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			return s[i]
		}
	}
	return 0
}

// Fields are the field names the template uses, each once, in order of
// first use: what a caller checks against the records before any write.
func (t *Template) Fields() []string { return t.fields }

// Render appends the value for one record to dst. field gives a field's
// bytes (false: the record has no such field).
func (t *Template) Render(dst []byte, field func(name string) ([]byte, bool)) ([]byte, error) {
	for _, p := range t.parts {
		if p.field == "" {
			dst = append(dst, p.lit...)
			continue
		}
		v, ok := field(p.field)
		if !ok {
			return dst, &FieldError{Field: p.field, Reason: "is not in the record"}
		}
		if p.bare {
			if !jsonLiteral(v) {
				return dst, &FieldError{Field: p.field, Reason: fmt.Sprintf("is %s, not a JSON number, true, false or null: quote it (\"$%s\") to write it as a string", quoteKey(v, len(v)), p.field)}
			}
			dst = append(dst, v...)
			continue
		}
		if !utf8.Valid(v) {
			return dst, &FieldError{Field: p.field, Reason: fmt.Sprintf("is %s, not valid UTF-8, which a JSON string cannot hold", quoteKey(v, len(v)))}
		}
		n := len(dst)
		dst = jsontext.AppendString(dst, v)
		// AppendString quotes; the template's string already is quoted.
		copy(dst[n:], dst[n+1:len(dst)-1])
		dst = dst[:len(dst)-2]
	}
	return dst, nil
}

// jsonLiteral: b is exactly a JSON number (RFC 8259), true, false or null.
func jsonLiteral(b []byte) bool {
	switch string(b) {
	case "true", "false", "null":
		return true
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i == len(b)
}
