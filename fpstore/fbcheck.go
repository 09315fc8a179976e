package fpstore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// fbTable reads one FlatBuffers table with every offset bounds-checked: Go
// FlatBuffers has no verifier and its accessors index without checks. The
// first failure sticks in err (the tsdb decoder pattern); later reads then
// return zero values, so callers check err once after a group of reads.
type fbTable struct {
	buf    []byte
	pos    uint32 // table start
	vtable uint32
	vlen   uint16 // vtable length in bytes
	err    error
}

var errFB = errors.New("flatbuffers structure")

func rootTable(buf []byte) (fbTable, error) {
	if len(buf) < 8 || len(buf) > 1<<31 || string(buf[4:8]) != FileIdentifier {
		return fbTable{}, fmt.Errorf("%w: no %s buffer of %d bytes", errFB, FileIdentifier, len(buf))
	}
	t := tableAt(buf, binary.LittleEndian.Uint32(buf))
	return t, t.err
}

func tableAt(buf []byte, pos uint32) fbTable {
	t := fbTable{buf: buf, pos: pos}
	n := uint64(len(buf))
	if uint64(pos)+4 > n || pos%4 != 0 {
		t.err = fmt.Errorf("%w: table at %d outside buffer of %d", errFB, pos, n)
		return t
	}
	vt := int64(pos) - int64(int32(binary.LittleEndian.Uint32(buf[pos:])))
	if vt < 0 || uint64(vt)+4 > n || vt%2 != 0 {
		t.err = fmt.Errorf("%w: vtable of table at %d outside buffer", errFB, pos)
		return t
	}
	t.vtable = uint32(vt)
	t.vlen = binary.LittleEndian.Uint16(buf[vt:])
	objLen := binary.LittleEndian.Uint16(buf[vt+2:])
	if t.vlen < 4 || t.vlen%2 != 0 || uint64(vt)+uint64(t.vlen) > n || uint64(pos)+uint64(objLen) > n || objLen < 4 {
		t.err = fmt.Errorf("%w: vtable at %d has bad sizes", errFB, vt)
	}
	return t
}

// field returns the absolute position of field i of the given size, or 0
// when the field is absent (its default applies).
func (t *fbTable) field(i int, size uint32) uint32 {
	if t.err != nil {
		return 0
	}
	vo := uint32(4 + 2*i)
	if vo+2 > uint32(t.vlen) {
		return 0
	}
	off := binary.LittleEndian.Uint16(t.buf[t.vtable+vo:])
	if off == 0 {
		return 0
	}
	objLen := binary.LittleEndian.Uint16(t.buf[t.vtable+2:])
	if uint32(off)+size > uint32(objLen) || uint64(t.pos)+uint64(off)+uint64(size) > uint64(len(t.buf)) {
		t.err = fmt.Errorf("%w: field %d of table at %d out of bounds", errFB, i, t.pos)
		return 0
	}
	return t.pos + uint32(off)
}

func (t *fbTable) u8(i int, def uint8) uint8 {
	if p := t.field(i, 1); p != 0 {
		return t.buf[p]
	}
	return def
}

func (t *fbTable) u16(i int, def uint16) uint16 {
	if p := t.field(i, 2); p != 0 {
		return binary.LittleEndian.Uint16(t.buf[p:])
	}
	return def
}

func (t *fbTable) u32(i int, def uint32) uint32 {
	if p := t.field(i, 4); p != 0 {
		return binary.LittleEndian.Uint32(t.buf[p:])
	}
	return def
}

func (t *fbTable) u64(i int, def uint64) uint64 {
	if p := t.field(i, 8); p != 0 {
		return binary.LittleEndian.Uint64(t.buf[p:])
	}
	return def
}

// target follows the uoffset stored in field i.
func (t *fbTable) target(i int) (uint32, bool) {
	p := t.field(i, 4)
	if p == 0 {
		return 0, false
	}
	to := uint64(p) + uint64(binary.LittleEndian.Uint32(t.buf[p:]))
	if to+4 > uint64(len(t.buf)) {
		t.err = fmt.Errorf("%w: field %d of table at %d points outside buffer", errFB, i, t.pos)
		return 0, false
	}
	return uint32(to), true
}

// vector returns the bytes of vector field i whose elements are elemSize
// bytes; absent vectors are empty. Element data is aligned as FlatBuffers
// places it; callers that view it as wider types check alignment.
func (t *fbTable) vector(i int, elemSize uint32) []byte {
	_, v := t.vectorAt(i, elemSize)
	return v
}

// vectorAt is vector that also gives the position of the first element.
func (t *fbTable) vectorAt(i int, elemSize uint32) (uint64, []byte) {
	at, ok := t.target(i)
	if !ok {
		return 0, nil
	}
	n := uint64(binary.LittleEndian.Uint32(t.buf[at:]))
	start := uint64(at) + 4
	if n*uint64(elemSize) > uint64(len(t.buf))-start {
		t.err = fmt.Errorf("%w: vector field %d of %d elements overruns the buffer", errFB, i, n)
		return 0, nil
	}
	return start, t.buf[start : start+n*uint64(elemSize) : start+n*uint64(elemSize)]
}

// vectorOf is vector field i as n elements of elemSize bytes, its length
// word not read: for a caller that knows the length from elsewhere and
// checks the word only where it reads the word's page anyway.
func (t *fbTable) vectorOf(i int, elemSize uint32, n uint64) []byte {
	at, ok := t.target(i)
	if !ok {
		return nil
	}
	start := uint64(at) + 4
	if n > uint64(len(t.buf)) || n*uint64(elemSize) > uint64(len(t.buf))-start {
		t.err = fmt.Errorf("%w: vector field %d of %d elements overruns the buffer", errFB, i, n)
		return nil
	}
	return t.buf[start : start+n*uint64(elemSize) : start+n*uint64(elemSize)]
}

func (t *fbTable) str(i int) []byte { return t.vector(i, 1) }

func (t *fbTable) table(i int) fbTable {
	at, ok := t.target(i)
	if !ok {
		if t.err != nil {
			return fbTable{err: t.err}
		}
		return fbTable{err: fmt.Errorf("%w: required table field %d missing", errFB, i)}
	}
	return tableAt(t.buf, at)
}

// strs reads a vector of strings.
func (t *fbTable) strs(i int) [][]byte {
	base, raw := t.vectorAt(i, 4)
	if t.err != nil || raw == nil {
		return nil
	}
	out := make([][]byte, 0, len(raw)/4)
	for k := 0; k+4 <= len(raw); k += 4 {
		at := base + uint64(k) + uint64(binary.LittleEndian.Uint32(raw[k:]))
		if at+4 > uint64(len(t.buf)) {
			t.err = fmt.Errorf("%w: string %d of field %d outside buffer", errFB, k/4, i)
			return nil
		}
		n := uint64(binary.LittleEndian.Uint32(t.buf[at:]))
		if n > uint64(len(t.buf))-at-4 {
			t.err = fmt.Errorf("%w: string %d of field %d overruns buffer", errFB, k/4, i)
			return nil
		}
		out = append(out, t.buf[at+4:at+4+n])
	}
	return out
}
