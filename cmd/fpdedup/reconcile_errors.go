package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/reconcile"
)

// The reconcile package names options by their reconcile.Options fields,
// files by their role and the online side as "the online URL"; its typed
// errors carry the facts as fields. Here they are said in the CLI's words,
// with its flags (--online, --apply, --checkpoint, …).

// reconcileError is an error of reconcile, said with the CLI's flags.
// Unwrap gives the package's error, for the exit-code table and hints.
type reconcileError struct {
	msg string
	err error
}

func (e *reconcileError) Error() string { return e.msg }
func (e *reconcileError) Unwrap() error { return e.err }

// reconcileErr wraps err, from reconcile.ParseURL or reconcile.Run, in
// the CLI's words; nil stays nil.
func reconcileErr(err error) error {
	if err == nil {
		return nil
	}
	return &reconcileError{msg: say(err), err: err}
}

// reconcileUsage: err is a mistake in the command line (a bad --online
// URL, options that do not go together), which exits 2 with the usage
// hint.
func reconcileUsage(err error) bool {
	var oe *reconcile.OptionError
	var ue *reconcile.URLError
	return errors.As(err, &oe) || errors.As(err, &ue) || errors.Is(err, reconcile.ErrNoPath)
}

// sayReconcileTyped says one of the package's typed errors (not what it
// wraps) in the CLI's words.
func sayReconcileTyped(err error) (string, bool) {
	if err == reconcile.ErrNoPath {
		return "--online file:PATH needs a path", true
	}
	switch e := err.(type) {
	case *reconcile.OptionError:
		return sayOptionError(e), true
	case *reconcile.URLError:
		switch {
		case e.PasswordEnv != "":
			return fmt.Sprintf("--online %s holds a password, which would be visible in ps and shell history: remove it and put it in $%s or a --password-file", e.URL, e.PasswordEnv), true
		case e.URL == "":
			return "--online: " + e.Reason, true
		}
		return fmt.Sprintf("--online %s: %s", e.URL, e.Reason), true
	case *reconcile.WrongHashError:
		return fmt.Sprintf("%v: %s holds %s fingerprints of its keys (%s), but the online side keys events by the SHA-256 of theirs; rebuild the index from the same records with --hash sha256 (fpdedup build --hash sha256 -o %s …)",
			reconcile.ErrWrongHash, e.Index, e.Hash, e.KeyText(), filepath.Base(e.Index)), true
	case *reconcile.NeedRecordsError:
		return fmt.Sprintf("%v (%s): --apply needs --records FILE… to compute them from the original keys", reconcile.ErrNeedRecords, e.Target), true
	case *reconcile.ProbeWideError:
		return fmt.Sprintf("%s names keys by whole SHA-256 digests (hex=64), which a 128-bit index cannot probe: reconcile without --probe (SCAN and merge-join) instead", e.Target), true
	case *reconcile.NotFingerprintError:
		return fmt.Sprintf("%s:%d: not a 32- or 64-digit hex fingerprint: %q (with --online-format key each line is a key)", e.Name, e.Line, e.Text), true
	case *reconcile.TooManyKeyTextsError:
		return fmt.Sprintf("the key texts to write take more than the %s --mem leaves them: apply a slice at a time (a partitioned index, or fewer --records)", units.FormatBytes(e.Max)), true
	case *reconcile.NoParamsError:
		return fmt.Sprintf("RedisBloom shard %s: filter %q does not exist, so its capacity and error rate are not known: give --capacity and --error for its rebuild", e.Shard, e.Key), true
	case *reconcile.RebuildMemError:
		return fmt.Sprintf("RedisBloom shard %s: the filter rebuilt for %q outgrows --mem %s (a shard's filter is built whole in memory): give more", e.Shard, e.Key, units.FormatBytes(e.Mem)), true
	case *reconcile.AuditMemError:
		return fmt.Sprintf("--mem is too small for a RedisBloom audit of these filters and keys: give --mem %s or more", units.FormatBytes(e.Need)), true
	case *reconcile.TooManyDigestsError:
		return fmt.Sprintf("more than %d whole digests to write do not fit in --mem: apply a slice at a time (mysql …&where=, or a partitioned index)", e.Max), true
	case *reconcile.FileError:
		return e.Say(reconcileFileFlag(e.File), say(e.Err)), true
	case *reconcile.ProbeError:
		return e.Say(say(e.Err)), true
	case *reconcile.UnsavedCheckpointError:
		return fmt.Sprintf("%s (and the checkpoint could not be saved: %s)", say(e.Err), say(e.Save)), true
	case reconcile.Scrubbed:
		return e.Scrub(say(e.Unwrap())), true
	case *reconcile.CheckpointError:
		switch e.Problem {
		case reconcile.NotACheckpoint:
			return fmt.Sprintf("--checkpoint %s is not an fpdedup reconcile checkpoint (remove it to start over)", e.Path), true
		case reconcile.OtherRun:
			return fmt.Sprintf("--checkpoint %s belongs to another run (%s, index of %d fingerprints), not this one (%s, %d): remove it or name another file",
				e.Path, e.FileOnline, e.FileFingerprints, e.Online, e.Fingerprints), true
		case reconcile.BadLast:
			return fmt.Sprintf("--checkpoint %s: bad last fingerprint %q", e.Path, e.Last), true
		}
	case *reconcile.WriteError:
		return e.Text(say(e.Err)), true
	case *reconcile.ApplyInterruptedError:
		return sayApplyInterrupted(e), true
	case *reconcile.ReadBackError:
		return fmt.Sprintf("--apply wrote %d keys to %s, but reading them back failed after %d: %s; rerun without --apply to see what it holds", e.Written, e.Target, e.Probed, say(e.Err)), true
	case *reconcile.RebuiltShortError:
		return e.Say("rerun --rebuild-shard"), true
	case *reconcile.SnapshotError:
		return strings.Replace(e.Error(), "raise the retries", "raise --retries", 1), true
	case *reconcile.EtcdLimitError:
		return e.Error() + ": raise it (a refused transaction is sent again in halves down to this one key, whatever --batch, so a smaller --batch cannot help)", true
	case *reconcile.TooManyValuesError:
		return fmt.Sprintf("the --value values of more than %d keys to write (%d bytes) do not fit in a quarter of --mem: give more --mem, or write a slice at a time (a partitioned index)", e.Values, e.Bytes), true
	}
	return "", false
}

func sayOptionError(e *reconcile.OptionError) string {
	switch e.Rule {
	case reconcile.NoTarget:
		return "reconcile needs --online URL"
	case reconcile.KeysNotFromFile:
		return "--online-format key is for file: exports; Redis and MySQL hold hex fingerprints"
	case reconcile.UnknownOnlineFormat:
		return fmt.Sprintf("--online-format must be fp or key, not %q", e.Value)
	case reconcile.TTLNotRedisKeys:
		return "--ttl is for Redis keys (?match=PREFIX*): " + reconcile.NoTTL(e.Value)
	case reconcile.NegativeTTL:
		return "--ttl must be positive"
	case reconcile.ProbeFile:
		return "--probe needs a Redis or MySQL source: a file is read whole"
	case reconcile.ApplyToFile:
		return fmt.Sprintf("--apply and --dry-run write to a Redis or MySQL target, not to %s", e.Target)
	case reconcile.BackfillWithoutRecords:
		return "--backfill needs --records FILE…: the records to pick the missing ones from"
	case reconcile.RecordsUnused:
		return "--records is read for --backfill OUT or for --apply (whole digests); give one of them"
	case reconcile.BadRecordsPolicy, reconcile.BadRecordSpec, reconcile.BackfillRows:
		return say(e.Err) // ingest's, said with the record flags
	case reconcile.CheckpointWithoutApply:
		return "--checkpoint goes with --apply"
	case reconcile.NegativeRate:
		return "--rate and --read-rate must be positive"
	case reconcile.BadTargetFPR:
		return "--fpr is a rate between 0 and 1, such as 0.01"
	case reconcile.RebuildNotBloom:
		return "--rebuild-shard is for a bloom (--online redis://…?bloom=… or ?bf=…)"
	case reconcile.RebuildWithApply:
		return "--rebuild-shard writes whole shards: not with --apply or --probe (it sets the missing keys' bits too)"
	case reconcile.RebuildNeedsHashTag:
		if e.Target == "bf" {
			return fmt.Sprintf("--rebuild-shard in a Redis Cluster needs the shard's name in the filters' hash tag (bf=l2:rb:{*}), so that a filter and its rebuilt copy share a slot; bf=%s does not", e.Value)
		}
		return fmt.Sprintf("--rebuild-shard in a Redis Cluster needs the shard number in the keys' hash tag (bloom=l2:bf:{*}), so that a shard and its rebuilt copy share a slot; bloom=%s does not", e.Value)
	case reconcile.RebuildShardRange:
		return fmt.Sprintf("--rebuild-shard %s: the layout has %s shards", e.Value, e.Target)
	case reconcile.RebuildNeedsMem:
		n, _ := strconv.ParseInt(e.Value, 10, 64)
		return fmt.Sprintf("--rebuild-shard holds a shard in memory: give --mem %s or more", mebibytes(n))
	case reconcile.ExtraNotListed:
		return "--extra lists what only the online side holds, which --probe and a bloom cannot tell"
	case reconcile.TargetFPRNotBloom:
		return "--fpr sizes a bloom (--online redis://…?bloom=… or ?bf=…): other online sides hold keys, not bits"
	case reconcile.ProbeEtcd:
		return "--probe is not for etcd: a prefix is read whole, in key order, at one revision"
	case reconcile.ValueNotEtcd:
		return "--value is for etcd (--online etcd://…): the other stores' keys hold no value of ours"
	case reconcile.ValueUnused:
		return "--value is what --apply or --dry-run write: give one of them"
	case reconcile.BadValue:
		return "--value: " + say(e.Err)
	case reconcile.ValueNeedsRecords:
		return fmt.Sprintf("--value names fields of the records (%s): --apply needs --records FILE… to take them from", e.Value)
	case reconcile.ValueFieldsFormat:
		return fmt.Sprintf("--value names fields of the records, but %s records have none: read them with --format csv, tsv or jsonl", e.Value)
	case reconcile.ProbeRedisBF:
		return "--probe is not for RedisBloom filters (?bf=…): each is read whole with BF.SCANDUMP and every truth key tested in it"
	case reconcile.NeedKeyTexts:
		return fmt.Sprintf("RedisBloom filters of %s and %s are audited from the keys' texts (the items are made of them, or the router hashes them), which the index does not hold: give --records FILE…, the records the index was built from", e.Value, e.Target)
	case reconcile.RouteAllWrites:
		return "--apply, --dry-run and --rebuild-shard need the filters' router: with route=all no shard is known for an item"
	case reconcile.RebuildParamsNotBF:
		return "--capacity and --error go with --rebuild-shard of RedisBloom filters (--online redis://…?bf=…)"
	case reconcile.BadRebuildParams:
		return fmt.Sprintf("--capacity, --error: %v", e.Err)
	}
	return e.Error()
}

func reconcileFileFlag(r reconcile.FileRole) string {
	switch r {
	case reconcile.CheckpointFile:
		return "--checkpoint"
	case reconcile.TempDir:
		return "--tmpdir"
	case reconcile.BackfillFile:
		return "--backfill"
	}
	return r.String()
}

// sayApplyInterrupted is the error of an interrupted --apply, as the
// report says it.
func sayApplyInterrupted(e *reconcile.ApplyInterruptedError) string {
	if e.Rebuild > 0 {
		return fmt.Sprintf("--rebuild-shard interrupted (%v) after swapping in %d of %d shards on %s; %s", e.Cause, e.Rebuilt, e.Rebuild, e.Target, reconcile.RebuildRerun)
	}
	msg := fmt.Sprintf("--apply interrupted (%v) after writing %d keys to %s", e.Cause, e.Written, e.Target)
	switch {
	case e.Checkpoint != "" && e.CheckpointSaved:
		msg += fmt.Sprintf("; rerun with --checkpoint %s to resume", e.Checkpoint)
	case e.Checkpoint != "" && e.CheckpointErr != nil:
		msg += fmt.Sprintf("; the checkpoint could not be saved (%s): rerun with --checkpoint %s to resume from its last save (keys written since then are found present, not written again)", say(e.CheckpointErr), e.Checkpoint)
	case e.Checkpoint != "":
		msg += fmt.Sprintf("; rerun with --checkpoint %s to write the rest", e.Checkpoint)
	default:
		msg += "; rerun the same command to write the rest (the keys written now are found present, not written again)"
	}
	return msg
}

// applyInterruptedText says what an interrupted reconcile --apply left
// online, and how to resume (after "interrupted by SIGNAL; "): keys were
// written, so "nothing was published" would be false.
func applyInterruptedText(e *reconcile.ApplyInterruptedError) string {
	if e.Rebuild > 0 {
		return fmt.Sprintf("--rebuild-shard had swapped in %d of %d shards on %s; %s", e.Rebuilt, e.Rebuild, e.Target, reconcile.RebuildRerun)
	}
	msg := fmt.Sprintf("--apply had written %d keys to %s", e.Written, e.Target)
	switch {
	case e.Checkpoint != "" && e.CheckpointSaved:
		return msg + fmt.Sprintf("; rerun with --checkpoint %s to resume after them", e.Checkpoint)
	case e.Checkpoint != "" && e.CheckpointErr != nil:
		return msg + fmt.Sprintf("; the checkpoint could not be saved (%s): rerun with --checkpoint %s to resume from its last save (keys already online are found present, not written again)", say(e.CheckpointErr), e.Checkpoint)
	case e.Checkpoint != "":
		return msg + fmt.Sprintf("; rerun with --checkpoint %s to write the rest", e.Checkpoint)
	}
	return msg + "; rerun the same command to write the rest (keys already online are found present, not written again)"
}
