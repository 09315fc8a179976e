package fpstore

import (
	"math/rand/v2"
)

// Info describes an index for inspect. Hex fingerprints and snake_case
// keys, as --json prints them.
type Info struct {
	Path              string   `json:"path"`
	FormatVersion     uint32   `json:"format_version"`
	Hash              string   `json:"hash"`
	HashBits          int      `json:"hash_bits"`
	Key               []string `json:"key"`
	KeySep            string   `json:"key_sep"`
	Partition         string   `json:"partition"`
	Fingerprints      uint64   `json:"fingerprints"`
	First             string   `json:"first,omitempty"`
	Last              string   `json:"last,omitempty"`
	Segments          int      `json:"segments"`
	SegmentMax        int      `json:"segment_max"`
	SmallestSegment   uint64   `json:"smallest_segment"`
	LargestSegment    uint64   `json:"largest_segment"`
	FileBytes         int64    `json:"file_bytes"`
	BytesPerKey       float64  `json:"bytes_per_key"`
	DirectoryBytes    uint64   `json:"directory_bytes"`
	FilterKind        string   `json:"filter_kind"`
	FilterBytes       uint64   `json:"filter_bytes"`
	FilterBitsPerKey  float64  `json:"filter_bits_per_key"`
	FilterFPRTheory   float64  `json:"filter_fpr_theory"`
	FilterFPRMeasured float64  `json:"filter_fpr_measured"`
	FilterProbes      int      `json:"filter_probes"`
}

// Info gathers the index's description; it measures the filters' false
// positive rate on probes random fingerprints drawn from a fixed seed (so
// two runs on the same index print the same figure), counting only probes
// that are really absent and that reach a segment.
func (x *Index) Info(probes int) (Info, error) {
	in := Info{
		Path:          x.path,
		FormatVersion: x.foot.version,
		Hash:          x.foot.spec.Hash,
		HashBits:      128,
		Key:           append([]string{}, x.foot.spec.Key...),
		KeySep:        x.foot.spec.KeySep,
		Partition:     x.foot.rng.String(),
		Fingerprints:  x.foot.fingerprints,
		Segments:      len(x.foot.segments),
		SegmentMax:    SegmentMax,
		FileBytes:     x.size,
		FilterKind:    "blocked_bloom512",
		FilterProbes:  probes,
	}
	if in.Fingerprints > 0 {
		in.BytesPerKey = float64(x.size) / float64(in.Fingerprints)
	}
	segs := x.foot.segments
	if len(segs) > 0 {
		in.First, in.Last = segs[0].first.String(), segs[len(segs)-1].last.String()
		in.SmallestSegment = segs[0].count
	}
	var width float64
	// The probes are lookups, of which the share in the index's range
	// reach a segment: counted first, so that the segments' loading
	// below reads ahead too when they are many.
	x.countLookups(max(probes, 0) >> min(x.foot.rng.Bits, 63))
	err := x.guard(func() error {
		for i, ref := range segs {
			in.SmallestSegment = min(in.SmallestSegment, ref.count)
			in.LargestSegment = max(in.LargestSegment, ref.count)
			s, err := x.segment(i)
			if err != nil {
				return err
			}
			in.DirectoryBytes += uint64(4 * len(s.dir))
			in.FilterBytes += uint64(64 * len(s.filter))
			// The formula at each segment's fill, weighted by the share
			// of random probes that land in it (its prefix width).
			w := 1 / float64(uint64(1)<<min(ref.node.Bits, 63))
			in.FilterFPRTheory += w * BloomFPR(len(s.fps), len(s.filter))
			width += w
		}
		if width > 0 {
			in.FilterFPRTheory /= width
		}
		if in.Fingerprints == 0 {
			return nil
		}
		in.FilterBitsPerKey = float64(8*in.FilterBytes) / float64(in.Fingerprints)
		r := rand.New(rand.NewPCG(0x66706465, 0x64757021))
		var reached, positives int
		for k := 0; k < probes; k++ {
			fp := Fingerprint{r.Uint64(), r.Uint64()}
			i := x.find(fp)
			if i < 0 {
				continue
			}
			s, err := x.segment(i)
			if err != nil {
				return err
			}
			member, err := s.contains(fp)
			if err != nil {
				return err
			}
			if member {
				continue
			}
			reached++
			if ok, _ := s.mayContain(fp); ok {
				positives++
			}
		}
		if reached > 0 {
			in.FilterFPRMeasured = float64(positives) / float64(reached)
		}
		return nil
	})
	return in, err
}
