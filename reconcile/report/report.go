package report

import (
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
	Etcd    *EtcdReport   `json:"etcd,omitempty"` // an etcd prefix: its revision, leases, compare-and-create
	// ReadBack is what was read online after the writes (Apply,
	// Rebuild): once a run has written, Agree rests on it.
	ReadBack *ReadBack `json:"read_back,omitempty"`
	Missing  int64     `json:"missing_online_after"` // only offline, after Apply: as read back
	Agree    bool      `json:"agree"`
	Timings  Timings   `json:"timings"`
	Memory   Memory    `json:"memory"`
	// Warnings are what the run went on despite (records keyed otherwise
	// than the index, under Options.RecordReading.Assume).
	Warnings []string `json:"warnings,omitempty"`

	// RedisBloom is an audit of the L2 kept as RedisBloom filters.
	RedisBloom *RedisBloomReport `json:"redisbloom,omitempty"`
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

// Counts are the reconciliation's figures. OnlyOnline is -1 when it was not
// measured (probe mode reads only what the index holds).
type Counts struct {
	Both        int64 `json:"both"`
	OnlyOffline int64 `json:"only_offline"`
	OnlyOnline  int64 `json:"only_online"`
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

// RecordStats are the figures of the pass over the records (reconcile's
// Options.Records).
type RecordStats struct {
	Inputs   int      `json:"inputs"`
	Format   string   `json:"format"`
	Key      []string `json:"key"`
	KeySep   string   `json:"key_sep,omitempty"`
	Header   bool     `json:"header"`
	Records  int64    `json:"records"` // data records (headers not counted), bad ones included
	Bad      int64    `json:"bad_records"`
	Bytes    int64    `json:"bytes"`
	Missing  int64    `json:"missing_records"` // records whose key is missing online (repeats included)
	Backfill string   `json:"backfill,omitempty"`
	Written  int64    `json:"backfill_records"`
	Digests  int64    `json:"digests,omitempty"`   // distinct whole digests collected for Apply
	KeyTexts int64    `json:"key_texts,omitempty"` // distinct key texts collected for Apply (RedisBloom filters)
	Seconds  float64  `json:"seconds"`
}

// ApplyStats are the figures of Apply or DryRun.
type ApplyStats struct {
	DryRun            bool    `json:"dry_run"`
	Target            string  `json:"target"`
	Keys              int64   `json:"keys"`                            // missing keys to write
	MissingAgain      int64   `json:"missing_again_before_checkpoint"` // of Keys: at or before the loaded checkpoint (an earlier run wrote them), deleted or lost since
	NotInRecords      int64   `json:"not_in_records"`                  // whole digests needed but no record had the key
	Written           int64   `json:"written"`                         // acknowledged by the server (or printed, dry run)
	Batches           int64   `json:"batches"`
	Retries           int64   `json:"retries"`
	Checkpoint        string  `json:"checkpoint,omitempty"`
	CheckpointLast    string  `json:"checkpoint_last,omitempty"`
	CheckpointRemoved bool    `json:"checkpoint_removed"`
	Seconds           float64 `json:"seconds"`
	KeysPerSecond     float64 `json:"keys_per_second"`
}

// BloomReport is what an audit found, shard by shard.
type BloomReport struct {
	Layout    string       `json:"layout"` // shards=N,bits=M,k=K
	Scheme    string       `json:"scheme"`
	Keys      string       `json:"keys"` // the key template
	Shards    []BloomShard `json:"shards"`
	Held      int64        `json:"held"`    // truth keys whose K bits are all set
	Missing   int64        `json:"missing"` // truth keys with a bit unset
	Passes    int          `json:"passes"`  // reads of the index (the bloom is read once)
	BytesRead int64        `json:"bytes_read"`
	// FPRNow is the rate a new key meets now, averaged over the shards
	// (fill^K each); FPRFormula the formula's for the truth's keys alone.
	FPRNow     float64 `json:"fpr_now"`
	FPRFormula float64 `json:"fpr_formula"`
	Sizing     Sizing  `json:"sizing"`
}

// BloomShard is one shard's figures.
type BloomShard struct {
	Shard   uint64 `json:"shard"`
	Key     string `json:"key"`
	Keys    int64  `json:"truth_keys"` // truth keys whose shard it is
	Missing int64  `json:"missing"`
	SetBits int64  `json:"set_bits"`
	// Rebuild: --rebuild-shard names the shard, so it was not audited;
	// Rebuilt: it was swapped in, and SetBits are those after.
	Rebuild    bool    `json:"rebuild,omitempty"`
	Rebuilt    bool    `json:"rebuilt,omitempty"`
	Fill       float64 `json:"fill"`
	FPRNow     float64 `json:"fpr_now"`     // fill^K
	FPRFormula float64 `json:"fpr_formula"` // the formula at truth_keys
}

// Sizing is what the layout would need to hold the truth's keys at the
// target rate: bits a shard, beside what the live one has.
type Sizing struct {
	TargetFPR    float64 `json:"target_fpr"`
	BitsNeeded   uint64  `json:"bits_per_shard_needed"`
	BytesNeeded  int64   `json:"bytes_needed"` // all shards
	BitsLive     uint64  `json:"bits_per_shard_live"`
	BytesLive    int64   `json:"bytes_live"`
	LiveFPRTruth float64 `json:"live_fpr_at_truth_keys"` // the formula for the live size
}

// RebuildStats are the figures of a rebuild of bloom shards
// (reconcile's Options.Rebuild).
type RebuildStats struct {
	DryRun       bool     `json:"dry_run"`
	Target       string   `json:"target"`
	Shards       []uint64 `json:"shards"`        // asked for
	Swapped      int64    `json:"swapped"`       // swapped in
	Rebuilt      int64    `json:"rebuilt"`       // swapped in, and read back whole after (Report.ReadBack)
	Keys         int64    `json:"truth_keys"`    // in the shards rebuilt
	BitsTruth    int64    `json:"truth_bits"`    // bits the truth sets in them
	BitsAfter    int64    `json:"bits_after"`    // set in the shards rebuilt, as read back (truth OR live)
	BytesWritten int64    `json:"bytes_written"` // the shards' bytes, chunks of zeros (left as the new key's) included
	Seconds      float64  `json:"seconds"`
}

// ReadBack is what was read from the online side after the run wrote to
// it, with read-only commands (EXISTS, SMISMEMBER, SELECT … IN, GETBIT;
// a bloom shard's STRLEN and BITCOUNT), never taken from what the writes
// answered (FAULTS.md row 23: a retried write answers "existed" for a key
// it created).
type ReadBack struct {
	Keys    int64    `json:"keys_probed"`   // the keys written, probed after the writes
	NotHeld int64    `json:"keys_not_held"` // of them, not found online
	Samples []string `json:"not_held_samples"`
	// Shards are the bloom shards written, each read back whole (its
	// segments together); Short counts those that fall short.
	Shards []ShardReadBack `json:"shards,omitempty"`
	Short  int64           `json:"shards_short"`
	// BytesRead are the bytes of the shards read back whole to test the
	// keys written to them offline (ShardReadBack.DumpRead).
	BytesRead int64   `json:"bytes_read,omitempty"`
	Passes    int     `json:"passes,omitempty"` // reads of a part of them that memory held
	Seconds   float64 `json:"seconds"`
}

// Holds reports whether what was read back holds what was written (a nil
// ReadBack: nothing was written).
func (r *ReadBack) Holds() bool { return r == nil || r.NotHeld == 0 && r.Short == 0 }

// ShardReadBack is a bloom shard read back after the writes: its length
// and the bits set in it, against what it must hold at least: the
// truth's bits (a rebuild) or the bits the audit read before (--apply,
// which only sets bits). Less is bits lost after they were written: the
// shard deleted, flushed, or its server restarted without them.
type ShardReadBack struct {
	Shard     uint64 `json:"shard"`
	Key       string `json:"key"`
	Type      string `json:"type"` // "string"; "none": missing
	Bytes     int64  `json:"bytes"`
	WantBytes int64  `json:"want_bytes"`
	Bits      int64  `json:"bits_set"`
	WantBits  int64  `json:"want_bits"` // at least
	// WantFrom says what WantBits is: "truth" or "audit".
	WantFrom string `json:"want_from"`
	// A RedisBloom filter: the items the module counts, and at least
	// those the audit read (--apply only adds); its header must extend
	// the one the audit read (its sub-filters as they were, grown).
	Items     uint64 `json:"items,omitempty"`
	WantItems uint64 `json:"want_items,omitempty"`
	Short     bool   `json:"short"`
	// DumpRead: the keys written to it were tested in its dump, read
	// whole after the writes, instead of asked for one by one: cheaper
	// for many keys in a small filter (a RedisBloom filter).
	DumpRead bool `json:"dump_read,omitempty"`
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

// ReadMemory reads peak RSS and the current anonymous and file-backed RSS
// from /proc/self/status (Linux; zeros elsewhere).
func ReadMemory(budget int64) Memory {
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
