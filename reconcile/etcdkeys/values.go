package etcdkeys

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
)

// MaxValue is the largest value a key is written with: etcd refuses a
// request over its --max-request-bytes (1.5 MiB by default), and a value
// is refused before any write rather than by the server halfway.
const MaxValue = 1 << 20

// values are the keys' values: one for every key when the template names
// no field, else one a whole digest, made from its record's fields by the
// records pass (KeepValue), sorted once before the first write (seal) and
// looked up by binary search after.
type values struct {
	t     *etcdkv.Template
	src   string // the template as given
	fixed []byte // the value of every key, when the template names no field
	index map[string]int
	// The kept values: entries point into arena. Filled from one goroutine
	// (the records pass), sealed once, then only read (Write, Plan, Held
	// from several goroutines).
	entries []valueEntry
	arena   []byte
	budget  int64  // bytes entries and arena may take
	seq     uint32 // the next entry's: the order kept
	once    sync.Once
}

type valueEntry struct {
	digest [32]byte
	off, n uint32
	seq    uint32 // the order kept: the first record of a key wins
}

const entryBytes = 48 // a valueEntry, padded

// newValues parses the template src ("" is the empty value); budget bounds
// the values kept.
func newValues(src string, budget int64) (*values, error) {
	t, err := etcdkv.ParseTemplate(src)
	if err != nil {
		return nil, err
	}
	v := &values{t: t, src: src, budget: budget, index: map[string]int{}}
	for i, f := range t.Fields() {
		v.index[f] = i
	}
	if len(t.Fields()) == 0 {
		if v.fixed, err = t.Render(nil, nil); err != nil {
			return nil, err
		}
		if len(v.fixed) > MaxValue {
			return nil, &ValueError{Reason: fmt.Sprintf("the value is %d bytes, over %d", len(v.fixed), MaxValue)}
		}
	}
	return v, nil
}

// CheckValue says whether src is a value template KeepValue can use: a
// *etcdkv.TemplateError says where it is wrong. Its fields are returned.
func CheckValue(src string) (fields []string, err error) {
	v, err := newValues(src, 0)
	if err != nil {
		return nil, err
	}
	return v.t.Fields(), nil
}

// keep renders the value of digest from fields (ValueFields' order).
func (v *values) keep(digest [32]byte, fields [][]byte) error {
	off := len(v.arena)
	out, err := v.t.Render(v.arena, func(name string) ([]byte, bool) {
		i, ok := v.index[name]
		if !ok || i >= len(fields) {
			return nil, false
		}
		return fields[i], true
	})
	if err != nil {
		v.arena = v.arena[:off]
		return err
	}
	n := len(out) - off
	if n > MaxValue {
		v.arena = v.arena[:off]
		return &ValueError{Reason: fmt.Sprintf("its value is %d bytes, over %d", n, MaxValue)}
	}
	if v.over(len(out)) {
		// Repeats of a key are kept until the room runs out: then only
		// the first of each, and the budget counts keys, not records.
		val := bytes.Clone(out[off:])
		v.arena = v.arena[:off]
		v.compact()
		if _, kept := slices.BinarySearchFunc(v.entries, digest, func(e valueEntry, d [32]byte) int { return bytes.Compare(e.digest[:], d[:]) }); kept {
			return nil // an earlier record of the key gave its value
		}
		off = len(v.arena)
		v.arena = append(v.arena, val...)
		if v.over(len(v.arena)) {
			v.arena = v.arena[:off]
			return &TooManyValuesError{Values: int64(len(v.entries)), Bytes: int64(off)}
		}
		out = v.arena
	}
	v.arena = out
	v.entries = append(v.entries, valueEntry{digest: digest, off: uint32(off), n: uint32(n), seq: v.seq})
	v.seq++
	return nil
}

// over tells whether one entry more and an arena of arena bytes pass the
// budget (or the offsets' range).
func (v *values) over(arena int) bool {
	return int64(len(v.entries)+1)*entryBytes+int64(arena) > v.budget || arena > 1<<32-1
}

// compact keeps the first value of each key, in a new arena.
func (v *values) compact() {
	v.sortByDigest()
	arena := make([]byte, 0, len(v.arena))
	for i := range v.entries {
		e := &v.entries[i]
		off := len(arena)
		arena = append(arena, v.arena[e.off:e.off+e.n]...)
		e.off = uint32(off)
	}
	v.arena = arena
}

// sortByDigest sorts the kept values by digest, the first of each digest
// kept.
func (v *values) sortByDigest() {
	slices.SortFunc(v.entries, func(a, b valueEntry) int {
		if c := bytes.Compare(a.digest[:], b.digest[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	v.entries = slices.CompactFunc(v.entries, func(a, b valueEntry) bool { return a.digest == b.digest })
}

// seal sorts the kept values by digest, the first of each digest kept.
func (v *values) seal() {
	v.once.Do(v.sortByDigest)
}

// of is the value of the key whose whole digest is digest (full: known);
// ok is false when the template needs fields and no record gave them.
func (v *values) of(digest *[32]byte, full bool) (val []byte, ok bool) {
	if len(v.t.Fields()) == 0 {
		return v.fixed, true
	}
	if !full {
		return nil, false
	}
	v.seal()
	i, found := slices.BinarySearchFunc(v.entries, *digest, func(e valueEntry, d [32]byte) int { return bytes.Compare(e.digest[:], d[:]) })
	if !found {
		return nil, false
	}
	e := v.entries[i]
	return v.arena[e.off : e.off+e.n], true
}
