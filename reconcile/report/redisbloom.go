package report

// RedisBloomReport is what an audit of RedisBloom filters (BF.*) found,
// shard by shard: each filter's dump read, every truth key tested as
// BF.EXISTS would, those not found asked again with BF.MEXISTS.
type RedisBloomReport struct {
	Template string `json:"template"` // the filters' key, * for the shard
	Route    string `json:"route"`
	Item     string `json:"item"`
	// TruthFrom says where the items tested come from: "index" (item=fp
	// with route=all: the index's fingerprints) or "records" (the key
	// texts of --records, whose fingerprints the index holds).
	TruthFrom string            `json:"truth_from"`
	Shards    []RedisBloomShard `json:"shards"`
	TruthKeys int64             `json:"truth_keys"` // the index's fingerprints tested
	// Unaudited are the index's fingerprints whose key text no record
	// gave (TruthFrom "records"): not tested, so the sides are not said to
	// agree while there are any.
	Unaudited         int64 `json:"unaudited"`
	Records           int64 `json:"records_read"`         // records read for their key texts (bad ones aside)
	RecordsNotInIndex int64 `json:"records_not_in_index"` // of them, keys whose fingerprint the index does not hold
	Held              int64 `json:"held"`
	Missing           int64 `json:"missing"`
	// Rechecked are keys not in the dump as read but held when asked
	// again (RedisBloomShard.AskedAgain): added while it was read.
	Rechecked int64 `json:"rechecked"`
	Passes    int   `json:"passes"` // reads of a part of a filter that memory held, tested against the shard's keys
	BytesRead int64 `json:"bytes_read"`
	// ItemsFromAudit: the items --apply wrote were taken from what the
	// audit read of the records, not read from them again (no --backfill
	// or quarantine asked for a second pass).
	ItemsFromAudit bool `json:"items_from_audit,omitempty"`
	// TargetFPR is the rate the shards are sized for (Options.TargetFPR;
	// 0: each its own, RedisBloomShard.SizedFor).
	TargetFPR float64 `json:"target_fpr,omitempty"`
}

// The ways RedisBloomShard.AskedAgain says.
const (
	AskedAgainMEXISTS = "BF.MEXISTS"
	AskedAgainDump    = "dump read again"
	// The dump read again, and the keys still not found asked with
	// BF.MEXISTS: the filter grew a sub-filter while it was read.
	AskedAgainDumpMEXISTS = "dump read again, then BF.MEXISTS"
)

// RedisBloomShard is one shard's filter, as its dump was read.
type RedisBloomShard struct {
	Shard     string `json:"shard"` // the router's name
	Key       string `json:"key"`
	Items     uint64 `json:"items"`      // the module's count (BF.INFO "Number of items inserted")
	TruthKeys int64  `json:"truth_keys"` // routed to it (route=all: every truth key)
	Held      int64  `json:"held"`
	// Missing are its truth keys not held (route=all: 0; the report's
	// Missing counts the keys no shard holds).
	Missing   int64 `json:"missing"`
	Rechecked int64 `json:"rechecked"`
	// AskedAgain is how the keys not found in the dump were asked again,
	// whichever costs less: each with BF.MEXISTS (AskedAgainMEXISTS), or
	// the whole dump read again and tested offline (AskedAgainDump: many
	// keys not found in a small filter, one flushed or emptied); empty
	// when every key was found.
	AskedAgain string                `json:"asked_again,omitempty"`
	Capacity   uint64                `json:"capacity"`     // BF.INFO "Capacity"
	Memory     uint64                `json:"memory_bytes"` // BF.INFO "Size"
	Expansion  uint32                `json:"expansion"`
	NonScaling bool                  `json:"nonscaling,omitempty"`
	SubFilters []RedisBloomSubFilter `json:"sub_filters"`
	// FPRNow is the rate an absent item meets now, from every
	// sub-filter's fill; TargetFPR BF.RESERVE's error rate.
	FPRNow    float64 `json:"fpr_now"`
	TargetFPR float64 `json:"target_fpr"`
	// Room is how many more new items the last sub-filter takes before
	// the module appends Next (none for NONSCALING: it refuses them).
	Room   uint64               `json:"items_until_next_sub_filter"`
	Next   *RedisBloomSubFilter `json:"next_sub_filter,omitempty"`
	Passes int                  `json:"passes"`
	// Sizing: the filter its truth keys need for a false-positive rate
	// within SizedFor (Options.TargetFPR, else TargetFPR): BF.RESERVE's
	// capacity at that error, its expansion and scaling kept, and the
	// memory it takes (rbloom.Need); 0 when it was not read.
	SizedFor     float64 `json:"sized_for_fpr"`
	NeedCapacity uint64  `json:"need_capacity"`
	NeedMemory   uint64  `json:"need_memory_bytes"`
	// Rebuild: --rebuild-shard names it, so it was not audited; Rebuilt:
	// it was swapped in and read back equal to what was built.
	Rebuild bool `json:"rebuild,omitempty"`
	Rebuilt bool `json:"rebuilt,omitempty"`
}

// RedisBloomSubFilter is one sub-filter of a chain.
type RedisBloomSubFilter struct {
	Capacity uint64  `json:"capacity"`
	Items    uint64  `json:"items"`
	Error    float64 `json:"error"`
	Hashes   uint32  `json:"hashes"`
	Bytes    uint64  `json:"bytes"`
	Fill     float64 `json:"fill"` // of its bits below its modulus; 0 for Next
}
