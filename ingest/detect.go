package ingest

import (
	"bytes"
	"encoding/binary"
)

// format is what the first bytes of an input say it is.
type format uint8

const (
	formatNone format = iota
	formatGzip
	formatZstd
	formatXz
	formatBzip2
	formatLz4
	formatZip
	formatParquet // not a compression: a file read as text by mistake
)

func (f format) String() string {
	return [...]string{"plain", "gzip", "zstd", "xz", "bzip2", "lz4", "zip", "parquet"}[f]
}

// refused gives, for each recognised but undecoded format, the command that
// decodes it to stdout.
var refused = map[format]string{
	formatXz:    "xz -dc",
	formatBzip2: "bzip2 -dc",
	formatLz4:   "lz4 -dc",
	formatZip:   "unzip -p",
}

var magics = []struct {
	f     format
	magic string
}{
	{formatGzip, "\x1f\x8b"},
	{formatZstd, "\x28\xb5\x2f\xfd"},
	{formatXz, "\xfd7zXZ\x00"},
	{formatLz4, "\x04\x22\x4d\x18"}, // frame format
	{formatLz4, "\x02\x21\x4c\x18"}, // legacy format (lz4 -l)
	{formatZip, "PK\x03\x04"},
	{formatZip, "PK\x05\x06"}, // empty archive
	{formatZip, "PK\x07\x08"}, // spanned archive
	{formatParquet, parquetHead},
}

// bzip2 streams start "BZh" and a block size digit, then the magic of the
// first block (the BCD digits of pi) or of the end of stream (of sqrt(pi)).
// Checking all ten bytes keeps a text line such as "BZh9 is a model" plain.
const bzip2Len = 10

func isBzip2(b []byte) bool {
	return len(b) >= bzip2Len && string(b[:3]) == "BZh" && b[3] >= '1' && b[3] <= '9' &&
		(string(b[4:10]) == "\x31\x41\x59\x26\x53\x59" || string(b[4:10]) == "\x17\x72\x45\x38\x50\x90")
}

// maxSkippable bounds how far detect looks past zstd skippable frames, which
// share their magic numbers with lz4 skippable frames, to find the first real
// frame. pzstd writes a 12-byte one in front of every frame.
const maxSkippable = 64 << 10

// detect says what format b, the first bytes of an input, is. If it cannot
// tell yet (b is a prefix of a magic number) and the input has more (!eof),
// it returns need > len(b): the number of bytes to look at before deciding.
// Everything that matches no magic is plain: keys are bytes, whatever they are.
func detect(b []byte, eof bool) (f format, need int) {
	for skipped := 0; ; {
		if len(b) >= 4 && b[0]&0xf0 == 0x50 && string(b[1:4]) == "\x2a\x4d\x18" {
			// A skippable frame: magic, 4-byte little-endian length, payload.
			if len(b) < 8 {
				return needOr(formatNone, skipped+8, eof)
			}
			n := int(binary.LittleEndian.Uint32(b[4:8]))
			if n > maxSkippable || skipped+8+n+4 > rawBufSize {
				return formatZstd, 0 // undecidable here; zstd is far more common
			}
			if len(b) < 8+n+4 {
				if eof {
					return formatZstd, 0 // only skippable frames: valid, empty zstd
				}
				return formatNone, skipped + 8 + n + 4
			}
			b, skipped = b[8+n:], skipped+8+n
			continue
		}
		if skipped > 0 {
			// After skippable frames only a real frame, zstd or lz4, may follow.
			if len(b) >= 4 && string(b[:4]) == "\x04\x22\x4d\x18" {
				return formatLz4, 0
			}
			return formatZstd, 0
		}
		break
	}
	for _, m := range magics {
		if len(b) >= len(m.magic) {
			if string(b[:len(m.magic)]) == m.magic {
				return m.f, 0
			}
		} else if bytes.HasPrefix([]byte(m.magic), b) {
			return needOr(formatNone, len(m.magic), eof)
		}
	}
	if isBzip2(b) {
		return formatBzip2, 0
	}
	if len(b) < bzip2Len && mayBeBzip2(b) {
		return needOr(formatNone, bzip2Len, eof)
	}
	// A skippable frame's magic may still be arriving.
	if len(b) < 4 && b[0]&0xf0 == 0x50 && bytes.HasPrefix([]byte("\x2a\x4d\x18"), b[1:]) {
		return needOr(formatNone, 4, eof)
	}
	return formatNone, 0
}

// mayBeBzip2 reports whether b, shorter than bzip2Len, may start a bzip2 stream.
func mayBeBzip2(b []byte) bool {
	if !bytes.HasPrefix([]byte("BZh"), b[:min(len(b), 3)]) {
		return false
	}
	if len(b) <= 3 {
		return true
	}
	if b[3] < '1' || b[3] > '9' {
		return false
	}
	return bytes.HasPrefix([]byte("\x31\x41\x59\x26\x53\x59"), b[4:]) ||
		bytes.HasPrefix([]byte("\x17\x72\x45\x38\x50\x90"), b[4:])
}

// needOr asks for need bytes, unless the input has ended: then f it is.
func needOr(f format, need int, eof bool) (format, int) {
	if eof {
		return f, 0
	}
	return f, need
}
