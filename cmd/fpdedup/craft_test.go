package main

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/fpdedup/fpdedup/schema"
)

// craft FILE filter0|dir0|swap K damages segment 0 of the index FILE and
// then recomputes every checksum after the damage (the segment's page
// CRCs, their CRC in the footer, the footer's and the trailer's): a
// crafted index, which no checksum catches and verify reports.
//
//	filter0   zero every byte of the filter
//	dir0      zero every directory entry but the last
//	swap K    swap fingerprints K and K+1
//
// It goes through the generated schema code, as a tool crafting an index
// would, not through fpstore.
func cmdCraft(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || (args[1] == "swap") != (len(args) == 3) || len(args) > 3 {
		ts.Fatalf("usage: craft FILE filter0|dir0|swap K")
	}
	name := ts.MkAbs(args[0])
	b, err := os.ReadFile(name)
	ts.Check(err)
	le := binary.LittleEndian
	tr := b[len(b)-32:]
	footOff, footLen := le.Uint64(tr[0:]), le.Uint64(tr[8:])
	footBuf := b[footOff : footOff+footLen]
	foot := schema.GetRootAsFooter(footBuf, 0)
	var ref schema.SegmentRef
	if !foot.Segments(&ref, 0) {
		ts.Fatalf("%s: no segment", args[0])
	}
	segOff, segLen := ref.Offset(), ref.Length()
	buf := b[segOff : segOff+segLen]
	seg := schema.GetRootAsSegment(buf, 0)
	switch args[1] {
	case "filter0":
		clear(seg.FilterBytes())
	case "dir0":
		for j := 0; j < seg.DirectoryLength()-1; j++ {
			seg.MutateDirectory(j, 0)
		}
	case "swap":
		k, err := strconv.Atoi(args[2])
		ts.Check(err)
		var a, c schema.Fingerprint
		if k < 0 || k+1 >= seg.FingerprintsLength() || !seg.Fingerprints(&a, k) || !seg.Fingerprints(&c, k+1) {
			ts.Fatalf("%s: no fingerprints %d and %d in segment 0", args[0], k, k+1)
		}
		hi, lo := a.Hi(), a.Lo()
		a.MutateHi(c.Hi())
		a.MutateLo(c.Lo())
		c.MutateHi(hi)
		c.MutateLo(lo)
	default:
		ts.Fatalf("unknown damage %q", args[1])
	}
	// FORMAT.md "Page CRC table", "Checksums": a CRC-32C per 4 KiB page of
	// the buffer, in a table at offset + align4(length), whose own CRC is
	// the SegmentRef's pages_crc; the footer's CRC in the trailer, and the
	// trailer's over its first 20 bytes.
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	crc := func(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }
	pagesAt := segOff + (segLen+3)/4*4
	pages := (segLen + 4095) / 4096
	table := b[pagesAt : pagesAt+4*pages]
	for p := uint64(0); p < pages; p++ {
		le.PutUint32(table[4*p:], crc(buf[4096*p:min(4096*(p+1), segLen)]))
	}
	ref.MutatePagesCrc(crc(table))
	le.PutUint32(tr[16:], crc(footBuf))
	le.PutUint32(tr[20:], crc(tr[:20]))
	ts.Check(os.WriteFile(name, b, 0o644))
}
