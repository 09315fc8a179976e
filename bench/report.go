package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
)

// SchemaID names the layout of report.json; schema.json describes it. A
// change that breaks a reader of old reports (a renamed or removed field)
// bumps the number; adding a field does not.
const SchemaID = "fpdedup-bench/1"

// Report is every figure of one fpdedup-bench run, as report.json holds
// it. report.md and the charts are drawn from it alone, so an old
// report.json can be redrawn or compared.
type Report struct {
	Schema   string          `json:"schema"`
	Started  time.Time       `json:"started"`
	Seconds  float64         `json:"seconds"`
	Options  RunOptions      `json:"options"`
	Machine  Machine         `json:"machine"`
	Data     Data            `json:"data"`
	Peers    []Peer          `json:"peers"`
	Jobs     []Job           `json:"jobs"`
	Lookup   *Lookup         `json:"lookup"`
	Index    *fpstore.Info   `json:"index"`
	Bounded  *BoundedFigures `json:"dedup_bounded"`
	Memory   *Memory         `json:"memory,omitempty"` // the mem job's --mem sweep
	Scale    *Scale          `json:"scale,omitempty"`  // the scale job
	Capacity *Capacity       `json:"capacity"`
	Targets  []Target        `json:"targets"`
	Compare  *Comparison     `json:"compare,omitempty"`
	Notes    []string        `json:"notes"`
}

// RunOptions are the settings the figures depend on.
type RunOptions struct {
	Records        int64   `json:"records"`
	Seed           uint64  `json:"seed"`
	Repeat         float64 `json:"repeat"`
	Runs           int     `json:"runs"`
	WarmUp         bool    `json:"warm_up"` // one untimed run of every row first
	Quick          bool    `json:"quick"`
	Peers          string  `json:"peers"`
	BoundedMem     string  `json:"bounded_mem"`
	LookupWarm     int     `json:"lookup_warm"` // timed warm lookups
	LookupCold     int     `json:"lookup_cold"` // timed cold lookups
	InspectProbes  int     `json:"inspect_probes"`
	VolumeBytes    int64   `json:"volume_bytes"`
	IOBytesPerSec  int64   `json:"io_bytes_per_sec"`
	FpdedupThreads int     `json:"fpdedup_threads"` // the measured fpdedup's default --threads
	// Jobs is what the run measured, in order (absent in reports written
	// before jobs could be chosen: every default job).
	Jobs     []string `json:"jobs,omitempty"`
	MemSweep []string `json:"mem_sweep,omitempty"` // the mem job's --mem values
	// EtcdMem is fpdedup's --mem in the etcd jobs.
	EtcdMem string `json:"etcd_mem,omitempty"`
	// ScaleSizes is the scale job's index sizes in keys.
	ScaleSizes []int64 `json:"scale_sizes,omitempty"`
}

// Data is what the jobs read, all from Generate with one seed.
type Data struct {
	Records         int64   `json:"records"`
	Distinct        int64   `json:"distinct"`
	LinesBytes      int64   `json:"lines_bytes"`
	LinesZstBytes   int64   `json:"lines_zst_bytes"`
	CSVBytes        int64   `json:"csv_bytes"`
	CSVZstBytes     int64   `json:"csv_zst_bytes"`
	AbsentBytes     int64   `json:"absent_bytes"`
	BoundedRecords  int64   `json:"bounded_records"`
	BoundedDistinct int64   `json:"bounded_distinct"`
	BoundedBytes    int64   `json:"bounded_bytes"`
	BytesPerRecord  float64 `json:"bytes_per_record"`
	ZstdRatio       float64 `json:"zstd_ratio"` // CSV bytes / CSV.zst bytes
	// ParquetBytes is events.parquet, the CSV's records typed (zstd, row
	// groups of parquetRowGroup rows); ParquetRowGroupBytes what its largest row
	// group takes decoded (uncompressed bytes + 24 B a value), which a
	// Parquet copy's memory bound counts.
	ParquetBytes         int64   `json:"parquet_bytes,omitempty"`
	ParquetRowGroupBytes int64   `json:"parquet_row_group_bytes,omitempty"`
	GenSeconds           float64 `json:"gen_seconds"`
}

// Job is one task done by fpdedup and its peers on the same input, each
// row's runs interleaved with the others' so that every row saw the same
// machine.
type Job struct {
	Name       string   `json:"name"`
	Title      string   `json:"title"`
	Input      string   `json:"input"`
	InputBytes int64    `json:"input_bytes"` // plain bytes: MB/s is this over the wall time
	Units      int64    `json:"units"`       // records (fingerprints for merge) in the input
	Unit       string   `json:"unit"`
	Reference  string   `json:"reference"` // the row the ratios divide by
	Rows       []Row    `json:"rows"`
	Checks     []string `json:"checks"`
}

// Row is one tool's figures in a job.
type Row struct {
	Tool    string   `json:"tool"`
	Kind    string   `json:"kind"` // fpdedup, peer or floor
	Command string   `json:"command"`
	Status  string   `json:"status"` // ok, missing, skipped, failed, or gave up (a peer under a limit: rowSpec.givesUp)
	Why     string   `json:"why,omitempty"`
	Runs    []Sample `json:"runs"`
	Median  *Summary `json:"median,omitempty"`
	// Throughput of the median run: the job's input bytes and units.
	MBPerS    float64 `json:"mb_per_s,omitempty"`
	UnitsPerS float64 `json:"units_per_s,omitempty"`
	// Ratio is this row's median wall time over the reference row's: 2
	// means it took twice as long as fpdedup.
	Ratio float64 `json:"ratio,omitempty"`
	// RSSPerKey is the median peak RSS over the distinct keys of the input.
	RSSPerKey float64 `json:"rss_per_distinct_key,omitempty"`
	// PeakAnon is fpdedup's own sampled peak anonymous RSS (--stats-json).
	PeakAnon int64   `json:"peak_anon_bytes,omitempty"`
	Output   *Output `json:"output,omitempty"`
	Check    string  `json:"check,omitempty"`
	CheckOK  *bool   `json:"check_ok,omitempty"`
}

// Output is what the row's first run wrote to stdout.
type Output struct {
	Lines int64  `json:"lines"`
	Bytes int64  `json:"bytes"`
	Head  string `json:"head,omitempty"`
	Hash  string `json:"xxh3_128,omitempty"`
}

// BoundedFigures is dedup's bounded mode (--mem small enough that the
// seen-set spills to sorted runs, with a bloom in front of them): its
// bloom's false-positive rate measured against the formula.
type BoundedFigures struct {
	Status            string  `json:"status"` // ok, or why not measured
	Mem               string  `json:"mem"`
	Records           int64   `json:"records"`
	Mode              string  `json:"mode"`
	Runs              int64   `json:"runs"`
	BloomBytes        int64   `json:"bloom_bytes"`
	TableBytes        int64   `json:"table_bytes"`
	FilterProbes      int64   `json:"filter_probes"`
	FilterFPRMeasured float64 `json:"filter_fpr_measured"`
	FilterFPRFormula  float64 `json:"filter_fpr_formula"`
	FilterFPRInRun    float64 `json:"filter_fpr_in_run"`
}

// Lookup is the in-process latency of single Index.Contains calls.
type Lookup struct {
	Index     string      `json:"index"`
	Keys      uint64      `json:"keys"`
	FileBytes int64       `json:"file_bytes"`
	Warm      LookupPhase `json:"warm"`
	Cold      LookupPhase `json:"cold"`
}

// LookupPhase is warm (every page touched before) or cold (the file dropped
// from the page cache with POSIX_FADV_DONTNEED before each batch).
type LookupPhase struct {
	Status            string   `json:"status"` // ok or not measured
	Why               string   `json:"why,omitempty"`
	Present           *Latency `json:"present,omitempty"`
	Absent            *Latency `json:"absent,omitempty"`
	Batches           int      `json:"batches,omitempty"`
	ResidentAfterDrop float64  `json:"resident_after_drop,omitempty"` // fraction of the file's pages still cached
	MajorFaults       float64  `json:"major_faults_per_lookup,omitempty"`
	MinorFaults       float64  `json:"minor_faults_per_lookup,omitempty"`
}

// Latency is a distribution of single-lookup times.
type Latency struct {
	N      int        `json:"n"`
	MeanNs float64    `json:"mean_ns"`
	P50Ns  float64    `json:"p50_ns"`
	P90Ns  float64    `json:"p90_ns"`
	P99Ns  float64    `json:"p99_ns"`
	P999Ns float64    `json:"p999_ns"`
	MaxNs  float64    `json:"max_ns"`
	CDF    []Quantile `json:"cdf"`
}

// Quantile is one point of a latency CDF: a fraction Q of lookups took at
// most Ns.
type Quantile struct {
	Q  float64 `json:"q"`
	Ns float64 `json:"ns"`
}

// job returns the named job, or nil.
func (r *Report) job(name string) *Job {
	for i := range r.Jobs {
		if r.Jobs[i].Name == name {
			return &r.Jobs[i]
		}
	}
	return nil
}

// ran says whether the run measured the job: reports written before jobs
// could be chosen list none and measured every default job.
func (r *Report) ran(job string) bool {
	if len(r.Options.Jobs) == 0 {
		return slices.Contains(DefaultJobs, job)
	}
	return slices.Contains(r.Options.Jobs, job)
}

// row returns the named row, or nil.
func (j *Job) row(tool string) *Row {
	if j == nil {
		return nil
	}
	for i := range j.Rows {
		if j.Rows[i].Tool == tool {
			return &j.Rows[i]
		}
	}
	return nil
}

// ref is the job's reference row when it was measured.
func (j *Job) ref() *Row {
	if j == nil {
		return nil
	}
	r := j.row(j.Reference)
	if r == nil || r.Median == nil {
		return nil
	}
	return r
}

// ReadReport reads and validates a report.json (for --compare).
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := ValidateReport(b); err != nil {
		return nil, fmt.Errorf("%s: not a report of this version: %w", path, err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Files is what Write puts in the output directory, charts included.
var Files = []string{
	"report.json", "report.md",
	"throughput.svg", "throughput.png",
	"latency.svg", "latency.png",
	"rss.svg", "rss.png",
}

// Write puts report.json, report.md and the charts in dir, creating it.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	return r.WriteCharts(dir)
}
