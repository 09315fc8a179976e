package pipeline

import (
	"fmt"
	"math/bits"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/hugemem"
)

// seenShard is one shard of the stream's exact seen-set: open addressing
// over buckets of four 16-byte slots (one cache line), linear probing from
// bucket to bucket, in huge-page memory. One goroutine owns a shard, so it
// needs no locks. The probes are memory-latency bound (a dependent miss
// to RAM each), hence one line per probe, huge pages, and the prefetched
// groups of markShard.
//
// The all-zero fingerprint marks an empty slot; the one key that hashes to
// it is kept in a flag.
type seenShard struct {
	mem      []byte
	slots    []fpstore.Fingerprint
	buckets  uint64
	count    int
	zero     bool
	maxBytes int64 // growth stops here; grow then says so
}

const (
	slotsPerBucket = 4
	// maxLoad is when a shard doubles: linear probing over 4-slot
	// buckets stays around one line per probe up to ~90% full.
	maxLoad = 0.9
)

func newSeenShard(slots int, maxBytes int64) (*seenShard, error) {
	s := &seenShard{maxBytes: maxBytes}
	if err := s.alloc(max(slots, 1024)); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *seenShard) alloc(slots int) error {
	buckets := uint64((slots + slotsPerBucket - 1) / slotsPerBucket)
	mem, err := hugemem.Alloc(int(buckets) * slotsPerBucket * 16)
	if err != nil {
		return fmt.Errorf("cannot allocate the seen-set (%d slots): %w", slots, err)
	}
	s.mem, s.slots, s.buckets = mem, hugemem.Slice[fpstore.Fingerprint](mem), buckets
	return nil
}

func (s *seenShard) free() {
	hugemem.Free(s.mem)
	s.mem, s.slots = nil, nil
}

// bytes is the shard's memory.
func (s *seenShard) bytes() int64 { return int64(len(s.mem)) }

// home is fp's first bucket: a multiply-shift of bits independent of the
// shard choice, so bucket counts need not be powers of two and the table
// can be sized to the input.
func (s *seenShard) home(fp fpstore.Fingerprint) uint64 {
	hi, _ := bits.Mul64(fp.Lo, s.buckets)
	return hi
}

// insert adds fp and reports whether it was new. It does not grow.
func (s *seenShard) insert(fp fpstore.Fingerprint) bool {
	if fp == (fpstore.Fingerprint{}) {
		was := s.zero
		s.zero = true
		return !was
	}
	b := s.home(fp)
	for {
		line := s.slots[b*slotsPerBucket : b*slotsPerBucket+slotsPerBucket : b*slotsPerBucket+slotsPerBucket]
		for i := range line {
			switch line[i] {
			case fp:
				return false
			case fpstore.Fingerprint{}:
				line[i] = fp
				s.count++
				return true
			}
		}
		if b++; b == s.buckets {
			b = 0
		}
	}
}

// contains reports whether fp is in the shard.
func (s *seenShard) contains(fp fpstore.Fingerprint) bool {
	if fp == (fpstore.Fingerprint{}) {
		return s.zero
	}
	b := s.home(fp)
	for {
		line := s.slots[b*slotsPerBucket : b*slotsPerBucket+slotsPerBucket : b*slotsPerBucket+slotsPerBucket]
		for i := range line {
			switch line[i] {
			case fp:
				return true
			case fpstore.Fingerprint{}:
				return false
			}
		}
		if b++; b == s.buckets {
			b = 0
		}
	}
}

// needsRoom reports whether n more inserts could pass the load limit.
func (s *seenShard) needsRoom(n int) bool {
	return float64(s.count+n) > maxLoad*float64(len(s.slots))
}

// grow doubles the shard, or reports false when that would pass maxBytes.
func (s *seenShard) grow() (bool, error) {
	if 2*s.bytes() > s.maxBytes {
		return false, nil
	}
	old, oldMem := s.slots, s.mem
	if err := s.alloc(2 * len(old)); err != nil {
		return false, err
	}
	s.count = 0
	for _, fp := range old {
		if fp != (fpstore.Fingerprint{}) {
			s.insert(fp)
		}
	}
	hugemem.Free(oldMem)
	return true, nil
}

// each calls f with each of the shard's fingerprints, in no order: a
// bloom made over the table reads it in place (a copy of it would be as
// large as the table, on the Go heap, beside it).
func (s *seenShard) each(f func(fpstore.Fingerprint)) {
	if s.zero {
		f(fpstore.Fingerprint{})
	}
	for _, fp := range s.slots {
		if fp != (fpstore.Fingerprint{}) {
			f(fp)
		}
	}
}

// compact moves the shard's fingerprints to the front of its slots and
// returns them; the shard is unusable until reset.
func (s *seenShard) compact() []fpstore.Fingerprint {
	n := 0
	for _, fp := range s.slots {
		if fp != (fpstore.Fingerprint{}) {
			s.slots[n] = fp
			n++
		}
	}
	out := s.slots[:n]
	if s.zero {
		// The zero fingerprint marks empty slots; it goes in last (it is
		// the smallest, and the caller sorts).
		if n < len(s.slots) {
			out = s.slots[:n+1]
			out[n] = fpstore.Fingerprint{}
		}
	}
	return out
}

// reset empties the shard, keeping its memory.
func (s *seenShard) reset() {
	clear(s.slots)
	s.count, s.zero = 0, false
}
