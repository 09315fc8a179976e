package gen

import (
	"bufio"
	"io"
)

// Fingerprint returns fingerprint i of a seed as its high and low halves: a
// pure function of (seed, i), so two ranges of one seed overlap exactly
// where their indexes do, and distinct (seed, i) give distinct
// fingerprints (lo alone is a bijection of the stream position).
func Fingerprint(seed, i uint64) (hi, lo uint64) {
	base := finalize(seed+0x9e3779b97f4a7c15) * 2
	return finalize(base + 2*i + 1), finalize(base + 2*i)
}

// finalize is splitmix64's finaliser: a bijection of uint64 with good
// avalanche (mix without the increment).
func finalize(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Fingerprints writes fingerprints from, from+1, …, from+count-1 of a seed
// as 32 lowercase hex digits a line: the input of fpdedup build --format fp,
// the fast way to make a big index without hashing records. From 0 count 10
// and from 8 count 10 share 2 lines.
func Fingerprints(w io.Writer, seed, from, count uint64) error {
	return PartitionFingerprints(w, seed, from, count, 0, 0)
}

// PartitionFingerprints is Fingerprints of those whose top bits bits are
// index: the share of prefix partition index/2^bits (fpdedup build
// --partition), without the hex of the others (a machine's share of a
// partitioned build, without streaming the whole set through it).
func PartitionFingerprints(w io.Writer, seed, from, count uint64, bits uint8, index uint64) error {
	const digits = "0123456789abcdef"
	bw := bufio.NewWriterSize(w, genBuf)
	var line [33]byte
	line[32] = '\n'
	for i := from; i < from+count; i++ {
		hi, lo := Fingerprint(seed, i)
		if bits > 0 && hi>>(64-bits) != index {
			continue
		}
		for k := 15; k >= 0; k-- {
			line[k] = digits[hi&15]
			hi >>= 4
		}
		for k := 31; k >= 16; k-- {
			line[k] = digits[lo&15]
			lo >>= 4
		}
		if _, err := bw.Write(line[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}
