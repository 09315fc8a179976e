package ingest

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// A jsonl record is a line holding one JSON object (RFC 8259), checked in
// full. A key field that is a string gives its bytes unescaped: raw bytes as
// they are (invalid UTF-8 included: encoding/json would make it U+FFFD),
// \uXXXX as UTF-8, a surrogate pair as one character; a lone surrogate
// escape makes the record bad. A number gives its literal text exactly as
// written (1.50, 1e3, -0), true and false their text; null, an object, an
// array or a missing field make it bad. A dot in a --key path descends into
// an object.
//
// Duplicate member names make the record bad in the objects that keys are
// looked up in: the top-level object and every object a key path goes
// through, where a duplicate would make the key ambiguous. Elsewhere (a
// payload object no key reads) they are allowed, as encoding/json allows
// them, so that checking them costs nothing on members no key needs.
// Names are compared unescaped, "a" and "\u0061" being the same name.
//
// The hand-written scanner is kept because it is both right and faster:
// BenchmarkKeyJSONL (events keyed on 3 of their 5 members) has
// encoding/json, decoding into a map or into RawMessages, take many times
// its CPU a record and allocate for every member, where it allocates
// nothing; and encoding/json replaces invalid UTF-8 and lone surrogates
// with U+FFFD and lets a duplicate member silently win; a RawMessage
// leaves strings still to unescape.

// jsonScanner walks one line of JSON.
type jsonScanner struct {
	buf   []byte
	pos   int
	stack []byte  // closers of the containers open while skipping a value
	names []field // member names of the key objects being read, for duplicates
	nbuf  []byte  // names that had escapes, unescaped
	sort  [][]byte
}

// jsonKey is Key for jsonl; line is the record without its terminator.
func (k *Keyer) jsonKey(line []byte) ([]byte, error) {
	s := &k.json
	s.buf, s.pos = line, 0
	s.stack, s.names, s.nbuf = s.stack[:0], s.names[:0], s.nbuf[:0]
	k.scratch = k.scratch[:0]
	clear(k.fields)
	s.ws()
	switch c := s.peek(); {
	case c == '{':
		if err := k.jsonObject(k.root); err != nil {
			return nil, err
		}
	case s.pos == len(line):
		return nil, s.invalid("no value")
	default:
		if err := s.skipValue(); err != nil {
			return nil, err
		}
		if err := s.end(); err != nil {
			return nil, err
		}
		return nil, badf("the line holds %s, not an object", jsonKind(c))
	}
	if err := s.end(); err != nil {
		return nil, err
	}
	for i, f := range k.fields {
		if !f.set {
			return nil, badf("missing field %q", k.items[i])
		}
	}
	return k.join(line), nil
}

// jsonObject reads the object at s.pos, one that keys are looked up in.
func (k *Keyer) jsonObject(n *jsonNode) error {
	s := &k.json
	s.pos++ // '{'
	s.ws()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	mark := len(s.names)
	for {
		if s.peek() != '"' {
			return s.invalid("expected a member name")
		}
		name, err := s.name()
		if err != nil {
			return err
		}
		if err := s.colon(); err != nil {
			return err
		}
		var m *jsonMember
		for i := range n.members {
			if n.members[i].name == string(name) {
				m = &n.members[i]
				break
			}
		}
		switch {
		case m == nil:
			err = s.skipValue()
		case len(m.keys) > 0:
			err = k.jsonScalar(m)
		case s.peek() == '{':
			err = k.jsonObject(m.next)
		default:
			// The path goes through a member that is no object: the keys
			// below it are missing, as the final check reports.
			err = s.skipValue()
		}
		if err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			err := s.duplicates(mark)
			s.names = s.names[:mark]
			return err
		default:
			return s.invalid("expected ',' or '}' after an object member")
		}
	}
}

// jsonScalar reads the value of a member that keys end at.
func (k *Keyer) jsonScalar(m *jsonMember) error {
	s := &k.json
	start := s.pos
	var f field
	switch c := s.peek(); c {
	case '"':
		end, esc, err := s.str()
		if err != nil {
			return err
		}
		f = field{start: start + 1, end: end}
		if esc {
			b, lone := appendJSONString(k.scratch, s.buf[start+1:end], false)
			if lone >= 0 {
				return badf("field %q: lone surrogate \\u%04x", m.paths[0], lone)
			}
			f = field{start: len(k.scratch), end: len(b), scratch: true}
			k.scratch = b
		}
	case '{', '[', 'n':
		if err := s.skipValue(); err != nil {
			return err
		}
		return badf("field %q is %s", m.paths[0], jsonKind(c))
	case 't', 'f':
		if err := s.literal(); err != nil {
			return err
		}
		f = field{start: start, end: s.pos}
	default:
		if err := s.number(); err != nil {
			return err
		}
		f = field{start: start, end: s.pos}
	}
	f.set = true
	for _, i := range m.keys {
		k.fields[i] = f
	}
	return nil
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 'n':
		return "null"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// skipValue checks the value at s.pos and moves past it, without recursion
// (s.stack holds the closers of the open containers).
func (s *jsonScanner) skipValue() error {
	base := len(s.stack)
	for {
		s.ws()
		switch c := s.peek(); c {
		case '{', '[':
			s.pos++
			s.ws()
			closer := c + 2 // '}' or ']'
			if s.peek() == closer {
				s.pos++
				break
			}
			s.stack = append(s.stack, closer)
			if c == '{' {
				if err := s.member(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if _, _, err := s.str(); err != nil {
				return err
			}
		case 't', 'f', 'n':
			if err := s.literal(); err != nil {
				return err
			}
		default:
			if err := s.number(); err != nil {
				return err
			}
		}
		// After a value: close containers until one goes on.
		for {
			if len(s.stack) == base {
				return nil
			}
			s.ws()
			closer := s.stack[len(s.stack)-1]
			c := s.peek()
			if c == closer {
				s.pos++
				s.stack = s.stack[:len(s.stack)-1]
				continue
			}
			if c != ',' {
				return s.invalid("expected ',' or '" + string(closer) + "'")
			}
			s.pos++
			if closer == '}' {
				s.ws()
				if err := s.member(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// member reads a member name and its colon, in a skipped object.
func (s *jsonScanner) member() error {
	if s.peek() != '"' {
		return s.invalid("expected a member name")
	}
	if _, _, err := s.str(); err != nil {
		return err
	}
	return s.colon()
}

func (s *jsonScanner) colon() error {
	s.ws()
	if s.peek() != ':' {
		return s.invalid("expected ':' after a member name")
	}
	s.pos++
	s.ws()
	return nil
}

// name reads a member name of a key object, unescaped, and notes it for
// the duplicate check. The result is valid until the next name.
func (s *jsonScanner) name() ([]byte, error) {
	start := s.pos + 1
	end, esc, err := s.str()
	if err != nil {
		return nil, err
	}
	if !esc {
		s.names = append(s.names, field{start: start, end: end})
		return s.buf[start:end], nil
	}
	n := len(s.nbuf)
	s.nbuf, _ = appendJSONString(s.nbuf, s.buf[start:end], true)
	s.names = append(s.names, field{start: n, end: len(s.nbuf), scratch: true})
	return s.nbuf[n:], nil
}

// duplicates reports a name that s.names[mark:], the names of one object,
// hold twice.
func (s *jsonScanner) duplicates(mark int) error {
	names := s.names[mark:]
	get := func(f field) []byte {
		if f.scratch {
			return s.nbuf[f.start:f.end]
		}
		return s.buf[f.start:f.end]
	}
	if len(names) <= 16 {
		for i := 1; i < len(names); i++ {
			a := get(names[i])
			for _, g := range names[:i] {
				if g.end-g.start == len(a) && bytes.Equal(get(g), a) {
					return badf("duplicate member %q", a)
				}
			}
		}
		return nil
	}
	s.sort = s.sort[:0]
	for _, f := range names {
		s.sort = append(s.sort, get(f))
	}
	slices.SortFunc(s.sort, bytes.Compare)
	for i := 1; i < len(s.sort); i++ {
		if bytes.Equal(s.sort[i-1], s.sort[i]) {
			return badf("duplicate member %q", s.sort[i])
		}
	}
	return nil
}

// strStop marks the bytes that end a fast run inside a string: the quote,
// the backslash and the control characters, which must be escaped.
var strStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str checks the string at s.pos and moves past it; its raw content ends at
// end, and esc says it has escapes.
func (s *jsonScanner) str() (end int, esc bool, err error) {
	b := s.buf
	p := s.pos + 1
	for {
		for p < len(b) && !strStop[b[p]] {
			p++
		}
		if p == len(b) {
			s.pos = p
			return 0, false, s.invalid("unterminated string")
		}
		switch b[p] {
		case '"':
			s.pos = p + 1
			return p, esc, nil
		case '\\':
			esc = true
			if p+1 == len(b) {
				s.pos = p
				return 0, false, s.invalid("unterminated string")
			}
			switch b[p+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p += 2
			case 'u':
				if _, ok := hex4(b[p+2:]); !ok {
					s.pos = p
					return 0, false, s.invalid(`bad \u escape`)
				}
				p += 6
			default:
				s.pos = p
				return 0, false, s.invalid("bad escape")
			}
		default:
			s.pos = p
			return 0, false, s.invalid("control character in a string")
		}
	}
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendJSONString appends the unescaped content of a string that str
// checked. A surrogate escape without its other half is returned as lone
// (else -1) and, when loneOK, appended in the 3-byte form UTF-8 would give
// it, which keeps distinct names distinct for the duplicate check.
func appendJSONString(dst, raw []byte, loneOK bool) (_ []byte, lone rune) {
	lone = -1
	for {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 {
			return append(dst, raw...), lone
		}
		dst = append(dst, raw[:i]...)
		c := raw[i+1]
		raw = raw[i+2:]
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw)
			raw = raw[4:]
			switch {
			case r < 0xd800 || r > 0xdfff:
				dst = utf8.AppendRune(dst, r)
				continue
			case r < 0xdc00 && len(raw) >= 6 && raw[0] == '\\' && raw[1] == 'u':
				if r2, _ := hex4(raw[2:]); 0xdc00 <= r2 && r2 <= 0xdfff {
					dst = utf8.AppendRune(dst, 0x10000+(r-0xd800)<<10+(r2-0xdc00))
					raw = raw[6:]
					continue
				}
			}
			if !loneOK {
				return dst, r
			}
			if lone < 0 {
				lone = r
			}
			dst = append(dst, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
	}
}

// number checks the number at s.pos and moves past it.
func (s *jsonScanner) number() error {
	b, p := s.buf, s.pos
	digits := func() int {
		n := 0
		for p < len(b) && '0' <= b[p] && b[p] <= '9' {
			p++
			n++
		}
		return n
	}
	if p < len(b) && b[p] == '-' {
		p++
	}
	switch {
	case p < len(b) && b[p] == '0':
		p++
	case digits() == 0:
		return s.invalid("expected a value")
	}
	if p < len(b) && b[p] == '.' {
		p++
		if digits() == 0 {
			s.pos = p
			return s.invalid("expected a digit after the decimal point")
		}
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		if digits() == 0 {
			s.pos = p
			return s.invalid("expected a digit in the exponent")
		}
	}
	s.pos = p
	return nil
}

// literal checks true, false or null at s.pos and moves past it.
func (s *jsonScanner) literal() error {
	rest := s.buf[s.pos:]
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(rest, []byte(lit)) {
			s.pos += len(lit)
			return nil
		}
	}
	return s.invalid("expected a value")
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.buf) {
		switch s.buf[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the byte at s.pos, or 0 at the end.
func (s *jsonScanner) peek() byte {
	if s.pos < len(s.buf) {
		return s.buf[s.pos]
	}
	return 0
}

// end checks that only whitespace follows the top-level value.
func (s *jsonScanner) end() error {
	s.ws()
	if s.pos < len(s.buf) {
		return s.invalid("text after the top-level value")
	}
	return nil
}

func (s *jsonScanner) invalid(what string) error {
	if s.pos >= len(s.buf) {
		return badf("invalid JSON: %s at the end of the line", what)
	}
	return badf("invalid JSON at column %d: %s", s.pos+1, what)
}
