package ingest

import (
	"encoding/binary"
	"testing"
)

// skippable builds a zstd/lz4 skippable frame with an n-byte payload.
func skippable(n int) string {
	b := []byte{0x5e, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	return string(append(b, make([]byte, n)...))
}

func TestDetect(t *testing.T) {
	const zstdMagic, lz4Magic = "\x28\xb5\x2f\xfd", "\x04\x22\x4d\x18"
	for _, c := range []struct {
		head string
		eof  bool
		f    format
		need int
	}{
		{"", true, formatNone, 0},
		{"a", false, formatNone, 0},
		{"\x1f", false, formatNone, 2},
		{"\x1f", true, formatNone, 0},
		{"\x1f\x8b", false, formatGzip, 0},
		{"\x28\xb5", false, formatNone, 4},
		{zstdMagic, false, formatZstd, 0},
		{"\xfd7z", false, formatNone, 6},
		{"\xfd7zXZ\x00", false, formatXz, 0},
		{"\xfd7zXY\x00", false, formatNone, 0},
		{"BZ", false, formatNone, 10},
		{"BZh9", false, formatNone, 10},
		{"BZhx", false, formatNone, 0},
		{"BZh9 is a", false, formatNone, 0},
		{"BZh91AY&SY", false, formatBzip2, 0},
		{"BZh1\x17\x72\x45\x38\x50\x90", false, formatBzip2, 0},
		{"BZh91AY&S", true, formatNone, 0},
		{lz4Magic, false, formatLz4, 0},
		{"\x02\x21\x4c\x18", false, formatLz4, 0},
		{"PK\x03\x04", false, formatZip, 0},
		{"PK\x05\x06", false, formatZip, 0},
		{"PK", false, formatNone, 4},
		{"PKZIP", false, formatNone, 0},
		{"P", false, formatNone, 4},
		{"Pa", false, formatNone, 0},
		{"\x5e\x2a\x4d", false, formatNone, 4},
		{skippable(4)[:6], false, formatNone, 8},
		{skippable(4), false, formatNone, 16},
		{skippable(4), true, formatZstd, 0},
		{skippable(4) + zstdMagic, false, formatZstd, 0},
		{skippable(4) + lz4Magic, false, formatLz4, 0},
		{skippable(4) + skippable(0) + lz4Magic, false, formatLz4, 0},
		{skippable(4) + skippable(0)[:5], false, formatNone, 12 + 8},
		{skippable(maxSkippable + 1)[:8], false, formatZstd, 0},
	} {
		f, need := detect([]byte(c.head), c.eof)
		if f != c.f || need != c.need {
			t.Errorf("detect(%q, eof=%v) = %v, %d; want %v, %d", c.head, c.eof, f, need, c.f, c.need)
		}
	}
}
