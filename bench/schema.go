package bench

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"
)

// Schema is the JSON Schema (draft 2020-12) of report.json.
//
//go:embed schema.json
var Schema []byte

// ValidateReport checks a report.json against Schema. The validator knows
// the keywords Schema uses (type, const, enum, properties, required, items,
// minItems, maxItems, minimum, maximum, minLength, maxLength, oneOf and
// local $ref) and refuses a schema with any other, so that no constraint
// is silently ignored; it is not a general JSON Schema implementation.
func ValidateReport(doc []byte) error {
	var schema map[string]any
	if err := json.Unmarshal(Schema, &schema); err != nil {
		return fmt.Errorf("bench: schema.json: %w", err)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	s := &validator{root: schema}
	s.check(schema, v, "$")
	if len(s.errs) > 0 {
		return errors.New(strings.Join(s.errs, "; "))
	}
	return nil
}

type validator struct {
	root map[string]any
	errs []string
}

var knownKeywords = map[string]bool{
	"$schema": true, "$id": true, "$defs": true, "title": true, "description": true,
	"type": true, "const": true, "enum": true, "properties": true, "required": true,
	"items": true, "minItems": true, "maxItems": true, "minimum": true, "maximum": true,
	"minLength": true, "maxLength": true, "oneOf": true, "$ref": true,
}

func (s *validator) fail(at, format string, a ...any) {
	if len(s.errs) < 20 {
		s.errs = append(s.errs, at+": "+fmt.Sprintf(format, a...))
	}
}

// check validates v against schema sch; at is v's JSON path for messages.
func (s *validator) check(sch map[string]any, v any, at string) {
	keys := make([]string, 0, len(sch))
	for k := range sch {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !knownKeywords[k] {
			s.fail(at, "schema keyword %q is not supported by this validator", k)
		}
	}
	if ref, ok := sch["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := s.root["$defs"].(map[string]any)
		def, ok := defs[name].(map[string]any)
		if !found || !ok {
			s.fail(at, "unresolvable $ref %q", ref)
			return
		}
		s.check(def, v, at)
	}
	if t, ok := sch["type"]; ok && !typeMatches(t, v) {
		s.fail(at, "is %s, want type %v", jsonType(v), t)
		return
	}
	if c, ok := sch["const"]; ok && !reflect.DeepEqual(c, v) {
		s.fail(at, "is %v, want %v", v, c)
	}
	if e, ok := sch["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || reflect.DeepEqual(x, v)
		}
		if !found {
			s.fail(at, "is %v, want one of %v", v, e)
		}
	}
	if alts, ok := sch["oneOf"].([]any); ok {
		matched := 0
		for _, alt := range alts {
			sub := &validator{root: s.root}
			if m, ok := alt.(map[string]any); ok {
				sub.check(m, v, at)
			}
			if len(sub.errs) == 0 {
				matched++
			}
		}
		if matched != 1 {
			// Report why the most likely branch (the non-null one) failed.
			for _, alt := range alts {
				if m, ok := alt.(map[string]any); ok && m["type"] != "null" {
					s.check(m, v, at)
				}
			}
			if matched > 1 {
				s.fail(at, "matches %d branches of oneOf", matched)
			}
		}
	}
	switch x := v.(type) {
	case float64:
		if m, ok := sch["minimum"].(float64); ok && x < m {
			s.fail(at, "%v is below the minimum %v", x, m)
		}
		if m, ok := sch["maximum"].(float64); ok && x > m {
			s.fail(at, "%v is above the maximum %v", x, m)
		}
	case string:
		n := float64(utf8.RuneCountInString(x))
		if m, ok := sch["minLength"].(float64); ok && n < m {
			s.fail(at, "string of %v characters, want at least %v", n, m)
		}
		if m, ok := sch["maxLength"].(float64); ok && n > m {
			s.fail(at, "string of %v characters, want at most %v", n, m)
		}
	case []any:
		n := float64(len(x))
		if m, ok := sch["minItems"].(float64); ok && n < m {
			s.fail(at, "%v items, want at least %v", n, m)
		}
		if m, ok := sch["maxItems"].(float64); ok && n > m {
			s.fail(at, "%v items, want at most %v", n, m)
		}
		if items, ok := sch["items"].(map[string]any); ok {
			for i, e := range x {
				s.check(items, e, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	case map[string]any:
		if req, ok := sch["required"].([]any); ok {
			for _, r := range req {
				if name, _ := r.(string); name != "" {
					if _, ok := x[name]; !ok {
						s.fail(at, "missing required %q", name)
					}
				}
			}
		}
		if props, ok := sch["properties"].(map[string]any); ok {
			names := make([]string, 0, len(props))
			for k := range props {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				if pv, ok := x[k]; ok {
					if ps, ok := props[k].(map[string]any); ok {
						s.check(ps, pv, at+"."+k)
					}
				}
			}
		}
	}
}

func typeMatches(t any, v any) bool {
	switch t := t.(type) {
	case string:
		return isType(t, v)
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok && isType(name, v) {
				return true
			}
		}
	}
	return false
}

func isType(name string, v any) bool {
	switch name {
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
	case "number":
		_, ok := v.(float64)
		return ok
	}
	return jsonType(v) == name
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
