package ingest

import (
	"encoding/binary"
	"math/bits"
)

// TSV records are lines split on TAB with no quoting at all: a '"' is data,
// and so is every byte but TAB and the "\n" or "\r\n" terminator. There is
// nothing to unescape, so a key field always aliases the record.
//
// The split is hand-written (BenchmarkKeyTSV: events keyed on 3 of their 5
// columns): bytes.Split allocates a slice a record, and encoding/csv with
// Comma '\t' takes several times the CPU and would still treat quotes as
// quoting.

// splitFields locates the fields of line, a record without its terminator
// and with no quoting, split on sep, up to the last key column: a tsv
// record, or a csv record without a quote. It reads eight bytes at a time
// and takes every separator of a word from one mask: a byte loop spends a
// branch a byte (BenchmarkKeyCSV/hand/plain, BenchmarkKeyTSV/hand).
func (k *Keyer) splitFields(line []byte, sep byte) error {
	k.plain = true
	last := len(k.fields) - 1
	c, p, i := 0, 0, 0
	pattern := uint64(sep) * 0x0101010101010101
	for ; i+8 <= len(line); i += 8 {
		for m := zeroBytes(binary.LittleEndian.Uint64(line[i:]) ^ pattern); m != 0; m &= m - 1 {
			q := i + bits.TrailingZeros64(m)>>3
			k.fields[c] = field{start: p, end: q}
			if c == last {
				return nil
			}
			c, p = c+1, q+1
		}
	}
	for ; i < len(line); i++ {
		if line[i] == sep {
			k.fields[c] = field{start: p, end: i}
			if c == last {
				return nil
			}
			c, p = c+1, i+1
		}
	}
	k.fields[c] = field{start: p, end: len(line)}
	if c == last {
		return nil
	}
	return k.missing(c + 1)
}

// zeroBytes has the high bit of each byte that is zero in x set, and no
// other bit: exact, since no byte's sum carries into the next (the usual
// (x - 0x01..) & ^x trick also flags a 0x01 above a zero byte).
func zeroBytes(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((x&low7 + low7) | x | low7)
}
