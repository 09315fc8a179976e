package fpstore

import "math/bits"

// fuse8 is a binary fuse filter with 8-bit fingerprints over a mapped
// byte slice. Its hashing is that of github.com/FastFilter/xorfilter, which
// builds it; the probe is written here because a lookup must know which
// bytes (pages) it reads, to verify them first. TestFuseProbeMatchesLibrary
// pins the two together.
type fuse8 struct {
	seed          uint64
	segmentLength uint32
	segmentMask   uint32
	segCountLen   uint32
	fingerprints  []byte
}

// validFuse8 checks parameters read from a file so that every probe index
// stays inside fingerprints.
func validFuse8(segLen, segCount uint32, n int) bool {
	if segLen == 0 || segLen&(segLen-1) != 0 || segLen > 1<<18 || segCount == 0 {
		return false
	}
	total := (uint64(segCount) + 2) * uint64(segLen)
	return total == uint64(n) && uint64(segCount)*uint64(segLen) < 1<<32
}

func newFuse8(seed uint64, segLen, segCount uint32, fps []byte) fuse8 {
	return fuse8{seed: seed, segmentLength: segLen, segmentMask: segLen - 1, segCountLen: segCount * segLen, fingerprints: fps}
}

func murmur64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// probe returns the filter's 8-bit fingerprint of key and its three slots.
func (f *fuse8) probe(key uint64) (fp uint8, h0, h1, h2 uint32) {
	hash := murmur64(key + f.seed)
	fp = uint8(hash ^ hash>>32)
	hi, _ := bits.Mul64(hash, uint64(f.segCountLen))
	h0 = uint32(hi)
	h1 = h0 + f.segmentLength
	h2 = h1 + f.segmentLength
	h1 ^= uint32(hash>>18) & f.segmentMask
	h2 ^= uint32(hash) & f.segmentMask
	return
}

func (f *fuse8) contains(key uint64) bool {
	fp, h0, h1, h2 := f.probe(key)
	return fp^f.fingerprints[h0]^f.fingerprints[h1]^f.fingerprints[h2] == 0
}
