package reconcile

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
)

// Report is the figures of a run: what a caller writes as its JSON report
// (the CLI adds its error message and exit code) and makes its summary of.
type Report struct {
	Command string        `json:"command"`
	Version string        `json:"version,omitempty"`
	Started string        `json:"started"`
	Index   IndexInfo     `json:"index"`
	Online  OnlineInfo    `json:"online"`
	Mode    string        `json:"mode"`
	Counts  Counts        `json:"counts"`
	Samples Samples       `json:"samples"`
	Outputs Outputs       `json:"outputs"`
	Records *RecordStats  `json:"records,omitempty"`
	Apply   *ApplyStats   `json:"apply,omitempty"`
	Bloom   *BloomReport  `json:"bloom,omitempty"` // an audit of the L2 bloom
	Rebuild *RebuildStats `json:"rebuild,omitempty"`
	Missing int64         `json:"missing_online_after"` // only offline, after Apply
	Agree   bool          `json:"agree"`
	Timings Timings       `json:"timings"`
	Memory  Memory        `json:"memory"`
	// Warnings are what the run went on despite (records keyed otherwise
	// than the index, under Options.RecordReading.Assume).
	Warnings []string `json:"warnings,omitempty"`
}

// IndexInfo describes the truth index.
type IndexInfo struct {
	Path         string   `json:"path"`
	Fingerprints uint64   `json:"fingerprints"`
	Hash         string   `json:"hash"`
	Key          []string `json:"key"`
	KeySep       string   `json:"key_sep"`
	Range        string   `json:"range"`
}

// OnlineInfo describes the online side and how it was read.
type OnlineInfo struct {
	Source       string   `json:"source"` // redacted URL
	Kind         string   `json:"kind"`
	Wide         bool     `json:"whole_digests"`
	Values       int64    `json:"values_read"`
	Distinct     int64    `json:"distinct"`
	Repeats      int64    `json:"repeats"`
	OutsideRange int64    `json:"outside_index_range"`
	Bad          int64    `json:"not_fingerprints"`
	BadSamples   []string `json:"not_fingerprint_samples"`
	Expected     int64    `json:"expected"` // COUNT(*) or SCARD, -1 unknown
	CountChecked bool     `json:"count_checked"`
	Retries      int      `json:"retries"`
	Note         string   `json:"note,omitempty"`
	Spills       int64    `json:"sorter_spills"`
	Masters      []string `json:"cluster_masters,omitempty"` // Redis Cluster: the masters scanned
}

// Samples are the first fingerprints (in order) of each side.
type Samples struct {
	OnlyOffline []string `json:"only_offline"`
	OnlyOnline  []string `json:"only_online"`
}

// Outputs are the files written.
type Outputs struct {
	Missing  string `json:"missing,omitempty"`
	Extra    string `json:"extra,omitempty"`
	Backfill string `json:"backfill,omitempty"`
}

// Timings are wall-clock seconds per phase.
type Timings struct {
	Compare          float64 `json:"compare_seconds"`
	OnlineRead       float64 `json:"online_read_seconds"`
	Records          float64 `json:"records_seconds"`
	Apply            float64 `json:"apply_seconds"`
	Total            float64 `json:"total_seconds"`
	KeysPerSecond    float64 `json:"keys_per_second"` // max(offline, online) keys compared per second
	OnlinePerSecond  float64 `json:"online_values_per_second"`
	OfflinePerSecond float64 `json:"offline_keys_per_second"`
}

// Memory is the process's memory at the end: peak RSS, and the current
// anonymous and file-backed (mapped indexes) parts.
type Memory struct {
	PeakRSS int64 `json:"peak_rss_bytes"`
	Anon    int64 `json:"rss_anon_bytes"`
	File    int64 `json:"rss_file_bytes"`
	Budget  int64 `json:"budget_bytes"`
}

// marshal indents and keeps & < > as they are (URLs read better).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// readMemory reads peak RSS and the current anonymous and file-backed RSS
// from /proc/self/status (Linux; zeros elsewhere).
func readMemory(budget int64) Memory {
	m := Memory{Budget: budget}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmHWM":
			m.PeakRSS = kb << 10
		case "RssAnon":
			m.Anon = kb << 10
		case "RssFile":
			m.File = kb << 10
		}
	}
	return m
}
