package thriftscan

import (
	"errors"
	"fmt"
	"testing"
)

// TestStruct: structs written out by hand in the compact protocol: what
// is whole parses to its length, with its top-level integers; what runs
// past its bytes, or nests too deep, is ErrBad.
func TestStruct(t *testing.T) {
	whole := []byte{
		0x15, 0x00, // field 1, i32: 0
		0x15, 0x90, 0x01, // field 2, i32: zigzag 144 = 72
		0x16, 0x03, // field 3, i64: -2
		0x18, 0x02, 'h', 'i', // field 4, binary "hi"
		0x19, 0x25, 0x02, 0x04, // field 5, list of 2 i32: 1, 2
		0x1c, 0x11, 0x00, // field 6, struct {field 1 true}
		0x1b, 0x01, 0x55, 0x02, 0x04, // field 7, map of 1 i32→i32
		0x05, 0x10, 0x10, // field 8 (long form), i32: 8
		0x00, // stop
	}
	var ids []int16
	var vals []int64
	n, err := Struct(append(whole, 0xff, 0xff), func(outer, id int16, v int64) {
		if outer == 0 {
			ids = append(ids, id)
			vals = append(vals, v)
		}
	})
	if err != nil || n != len(whole) {
		t.Fatalf("whole: %d bytes of %d, %v", n, len(whole), err)
	}
	if len(ids) != 4 || ids[1] != 2 || vals[1] != 72 || ids[2] != 3 || vals[2] != -2 || ids[3] != 8 || vals[3] != 8 {
		t.Fatalf("top fields %v %v", ids, vals)
	}
	for cut := range len(whole) {
		if _, err := Struct(whole[:cut], nil); !errors.Is(err, ErrBad) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	for name, b := range map[string][]byte{
		"binary past the end":     {0x18, 0xff, 0xff, 0xff, 0x07, 0x00},
		"list count past the end": {0x19, 0xf5, 0xff, 0xff, 0xff, 0x07, 0x00},
		"map count past the end":  {0x1b, 0xff, 0xff, 0x03, 0x55, 0x00},
		"long varint":             {0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00},
		"unknown type":            {0x1d, 0x00},
	} {
		if _, err := Struct(b, nil); !errors.Is(err, ErrBad) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The fields of a struct field, with its id.
	var inner []int64
	if _, err := Struct([]byte{0x1c, 0x15, 0x0a, 0x15, 0x0c, 0x00, 0x15, 0x02, 0x00}, func(outer, id int16, v int64) {
		inner = append(inner, int64(outer), int64(id), v)
	}); err != nil || len(inner) != 9 || inner[0] != 1 || inner[1] != 1 || inner[2] != 5 || inner[4] != 2 || inner[5] != 6 || inner[6] != 0 || inner[7] != 2 || inner[8] != 1 {
		t.Fatalf("nested ints %v, %v", inner, err)
	}
	deep := make([]byte, 0, 200)
	for range 100 {
		deep = append(deep, 0x1c)
	}
	if _, err := Struct(deep, nil); !errors.Is(err, ErrBad) {
		t.Fatalf("100 nested structs: %v", err)
	}
}

// FuzzStruct: any bytes give a length within them or ErrBad, never a
// panic, and the same answer twice.
func FuzzStruct(f *testing.F) {
	f.Add([]byte{0x15, 0x00, 0x18, 0x02, 'h', 'i', 0x00})
	f.Add([]byte{0x19, 0x25, 0x02, 0x04, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Struct(b, nil)
		if err != nil && !errors.Is(err, ErrBad) {
			t.Fatal(err)
		}
		if err == nil && (n < 1 || n > len(b)) {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		if n2, err2 := Struct(b, nil); n2 != n || (err == nil) != (err2 == nil) {
			t.Fatal("two answers")
		}
	})
}

// TestLists: the lists of a nested struct, each with the path of field
// ids that leads to it and its count, in order; a list of structs' lists
// under the list's field.
func TestLists(t *testing.T) {
	b := []byte{
		0x19, 0x25, 0x02, 0x04, // field 1, list of 2 i32
		0x29, 0x2c, // field 3, list of 2 structs:
		0x19, 0x15, 0x02, 0x00, //   {field 1: list of 1 i32}
		0x19, 0x05, 0x00, //   {field 1: list of 0 i32}
		0x1c, 0x1b, 0x01, 0x55, 0x02, 0x04, 0x00, // field 4, struct {field 1: map of 1}
		0x00,
	}
	var got []string
	n, err := Lists(b, func(path []int16, n uint64) {
		got = append(got, fmt.Sprint(path, n))
	})
	if err != nil || n != len(b) {
		t.Fatalf("%d bytes of %d, %v", n, len(b), err)
	}
	want := []string{"[1] 2", "[3] 2", "[3 1] 1", "[3 1] 0", "[4 1] 1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lists %v, want %v", got, want)
	}
}
