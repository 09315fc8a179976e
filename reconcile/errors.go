package reconcile

import (
	"errors"
	"fmt"
	"strings"
)

// Errors name what went wrong by the Options field, the file's role or the
// URL part at fault, never by a command-line flag: a program that embeds
// this package has no flags. The typed errors carry the facts as fields so
// that a command line can say the same thing in its own words (the
// fpdedup CLI names its flags; see cmd/fpdedup/reconcile_errors.go).
//
// Sentinel errors (compare with errors.Is):

// ErrWrongHash: the index does not hold SHA-256 fingerprints, which the
// online side is keyed by (a *WrongHashError says which hash it holds).
var ErrWrongHash = errors.New("the index's hash is not the online side's")

// ErrNeedRecords: the online side holds whole SHA-256 digests, which a
// 128-bit index cannot give; writing them needs the records (a
// *NeedRecordsError names the target).
var ErrNeedRecords = errors.New("the online side holds whole 32-byte SHA-256 digests, which a 128-bit index cannot give")

// An OptionError is an option, or a combination of options, that Run
// refuses before it opens anything: a caller's mistake, not the data's.
type OptionError struct {
	Rule   OptionRule
	Value  string // the value at fault (OnlineFormat), where one is
	Target string // the online side's redacted URL, where it matters (ApplyToFile, TTLNotRedisKeys)
	Err    error  // the underlying error (BadRecordsPolicy: ingest.ParseOnBad's)
}

// OptionRule is the rule an OptionError breaks.
type OptionRule int

// The rules Options must keep.
const (
	NoTarget               OptionRule = iota + 1 // Target is nil
	KeysNotFromFile                              // OnlineFormat "key" with a Redis or MySQL target
	UnknownOnlineFormat                          // OnlineFormat neither "fp" nor "key"
	TTLNotRedisKeys                              // TTL with a target other than Redis keys
	NegativeTTL                                  // TTL below zero
	ProbeFile                                    // Probe with a file: target
	ApplyToFile                                  // Apply or DryRun with a file: target
	BackfillWithoutRecords                       // Backfill without Records
	RecordsUnused                                // Records with neither Backfill nor Apply/DryRun
	BadRecordsPolicy                             // BadRecords is not a policy ingest.ParseOnBad knows
	CheckpointWithoutApply                       // Checkpoint without Apply
	NegativeRate                                 // Rate or ReadRate below zero
	BadRecordSpec                                // RecordSpec, completed from the index, is not a valid key spec
	BadTargetFPR                                 // TargetFPR not in [0, 1)
	TargetFPRNotBloom                            // TargetFPR with a target other than a bloom
	RebuildNotBloom                              // Rebuild with a target other than a bloom
	RebuildWithApply                             // Rebuild with Apply or Probe
	RebuildNeedsHashTag                          // Rebuild in a Cluster, the shard not in the template's hash tag (Value: the template)
	RebuildShardRange                            // Rebuild of a shard past the layout's (Value: it; Target: the shard count)
	RebuildNeedsMem                              // Rebuild with Mem under a shard and 64 MiB (Value: the bytes needed)
	ExtraNotListed                               // Extra with Probe or a bloom, which list nothing of the online side
	BackfillRows                                 // BackfillFormat converts records that are not Parquet rows (Err: ingest's)
	ProbeEtcd                                    // Probe with an etcd target, read whole at one revision
	ValueNotEtcd                                 // Value with a target other than etcd
	ValueUnused                                  // Value without Apply or DryRun
	BadValue                                     // Value is no template (Err: an *etcdkv.TemplateError)
	ValueNeedsRecords                            // Value names record fields (Value: them), and Records are not given
	ValueFieldsFormat                            // Value names record fields, and the records have none (Value: their format)
	ProbeRedisBF                                 // Probe of RedisBloom filters, which are audited from their dumps
	NeedKeyTexts                                 // RedisBloom filters whose items or router need the key texts, without Records (Value: item=, Target: route=)
	RouteAllWrites                               // Apply, DryRun or Rebuild of RedisBloom filters of route=all, which names no shard for an item
	RebuildParamsNotBF                           // RebuildCapacity or RebuildError without a Rebuild of RedisBloom filters
	BadRebuildParams                             // RebuildCapacity or RebuildError that BF.RESERVE refuses (Err: rbloom's)
)

func (e *OptionError) Error() string {
	switch e.Rule {
	case NoTarget:
		return "reconcile needs an online side (Options.Target)"
	case KeysNotFromFile:
		return `OnlineFormat "key" is for file: exports; Redis and MySQL hold hex fingerprints`
	case UnknownOnlineFormat:
		return fmt.Sprintf(`OnlineFormat must be "fp" or "key", not %q`, e.Value)
	case TTLNotRedisKeys:
		return "a TTL is for Redis keys (?match=PREFIX*): " + NoTTL(e.Value)
	case NegativeTTL:
		return "the TTL must be positive"
	case ProbeFile:
		return "probing needs a Redis or MySQL source: a file is read whole"
	case ApplyToFile:
		return fmt.Sprintf("Apply and DryRun write to a Redis or MySQL target, not to %s", e.Target)
	case BackfillWithoutRecords:
		return "a backfill needs Records: the records to pick the missing ones from"
	case RecordsUnused:
		return "Records are read for a Backfill or for Apply (whole digests); give one of them"
	case BadRecordsPolicy:
		return fmt.Sprintf("BadRecords: %v", e.Err)
	case BackfillRows:
		return e.Err.Error()
	case CheckpointWithoutApply:
		return "a Checkpoint goes with Apply"
	case NegativeRate:
		return "Rate and ReadRate must be positive"
	case BadRecordSpec:
		return e.Err.Error() // ingest's
	case BadTargetFPR:
		return "TargetFPR is a rate between 0 and 1"
	case TargetFPRNotBloom:
		return "TargetFPR sizes a bloom (?bloom=…): other online sides hold keys, not bits"
	case RebuildNotBloom:
		return "Rebuild is for a bloom's shards (?bloom=…)"
	case RebuildWithApply:
		return "Rebuild writes whole shards: not with Apply or Probe"
	case RebuildNeedsHashTag:
		if e.Target == "bf" {
			return fmt.Sprintf("Rebuild in a Redis Cluster needs the shard's name in the filters' hash tag (bf=l2:rb:{*}), so that a filter and its rebuilt copy share a slot; %s does not", e.Value)
		}
		return fmt.Sprintf("Rebuild in a Redis Cluster needs the shard number in the keys' hash tag (bloom=l2:bf:{*}), so that a shard and its rebuilt copy share a slot; %s does not", e.Value)
	case RebuildShardRange:
		return fmt.Sprintf("Rebuild of shard %s: the layout has %s (0 to %s-1)", e.Value, e.Target, e.Target)
	case RebuildNeedsMem:
		return fmt.Sprintf("Rebuild holds a shard in memory: Mem must be at least %s bytes", e.Value)
	case ExtraNotListed:
		return "Extra lists what only the online side holds, which a probe or a bloom cannot tell"
	case ProbeEtcd:
		return "probing is not for etcd: a prefix is read whole, in key order, at one revision"
	case ValueNotEtcd:
		return "a Value template is for an etcd target (etcd://…): the other stores' keys hold no value of ours"
	case ValueUnused:
		return "a Value template is what Apply or DryRun write: give one of them"
	case BadValue:
		return fmt.Sprintf("Value: %v", e.Err)
	case ValueNeedsRecords:
		return fmt.Sprintf("the Value template names fields of the records (%s): writing needs Records", e.Value)
	case ValueFieldsFormat:
		return fmt.Sprintf("the Value template names fields of the records, but %s records have none: read them as csv, tsv or jsonl", e.Value)
	case ProbeRedisBF:
		return "Probe is not for RedisBloom filters (?bf=…): each is read whole from its dump and every truth key tested"
	case NeedKeyTexts:
		return fmt.Sprintf("RedisBloom filters of %s and %s are audited from the keys' texts (the items are made of them, or the router hashes them), which the index does not hold: give Records, the records the index was made of", e.Value, e.Target)
	case RouteAllWrites:
		return "RedisBloom filters of route=all cannot be written or rebuilt: the router is not known, so no shard is for an item"
	case RebuildParamsNotBF:
		return "RebuildCapacity and RebuildError go with a Rebuild of RedisBloom filters (?bf=…)"
	case BadRebuildParams:
		return fmt.Sprintf("RebuildCapacity, RebuildError: %v", e.Err)
	}
	return fmt.Sprintf("OptionRule(%d)", int(e.Rule))
}

func (e *OptionError) Unwrap() error { return e.Err }

// A SuspectTargetError refuses writes to an online side where as many of
// the values read are not fingerprints as are: the URL most likely names
// the wrong keys (a prefix without its last '/', hex=64 over keys of 32
// hex digits, a match= or column too wide), and the truth's keys written
// there would land beside them, where no reader of the dedup store looks.
type SuspectTargetError struct {
	Target      string
	Bad, Values int64
	Samples     []string // some of the values that are not fingerprints, quoted
}

func (e *SuspectTargetError) Error() string {
	such := ""
	if len(e.Samples) > 0 {
		such = " (such as " + strings.Join(e.Samples[:min(len(e.Samples), 3)], ", ") + ")"
	}
	return fmt.Sprintf("%d of the %d values read from %s are not fingerprints%s: the URL most likely names the wrong keys (a prefix without its last '/', hex=64 over keys of 32 hex digits, a match= or column too wide), so nothing is written there; correct the URL, or clear what is not a fingerprint first",
		e.Bad, e.Values, e.Target, such)
}

// A WrongHashError is an index whose fingerprints are not SHA-256 ones,
// which the online side keys events by. It wraps ErrWrongHash.
type WrongHashError struct {
	Index  string   // the index's path
	Hash   string   // the hash its fingerprints were made with
	Key    []string // its key fields (none: whole records)
	KeySep string
}

// KeyText says what the index's keys are, as the online side hashes them.
func (e *WrongHashError) KeyText() string {
	if len(e.Key) == 0 {
		return "the whole record"
	}
	return fmt.Sprintf("%s joined by %q", strings.Join(e.Key, ","), e.KeySep)
}

func (e *WrongHashError) Error() string {
	return fmt.Sprintf("%v: %s holds %s fingerprints of its keys (%s), but the online side keys events by the SHA-256 of theirs; rebuild the index from the same records with SHA-256 fingerprints",
		ErrWrongHash, e.Index, e.Hash, e.KeyText())
}

func (e *WrongHashError) Unwrap() error { return ErrWrongHash }

// A NeedRecordsError: Apply or DryRun against an online side that holds
// whole 32-byte digests, without Records to compute them from. It wraps
// ErrNeedRecords.
type NeedRecordsError struct {
	Target string // the online side's redacted URL
}

func (e *NeedRecordsError) Error() string {
	return fmt.Sprintf("%v (%s): writing them needs Options.Records, to compute them from the original keys", ErrNeedRecords, e.Target)
}

func (e *NeedRecordsError) Unwrap() error { return ErrNeedRecords }

// A TooManyDigestsError: the whole digests Apply must write, collected
// from the records, do not fit in Options.Mem.
type TooManyDigestsError struct {
	Max int64 // the digests that fit: the plan's, but a sixteenth kept free (afterSlack)
}

func (e *TooManyDigestsError) Error() string {
	return fmt.Sprintf("more than %d whole digests to write do not fit in Options.Mem: apply a slice at a time (mysql …&where=, or a partitioned index)", e.Max)
}

// A TooManyKeyTextsError: the key texts of the keys Apply must write to
// RedisBloom filters, collected from the records, do not fit in half of
// Options.Mem.
type TooManyKeyTextsError struct {
	Max int64 // the bytes they may take: the plan's, but a sixteenth kept free (afterSlack)
}

func (e *TooManyKeyTextsError) Error() string {
	return fmt.Sprintf("the key texts to write take more than the %d bytes Options.Mem leaves them: apply a slice at a time (a partitioned index, or fewer records)", e.Max)
}

// NoTTL says why a kind of online side (Kind.String) takes no TTL.
func NoTTL(kind string) string {
	switch kind {
	case Etcd.String():
		return "etcd keys are written without a lease (an audit reports the keys bound to one)"
	case RedisSet.String():
		return "a set's members have no TTL of their own"
	case MySQL.String():
		return "table rows have no TTL"
	}
	return "its entries have no TTL of their own"
}
