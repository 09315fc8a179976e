package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/fpstore"
)

// KeySpec is the key recipe (README "Fingerprints"): the --key items as given,
// the --key-sep and --header, for a container format.
type KeySpec struct {
	Format Format
	// Keys: in csv and tsv an all-digit item is a 1-based column number
	// (even with Header), any other a header name (Header required); in
	// jsonl a field path, where '.' descends into an object and `\.` is a
	// literal dot (`\\` a literal backslash). Empty in lines format, where
	// the whole record is the key; required in the others.
	Keys []string
	// Sep joins the key fields; the caller applies the default ":".
	Sep string
	// Header: in csv and tsv the first record of each input is a header.
	Header bool
	// Term ends a lines-format record: '\n', or 0 for -z. csv, tsv and
	// jsonl records always end with '\n' (CRLF accepted) and ignore it: the
	// caller refuses -z with them.
	Term byte
	// Respelled are the indexes the records are read against whose
	// recorded key items are spelled otherwise than Keys, as many of
	// them, with the same Sep (user_id for 1, or the other way): the
	// recipes agree if both name the same columns, which only an
	// input's header or schema says. Its reader checks them there
	// (sameColumns); ResolveRecipe fills them.
	Respelled []IndexRecipe
}

// sameColumns returns a *RecipeMismatchError unless the key items of
// each of s.Respelled name the columns cols that s.Keys name in input
// name; resolve turns items into columns there (its header's, its
// schema's).
func (s KeySpec) sameColumns(name string, cols []int, resolve func(items []string) ([]int, error)) error {
	for _, x := range s.Respelled {
		built, err := resolve(x.Spec.Key)
		if err == nil && slices.Equal(built, cols) {
			continue
		}
		e := &RecipeMismatchError{Index: x.Path, Built: x.Spec, Reading: fpstore.Spec{Key: s.Keys, KeySep: s.Sep}, Input: name}
		if err != nil {
			var ke *KeyError
			if errors.As(err, &ke) {
				c := *ke
				c.Input = "" // the message names it
				err = &c
			}
			e.Detail = fmt.Sprintf("the index's key there: %v", err)
		} else {
			e.Detail = fmt.Sprintf("the index's key is %s %s there, these records' %s", columnWord(s.Format), joinColumns(built), joinColumns(cols))
		}
		return e
	}
	return nil
}

// columnWord is what a format's key items name.
func columnWord(f Format) string {
	if f == FormatParquet {
		return "leaves"
	}
	return "columns"
}

// joinColumns lists 0-based columns 1-based, as --key numbers them.
func joinColumns(cols []int) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c + 1))
	}
	return b.String()
}

// Validate reports a recipe that cannot work: a *KeyError, or an error
// about a terminator or format no caller should pass.
func (s KeySpec) Validate() error {
	switch s.Format {
	case FormatLines:
		if len(s.Keys) > 0 {
			return &KeyError{Problem: KeysInLines}
		}
		if s.Header {
			return &KeyError{Problem: HeaderNotCSV}
		}
		if s.Term != '\n' && s.Term != 0 {
			return fmt.Errorf("record terminator %q: want a newline or NUL", s.Term)
		}
		return nil
	case FormatParquet:
		if s.Header {
			return &KeyError{Problem: HeaderNotCSV}
		}
		if len(s.Keys) == 0 {
			return &KeyError{Problem: ParquetNeedsKey}
		}
		for _, item := range s.Keys {
			if item == "" {
				return &KeyError{Problem: EmptyItem}
			}
		}
		return nil
	case FormatCSV, FormatTSV, FormatJSONL:
	default:
		return fmt.Errorf("unknown format %v", s.Format)
	}
	if len(s.Keys) == 0 {
		return &KeyError{Problem: NoKeys, Format: s.Format}
	}
	if s.Format == FormatJSONL {
		if s.Header {
			return &KeyError{Problem: HeaderInJSONL}
		}
		_, err := jsonTree(s.Keys)
		return err
	}
	for _, item := range s.Keys {
		if item == "" {
			return &KeyError{Problem: EmptyItem}
		}
		_, isNum, err := columnNumber(item)
		if err != nil {
			return err
		}
		if !isNum && !s.Header {
			return &KeyError{Problem: NameNeedsHeader, Item: item}
		}
	}
	return nil
}

// columnNumber reads an all-digit --key item as a 1-based column number and
// returns it 0-based; isNum is false for a name.
func columnNumber(item string) (col int, isNum bool, err error) {
	for i := 0; i < len(item); i++ {
		if item[i] < '0' || item[i] > '9' {
			return 0, false, nil
		}
	}
	n, err := strconv.ParseUint(item, 10, 31)
	if err != nil {
		return 0, true, &KeyError{Problem: ColumnTooLarge, Item: item}
	}
	if n == 0 {
		return 0, true, &KeyError{Problem: ColumnZero, Item: item}
	}
	return int(n) - 1, true, nil
}

// headerNames splits a csv or tsv header record into its column names.
func headerNames(f Format, header []byte) ([][]byte, error) {
	if header == nil {
		return nil, &KeyError{Problem: NoHeaderRecord}
	}
	line := bytes.TrimPrefix(trimNewline(header), []byte(bom))
	if len(line) == 0 {
		return nil, &KeyError{Problem: BlankHeader}
	}
	var names [][]byte
	var err error
	if f == FormatTSV {
		names = bytes.Split(line, []byte{'\t'})
	} else {
		names, err = csvSplit(line)
	}
	if err != nil {
		return nil, &KeyError{Problem: BadHeader, Err: err}
	}
	return names, nil
}

// resolveColumns turns the --key items into 0-based column indexes, names
// by the header's names.
func resolveColumns(keys []string, names [][]byte, header bool) ([]int, error) {
	cols := make([]int, len(keys))
	for i, item := range keys {
		c, isNum, err := columnNumber(item)
		if err != nil {
			return nil, err
		}
		if isNum {
			if header && c >= len(names) {
				return nil, &KeyError{Problem: BeyondHeader, Item: item, N: len(names)}
			}
			cols[i] = c
			continue
		}
		c = -1
		for j, name := range names {
			if string(name) != item {
				continue
			}
			if c >= 0 {
				return nil, &KeyError{Problem: AmbiguousName, Item: item, N: c + 1, M: j + 1}
			}
			c = j
		}
		if c < 0 {
			return nil, &KeyError{Problem: NoSuchColumn, Item: item, Names: listNames(names)}
		}
		cols[i] = c
	}
	return cols, nil
}

// listNames quotes a header's names for an error message, a bounded number
// of them.
func listNames(names [][]byte) string {
	const most = 40
	var b strings.Builder
	for i, n := range names {
		if i == most {
			fmt.Fprintf(&b, " … (%d in all)", len(names))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(string(n)))
	}
	return b.String()
}

// jsonNode is a step of the jsonl key paths: the members of an object that
// keys go through or end at.
type jsonNode struct {
	members []jsonMember
}

type jsonMember struct {
	name  string
	keys  []int     // keys whose path ends here
	paths []string  // their --key items, for messages
	next  *jsonNode // keys whose path goes on into this member's object
}

// jsonTree parses the jsonl --key items into a tree of members.
func jsonTree(keys []string) (*jsonNode, error) {
	root := &jsonNode{}
	for i, item := range keys {
		path, err := splitPath(item)
		if err != nil {
			return nil, err
		}
		n := root
		for d, name := range path {
			m := n.member(name)
			if d == len(path)-1 {
				m.keys = append(m.keys, i)
				m.paths = append(m.paths, item)
				break
			}
			if m.next == nil {
				m.next = &jsonNode{}
			}
			n = m.next
		}
	}
	return root, nil
}

func (n *jsonNode) member(name string) *jsonMember {
	for i := range n.members {
		if n.members[i].name == name {
			return &n.members[i]
		}
	}
	n.members = append(n.members, jsonMember{name: name})
	return &n.members[len(n.members)-1]
}

// splitPath cuts a jsonl --key item at its unescaped dots.
func splitPath(item string) ([]string, error) {
	var path []string
	var cur []byte
	for i := 0; i < len(item); i++ {
		switch c := item[i]; {
		case c == '\\' && i+1 < len(item) && (item[i+1] == '.' || item[i+1] == '\\'):
			i++
			cur = append(cur, item[i])
		case c == '\\':
			return nil, &KeyError{Problem: BadEscape, Item: item}
		case c == '.':
			path = append(path, string(cur))
			cur = cur[:0]
		default:
			cur = append(cur, c)
		}
	}
	path = append(path, string(cur))
	for _, name := range path {
		if name == "" {
			return nil, &KeyError{Problem: EmptyFieldName, Item: item}
		}
	}
	return path, nil
}
