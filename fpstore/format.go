package fpstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Format constants; docs/FORMAT.md names them the same.
const (
	// FormatVersion is the version this package writes.
	//   1: first version (header, page-aligned FlatBuffers segments with a
	//      bucket directory and a cache-line blocked bloom filter, page CRC tables,
	//      FlatBuffers footer, trailer).
	FormatVersion = 1
	// MinFormatVersion is the oldest version this package reads.
	MinFormatVersion = 1

	// HeaderSize is the fixed header at offset 0 (FORMAT.md "Header").
	HeaderSize = 64
	// PageSize is the checksum granule and the alignment of segments: a
	// lookup verifies exactly the 4 KiB pages it reads, once per process.
	PageSize = 4096
	// TrailerSize is the fixed trailer at the end of the file.
	TrailerSize = 32
	// SegmentMax bounds the fingerprints of one segment: 2^20 = 16 MiB of
	// fingerprints, far below the Go FlatBuffers builder's 1 GiB limit, and
	// small enough that a segment, its filter and its directory are built
	// in a few tens of MiB by one worker.
	SegmentMax = 1 << 20
	// FileIdentifier is the FlatBuffers file identifier of segments and
	// the footer.
	FileIdentifier = "FPX1"
)

// Magic opens every index; like PNG's it catches text-mode transfers.
var Magic = [8]byte{0x89, 'F', 'P', 'X', '\r', '\n', 0x1a, '\n'}

// TrailerMagic closes every index, so truncation is seen at once.
var TrailerMagic = [8]byte{0x89, 'F', 'P', 'X', 'E', 'N', 'D', '\n'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// header is the decoded fixed header (FORMAT.md "Header").
type header struct {
	Version    uint32
	PageSize   uint32
	SegmentMax uint32
	Flags      uint32
}

func encodeHeader(h header) []byte {
	b := make([]byte, HeaderSize)
	copy(b[0:8], Magic[:])
	binary.LittleEndian.PutUint32(b[8:], h.Version)
	binary.LittleEndian.PutUint32(b[12:], HeaderSize)
	binary.LittleEndian.PutUint32(b[16:], h.PageSize)
	binary.LittleEndian.PutUint32(b[20:], h.SegmentMax)
	binary.LittleEndian.PutUint32(b[24:], h.Flags)
	binary.LittleEndian.PutUint32(b[60:], crc32c(b[:60]))
	return b
}

// decodeHeader checks magic, checksum and version, in that order: a file
// without the magic is not an index at all; with it, anything else wrong is
// damage or a version this build does not read.
func decodeHeader(b []byte) (header, error) {
	if len(b) < len(Magic) || [8]byte(b[:8]) != Magic {
		return header{}, ErrNotIndex
	}
	if len(b) < HeaderSize {
		return header{}, fmt.Errorf("%w: truncated header (%d of %d bytes)", ErrCorrupt, len(b), HeaderSize)
	}
	if got, want := crc32c(b[:60]), binary.LittleEndian.Uint32(b[60:]); got != want {
		return header{}, fmt.Errorf("%w: header checksum mismatch at offset 0 (crc32c %08x, stored %08x)", ErrCorrupt, got, want)
	}
	h := header{
		Version:    binary.LittleEndian.Uint32(b[8:]),
		PageSize:   binary.LittleEndian.Uint32(b[16:]),
		SegmentMax: binary.LittleEndian.Uint32(b[20:]),
		Flags:      binary.LittleEndian.Uint32(b[24:]),
	}
	if h.Version < MinFormatVersion || h.Version > FormatVersion {
		return header{}, fmt.Errorf("%w: v%d (this build reads v%d to v%d)", ErrUnsupportedVersion, h.Version, MinFormatVersion, FormatVersion)
	}
	if size := binary.LittleEndian.Uint32(b[12:]); size != HeaderSize {
		return header{}, fmt.Errorf("%w: header size %d, want %d", ErrCorrupt, size, HeaderSize)
	}
	if h.PageSize != PageSize || h.SegmentMax != SegmentMax || h.Flags != 0 {
		return header{}, fmt.Errorf("%w: header fields page_size=%d segment_max=%d flags=%#x differ from v%d's", ErrCorrupt, h.PageSize, h.SegmentMax, h.Flags, h.Version)
	}
	return h, nil
}

// trailer locates the footer (FORMAT.md "Trailer").
type trailer struct {
	FooterOffset uint64
	FooterLength uint64
	FooterCRC    uint32
}

func encodeTrailer(t trailer) []byte {
	b := make([]byte, TrailerSize)
	binary.LittleEndian.PutUint64(b[0:], t.FooterOffset)
	binary.LittleEndian.PutUint64(b[8:], t.FooterLength)
	binary.LittleEndian.PutUint32(b[16:], t.FooterCRC)
	binary.LittleEndian.PutUint32(b[20:], crc32c(b[:20]))
	copy(b[24:], TrailerMagic[:])
	return b
}

func decodeTrailer(b []byte, fileSize int64) (trailer, error) {
	if [8]byte(b[24:32]) != TrailerMagic {
		return trailer{}, fmt.Errorf("%w: trailer missing at offset %d (truncated or not finished?)", ErrCorrupt, fileSize-TrailerSize)
	}
	if got, want := crc32c(b[:20]), binary.LittleEndian.Uint32(b[20:]); got != want {
		return trailer{}, fmt.Errorf("%w: trailer checksum mismatch at offset %d", ErrCorrupt, fileSize-TrailerSize)
	}
	t := trailer{
		FooterOffset: binary.LittleEndian.Uint64(b[0:]),
		FooterLength: binary.LittleEndian.Uint64(b[8:]),
		FooterCRC:    binary.LittleEndian.Uint32(b[16:]),
	}
	end := uint64(fileSize - TrailerSize)
	if t.FooterOffset < HeaderSize || t.FooterOffset%8 != 0 || t.FooterLength > end || t.FooterOffset > end-t.FooterLength || t.FooterOffset+t.FooterLength != end {
		return trailer{}, fmt.Errorf("%w: trailer points at footer [%d, +%d) outside the file of %d bytes", ErrCorrupt, t.FooterOffset, t.FooterLength, fileSize)
	}
	return t, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// Spec says what the fingerprints are fingerprints of: the hash and the key
// recipe (FORMAT.md "Footer"). Indexes with different specs never mix.
type Spec struct {
	Hash   string   // "xxh3" or "sha256"
	Key    []string // --key items as given; empty: the whole record
	KeySep string   // joins the key items
	// Format is where the key items are found (csv, tsv, jsonl): recorded
	// so that a later run can read records the same way, but provenance
	// only, not part of Equal.
	Format string
}

// Equal reports whether two specs are the same (the format aside).
func (s Spec) Equal(o Spec) bool {
	if s.Hash != o.Hash || s.KeySep != o.KeySep || len(s.Key) != len(o.Key) {
		return false
	}
	for i := range s.Key {
		if s.Key[i] != o.Key[i] {
			return false
		}
	}
	return true
}

// Range is the covered prefix range: partition Index of 2^Bits (the zero
// value covers the whole fingerprint space).
type Range struct {
	Bits  uint8
	Index uint64
}

// Whole reports whether the range is the whole fingerprint space.
func (r Range) Whole() bool { return r.Bits == 0 }

// Contains reports whether fp lies in the range.
func (r Range) Contains(fp Fingerprint) bool {
	return r.Bits == 0 || fp.bits(0, uint(r.Bits)) == r.Index
}

// Valid reports whether the range is well formed.
func (r Range) Valid() bool {
	return r.Bits <= 32 && (r.Bits == 0 && r.Index == 0 || r.Bits > 0 && r.Index < 1<<r.Bits)
}

func (r Range) String() string {
	if r.Bits == 0 {
		return "all"
	}
	return fmt.Sprintf("%d/%d", r.Index, uint64(1)<<r.Bits)
}
