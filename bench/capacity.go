package bench

import (
	"fmt"
	"math"
)

// Capacity estimates what a day of --volume takes, from this run's medians
// and the assumptions it lists. It is arithmetic on measured rates, not a
// measurement at that scale: Assumptions say what would make it wrong.
type Capacity struct {
	VolumeBytes    float64        `json:"volume_bytes"`
	IOBytesPerSec  float64        `json:"io_bytes_per_sec"`
	BytesPerRecord float64        `json:"bytes_per_record"`
	DistinctRatio  float64        `json:"distinct_ratio"`
	ZstdRatio      float64        `json:"zstd_ratio"`
	BytesPerKey    float64        `json:"bytes_per_key"`
	RecordsPerDay  float64        `json:"records_per_day"`
	DistinctPerDay float64        `json:"distinct_per_day"`
	DayIndexBytes  float64        `json:"day_index_bytes"`
	Steps          []CapacityStep `json:"steps"`
	Merge          *CapacityMerge `json:"merge,omitempty"`
	Assumptions    []string       `json:"assumptions"`
}

// CapacityStep is one way of processing the day, one machine like this one
// doing it alone, and how many such machines share it in the partitioned
// mode (each takes 1/N of the input).
type CapacityStep struct {
	Job                  string  `json:"job"`
	Tool                 string  `json:"tool"`
	Input                string  `json:"input"`                  // plain or zstd
	MeasuredBytesPerSec  float64 `json:"measured_bytes_per_sec"` // plain bytes/s, input in the page cache
	CPUSecondsPerGB      float64 `json:"cpu_seconds_per_gb"`
	IOCapBytesPerSec     float64 `json:"io_cap_bytes_per_sec"` // plain bytes/s the assumed I/O delivers
	EffectiveBytesPerSec float64 `json:"effective_bytes_per_sec"`
	Bound                string  `json:"bound"` // cpu or io: the smaller of the two rates
	HoursOnThisMachine   float64 `json:"hours_on_this_machine"`
	Machines             int     `json:"machines"`           // flat out: ceil(hours / 24)
	MachinesHalfLoad     int     `json:"machines_half_load"` // at 50% average load
}

// CapacityMerge is the step after the partitioned build: folding the N
// slice indexes into the day's index on one machine.
type CapacityMerge struct {
	FingerprintsPerSec float64 `json:"fingerprints_per_sec"` // measured k-way merge
	Hours              float64 `json:"hours"`                // k-way merge of the day's slices
	StitchHours        float64 `json:"stitch_hours"`         // prefix partitions: a copy at I/O speed
	FitsInADay         bool    `json:"fits_in_a_day"`
}

func estimateCapacity(r *Report) *Capacity {
	d := r.Data
	c := &Capacity{
		VolumeBytes:    float64(r.Options.VolumeBytes),
		IOBytesPerSec:  float64(r.Options.IOBytesPerSec),
		BytesPerRecord: d.BytesPerRecord,
		ZstdRatio:      d.ZstdRatio,
		Steps:          []CapacityStep{},
	}
	if d.Records > 0 {
		c.DistinctRatio = float64(d.Distinct) / float64(d.Records)
	}
	if r.Index != nil {
		c.BytesPerKey = r.Index.BytesPerKey
	}
	if c.BytesPerRecord > 0 {
		c.RecordsPerDay = c.VolumeBytes / c.BytesPerRecord
	}
	c.DistinctPerDay = c.RecordsPerDay * c.DistinctRatio
	c.DayIndexBytes = c.DistinctPerDay * c.BytesPerKey

	for _, s := range []struct{ job, input string }{
		{"build", "plain"}, {"dedup-lines", "plain"}, {"dedup-csv", "plain"}, {"dedup-zstd", "zstd"},
	} {
		j := r.job(s.job)
		ref := j.ref()
		if ref == nil {
			continue
		}
		st := CapacityStep{Job: s.job, Tool: ref.Tool, Input: s.input, MeasuredBytesPerSec: ref.MBPerS * 1e6}
		if j.InputBytes > 0 {
			st.CPUSecondsPerGB = ref.Median.CPUS / (float64(j.InputBytes) / 1e9)
		}
		st.IOCapBytesPerSec = c.IOBytesPerSec
		if s.input == "zstd" {
			st.IOCapBytesPerSec *= c.ZstdRatio
		}
		st.EffectiveBytesPerSec, st.Bound = st.MeasuredBytesPerSec, "cpu"
		if st.IOCapBytesPerSec > 0 && st.IOCapBytesPerSec < st.EffectiveBytesPerSec {
			st.EffectiveBytesPerSec, st.Bound = st.IOCapBytesPerSec, "io"
		}
		if st.EffectiveBytesPerSec > 0 {
			st.HoursOnThisMachine = c.VolumeBytes / st.EffectiveBytesPerSec / 3600
			st.Machines = int(math.Ceil(st.HoursOnThisMachine / 24))
			st.MachinesHalfLoad = int(math.Ceil(st.HoursOnThisMachine / 12))
		}
		c.Steps = append(c.Steps, st)
	}

	if m := r.job("merge").ref(); m != nil && m.UnitsPerS > 0 {
		cm := &CapacityMerge{FingerprintsPerSec: m.UnitsPerS}
		secs := c.DistinctPerDay / m.UnitsPerS
		if c.IOBytesPerSec > 0 {
			secs = math.Max(secs, 2*c.DayIndexBytes/c.IOBytesPerSec)
			cm.StitchHours = 2 * c.DayIndexBytes / c.IOBytesPerSec / 3600
		}
		cm.Hours = secs / 3600
		cm.FitsInADay = cm.Hours < 24
		c.Merge = cm
	}

	c.Assumptions = []string{
		fmt.Sprintf("--volume (%s a day) is uncompressed event bytes like the generated ones: %.1f bytes a record, %.0f%% of records repeats (%.0f%% distinct). Everything after hashing scales with the distinct keys: fewer distinct, less work.",
			siBytes(c.VolumeBytes), c.BytesPerRecord, 100*(1-c.DistinctRatio), 100*c.DistinctRatio),
		"The rates are this run's medians with the input in the page cache, on all of this machine's cores; the tool runs alone on the machine.",
		fmt.Sprintf("A machine reads its input at %s/s at most (--io-bandwidth: local NVMe or network storage); a step runs at the smaller of its measured rate and that.", siBytes(c.IOBytesPerSec)),
		fmt.Sprintf("zstd input is compressed %.2f:1, as the generated CSV at zstd level 3; its I/O carries 1/%.2f of the plain bytes and the measured rate includes the decompression.", c.ZstdRatio, c.ZstdRatio),
		"Partitioned mode (docs/SCALE-OUT.md): N machines each take 1/N of the day's input (split by input, or by key prefix when the input arrives split by key) and build or dedup their share; machines = ceil(hours on this machine / 24) flat out, twice that at 50% average load to absorb peaks and reruns.",
		fmt.Sprintf("The day's index is distinct keys × %.1f bytes/key (the measured index) = %s; each machine needs local disk for its share's index and spilled runs.", c.BytesPerKey, siBytes(c.DayIndexBytes)),
		"One machine then merges the N slice indexes into the day's (k-way, at the measured merge rate of the two halves, or at the I/O rate reading and writing the day's index, whichever is slower); with prefix partitions the final step is a stitch that copies at I/O speed.",
	}
	if d.Records < DefaultRecords {
		c.Assumptions = append(c.Assumptions, fmt.Sprintf("This run had only %s records: process start-up and warm-up weigh on every rate, so the estimate is pessimistic; run with --records 10M or more to size machines.", commas(d.Records)))
	}
	return c
}

// siBytes prints a byte count in powers of 1000, as volumes are quoted.
func siBytes(b float64) string {
	for _, u := range []string{"B", "kB", "MB", "GB", "TB", "PB"} {
		if math.Abs(b) < 1000 || u == "PB" {
			if u == "B" {
				return fmt.Sprintf("%.0f B", b)
			}
			return fmt.Sprintf("%.3g %s", b, u)
		}
		b /= 1000
	}
	return ""
}
