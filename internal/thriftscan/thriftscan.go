// Package thriftscan walks a Thrift compact-protocol struct in a byte
// slice without allocating, and refuses one whose lengths or counts run
// past the slice. Parquet's footer and page headers are such structs, and
// a decoder that trusts their lengths allocates what a damaged file
// declares (up to 2 GiB a field) before it finds the bytes missing: a file
// is walked here first, so that whatever a library then allocates is
// bounded by the bytes that are really there.
package thriftscan

import (
	"errors"
	"fmt"
)

// ErrBad is a struct that does not parse within its bytes.
var ErrBad = errors.New("thrift: malformed")

// maxDepth bounds nesting (structs, lists, maps): Parquet's deepest is a
// handful.
const maxDepth = 64

// The compact protocol's types.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

type walker struct {
	b  []byte
	at int
	// lists, when set, is told of each list, set and map and its count;
	// path is the field ids from the top struct down to it.
	lists func(path []int16, n uint64)
	path  []int16
}

func (w *walker) fail(format string, a ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrBad, w.at, fmt.Sprintf(format, a...))
}

func (w *walker) byte1() (byte, error) {
	if w.at >= len(w.b) {
		return 0, w.fail("the bytes end")
	}
	c := w.b[w.at]
	w.at++
	return c, nil
}

func (w *walker) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 70; shift += 7 {
		c, err := w.byte1()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, w.fail("a varint over 10 bytes")
}

func (w *walker) zigzag() (int64, error) {
	u, err := w.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// skip moves past n bytes that must be there.
func (w *walker) skip(n uint64) error {
	if n > uint64(len(w.b)-w.at) {
		return w.fail("a length of %d bytes with %d left", n, len(w.b)-w.at)
	}
	w.at += int(n)
	return nil
}

// count reads a count of elements each at least one byte long.
func (w *walker) count(n uint64) error {
	if n > uint64(len(w.b)-w.at) {
		return w.fail("a count of %d elements with %d bytes left", n, len(w.b)-w.at)
	}
	return nil
}

func (w *walker) value(t byte, depth int) (int64, error) {
	switch t {
	case tTrue, tFalse:
		return 0, nil
	case tByte:
		c, err := w.byte1()
		return int64(int8(c)), err
	case tI16, tI32, tI64:
		return w.zigzag()
	case tDouble:
		return 0, w.skip(8)
	case tBinary:
		n, err := w.uvarint()
		if err != nil {
			return 0, err
		}
		return 0, w.skip(n)
	case tList, tSet:
		h, err := w.byte1()
		if err != nil {
			return 0, err
		}
		n, et := uint64(h>>4), h&0x0f
		if n == 15 {
			if n, err = w.uvarint(); err != nil {
				return 0, err
			}
		}
		if err := w.count(n); err != nil {
			return 0, err
		}
		if w.lists != nil {
			w.lists(w.path, n)
		}
		return 0, w.elements(n, et, depth)
	case tMap:
		n, err := w.uvarint()
		if err != nil || n == 0 {
			return 0, err
		}
		kv, err := w.byte1()
		if err != nil {
			return 0, err
		}
		if err := w.count(n); err != nil {
			return 0, err
		}
		if w.lists != nil {
			w.lists(w.path, n)
		}
		for range n {
			if _, err := w.value(kv>>4, depth+1); err != nil {
				return 0, err
			}
			if _, err := w.value(kv&0x0f, depth+1); err != nil {
				return 0, err
			}
		}
		return 0, nil
	case tStruct:
		return 0, w.structure(depth+1, nil, 0)
	}
	return 0, w.fail("type %d", t)
}

func (w *walker) elements(n uint64, et byte, depth int) error {
	for range n {
		if et == tTrue || et == tFalse { // a list's booleans take a byte each
			if _, err := w.byte1(); err != nil {
				return err
			}
			continue
		}
		if _, err := w.value(et, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) structure(depth int, ints func(outer, id int16, v int64), outer int16) error {
	if depth > maxDepth {
		return w.fail("nested over %d deep", maxDepth)
	}
	var id int16
	for {
		h, err := w.byte1()
		if err != nil {
			return err
		}
		t := h & 0x0f
		if t == tStop {
			return nil
		}
		if d := h >> 4; d != 0 {
			id += int16(d)
		} else {
			v, err := w.zigzag()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		if t == tStruct && ints != nil && outer == 0 {
			// A struct field of the top struct: its integers too.
			if err := w.structure(depth+1, ints, id); err != nil {
				return err
			}
			continue
		}
		if w.lists != nil {
			w.path = append(w.path, id)
		}
		v, err := w.value(t, depth)
		if err != nil {
			return err
		}
		if w.lists != nil {
			w.path = w.path[:len(w.path)-1]
		}
		switch {
		case ints == nil:
		case t == tTrue:
			ints(outer, id, 1)
		case t == tFalse:
			ints(outer, id, 0)
		case t == tI16 || t == tI32 || t == tI64 || t == tByte:
			ints(outer, id, v)
		}
	}
}

// Struct walks the struct at the start of b and returns its encoded
// length. ints, if not nil, is called with each integer (or boolean: 0,
// 1) field of that
// struct (outer 0) and of the structs that are its fields (outer: that
// field's id), in order: a page header's sizes and its data page
// header's level lengths.
func Struct(b []byte, ints func(outer, id int16, v int64)) (int, error) {
	w := walker{b: b}
	err := w.structure(0, ints, 0)
	return w.at, err
}

// Lists walks the struct at the start of b as Struct does, and calls list
// with each list, set and map in it and its count of elements; path is the
// ids of the fields from the top struct down to it (the elements of a list
// of structs add none), valid during the call only. A Parquet footer's
// row groups are the list at [4], their column chunks the lists at [4 1]:
// what a parser of the footer will allocate is known before it runs.
func Lists(b []byte, list func(path []int16, n uint64)) (int, error) {
	w := walker{b: b, lists: list}
	err := w.structure(0, nil, 0)
	return w.at, err
}
