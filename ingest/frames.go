package ingest

import (
	"encoding/binary"
)

// A Parquet row reaches the pipeline as a frame: its key columns' texts,
// in --key order, so that the Keyer joins them (and replay takes its time
// item) as it does a csv record's fields. A frame is uvarint(len<<1|bad)
// and len bytes: uvarint(n) and n bytes per item, or, for a bad row (a
// NULL key column), the reason. A row has no bytes of its own; its frame
// is what the commands print for it where they print a record (its key,
// FrameText).

// AppendFrame appends the frame of a row whose key items are items.
func AppendFrame(b []byte, items [][]byte) []byte {
	n := 0
	for _, it := range items {
		n += uvarintLen(uint64(len(it))) + len(it)
	}
	b = binary.AppendUvarint(b, uint64(n)<<1)
	for _, it := range items {
		b = binary.AppendUvarint(b, uint64(len(it)))
		b = append(b, it...)
	}
	return b
}

func appendBadFrame(b []byte, reason string) []byte {
	b = binary.AppendUvarint(b, uint64(len(reason))<<1|1)
	return append(b, reason...)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// SplitFrames calls fn with each whole frame of data until fn returns
// false; a damaged tail (never written by Frames) ends it.
func SplitFrames(data []byte, fn func(rec []byte) bool) {
	for len(data) > 0 {
		h, k := binary.Uvarint(data)
		if k <= 0 || h>>1 > uint64(len(data)-k) {
			return
		}
		end := k + int(h>>1)
		if !fn(data[:end]) {
			return
		}
		data = data[end:]
	}
}

// frameItems calls fn with each item of frame rec; a bad row's frame
// returns its reason as a *BadRecord.
func frameItems(rec []byte, fn func(i int, item []byte)) error {
	h, k := binary.Uvarint(rec)
	if k <= 0 || h>>1 > uint64(len(rec)-k) {
		return &BadRecord{Reason: "a damaged frame"}
	}
	body := rec[k : k+int(h>>1)]
	if h&1 != 0 {
		return &BadRecord{Reason: string(body)}
	}
	for i := 0; len(body) > 0; i++ {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return &BadRecord{Reason: "a damaged frame"}
		}
		fn(i, body[k:k+int(n)])
		body = body[k+int(n):]
	}
	return nil
}

// JoinFrame appends the key of frame rec to b: its items joined by sep.
func JoinFrame(b, rec, sep []byte) ([]byte, error) {
	err := frameItems(rec, func(i int, item []byte) {
		if i > 0 {
			b = append(b, sep...)
		}
		b = append(b, item...)
	})
	return b, err
}

// frameFields locates the items of frame rec in fields, as the Keyer's
// csv fields are located in a line.
func frameFields(rec []byte, fields []field) error {
	h, k := binary.Uvarint(rec)
	if k <= 0 || h>>1 > uint64(len(rec)-k) {
		return &BadRecord{Reason: "a damaged frame"}
	}
	end := k + int(h>>1)
	if h&1 != 0 {
		return &BadRecord{Reason: string(rec[k:end])}
	}
	for i := range fields {
		n, m := binary.Uvarint(rec[k:end])
		if m <= 0 || n > uint64(end-k-m) {
			return &BadRecord{Reason: "a damaged frame"}
		}
		k += m
		fields[i] = field{start: k, end: k + int(n), set: true}
		k += int(n)
	}
	if k != end {
		return &BadRecord{Reason: "a frame of other items"}
	}
	return nil
}
