package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/reconcile"
)

// reconcile's typed errors, said with the CLI's flags: the messages the
// package itself printed before it stopped naming flags, word for word.
func TestSayReconcile(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "/x/apply.ckpt", Err: errors.New("permission denied")}
	sig := interrupted{sig: 2}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&reconcile.OptionError{Rule: reconcile.NoTarget}, "reconcile needs --online URL"},
		{&reconcile.OptionError{Rule: reconcile.KeysNotFromFile}, "--online-format key is for file: exports; Redis and MySQL hold hex fingerprints"},
		{&reconcile.OptionError{Rule: reconcile.UnknownOnlineFormat, Value: "csv"}, `--online-format must be fp or key, not "csv"`},
		{&reconcile.OptionError{Rule: reconcile.TTLNotRedisKeys, Value: "redis-set"}, "--ttl is for Redis keys (?match=PREFIX*): a set's members have no TTL of their own"},
		{&reconcile.OptionError{Rule: reconcile.TTLNotRedisKeys, Value: "etcd"}, "--ttl is for Redis keys (?match=PREFIX*): etcd keys are written without a lease (an audit reports the keys bound to one)"},
		{&reconcile.OptionError{Rule: reconcile.NegativeTTL}, "--ttl must be positive"},
		{&reconcile.OptionError{Rule: reconcile.ProbeFile}, "--probe needs a Redis or MySQL source: a file is read whole"},
		{&reconcile.OptionError{Rule: reconcile.ApplyToFile, Target: "file:x"}, "--apply and --dry-run write to a Redis or MySQL target, not to file:x"},
		{&reconcile.OptionError{Rule: reconcile.BackfillWithoutRecords}, "--backfill needs --records FILE…: the records to pick the missing ones from"},
		{&reconcile.OptionError{Rule: reconcile.RecordsUnused}, "--records is read for --backfill OUT or for --apply (whole digests); give one of them"},
		{&reconcile.OptionError{Rule: reconcile.BadRecordsPolicy, Err: errors.New(`--on-bad must be fail, skip or quarantine=FILE, not "drop"`)}, `--on-bad must be fail, skip or quarantine=FILE, not "drop"`},
		{&reconcile.OptionError{Rule: reconcile.BackfillRows, Err: ingest.RowsCSV.ForRecords(ingest.FormatCSV)}, "--output-format csv converts Parquet rows: csv records are written as they are read"},
		{&reconcile.OptionError{Rule: reconcile.CheckpointWithoutApply}, "--checkpoint goes with --apply"},
		{&reconcile.OptionError{Rule: reconcile.NegativeRate}, "--rate and --read-rate must be positive"},
		{&reconcile.OptionError{Rule: reconcile.BadTargetFPR}, "--fpr is a rate between 0 and 1, such as 0.01"},
		{&reconcile.OptionError{Rule: reconcile.TargetFPRNotBloom}, "--fpr sizes a bloom (--online redis://…?bloom=… or ?bf=…): other online sides hold keys, not bits"},
		{&reconcile.OptionError{Rule: reconcile.RebuildNotBloom}, "--rebuild-shard is for a bloom (--online redis://…?bloom=… or ?bf=…)"},
		{&reconcile.OptionError{Rule: reconcile.RebuildWithApply}, "--rebuild-shard writes whole shards: not with --apply or --probe (it sets the missing keys' bits too)"},
		{&reconcile.OptionError{Rule: reconcile.RebuildNeedsHashTag, Value: "bf:*"}, "--rebuild-shard in a Redis Cluster needs the shard number in the keys' hash tag (bloom=l2:bf:{*}), so that a shard and its rebuilt copy share a slot; bloom=bf:* does not"},
		{&reconcile.OptionError{Rule: reconcile.RebuildShardRange, Value: "9", Target: "4"}, "--rebuild-shard 9: the layout has 4 shards"},
		{&reconcile.OptionError{Rule: reconcile.RebuildNeedsMem, Value: "1140850688"}, "--rebuild-shard holds a shard in memory: give --mem 1088MiB or more"},
		{&reconcile.OptionError{Rule: reconcile.RebuildNeedsMem, Value: "67174400"}, "--rebuild-shard holds a shard in memory: give --mem 65MiB or more"},
		{&reconcile.OptionError{Rule: reconcile.ExtraNotListed}, "--extra lists what only the online side holds, which --probe and a bloom cannot tell"},
		{&reconcile.ReadBackError{Target: "redis://h/0?match=a*", Written: 20, Probed: 5, Err: errors.New("i/o timeout")},
			"--apply wrote 20 keys to redis://h/0?match=a*, but reading them back failed after 5: i/o timeout; rerun without --apply to see what it holds"},
		{&reconcile.RebuiltShortError{Key: "b:{0}:rebuild", Live: "b:{0}", Bits: 3, Truth: 9},
			"the rebuilt b:{0}:rebuild holds 3 bits set where the truth sets 9: part of what was written to it is gone (its server restarted, or another client wrote to it), so it was not swapped in and b:{0} is as it was; rerun --rebuild-shard"},
		{reconcile.ErrNoPath, "--online file:PATH needs a path"},
		{&reconcile.URLError{Reason: "not a URL (want redis://, mysql:// or file:)"}, "--online: not a URL (want redis://, mysql:// or file:)"},
		{&reconcile.URLError{URL: "redis://h/0", Reason: "hex= must be 32 or 64"}, "--online redis://h/0: hex= must be 32 or 64"},
		{&reconcile.URLError{URL: "redis://u:xxxxx@h/0?match=a*", PasswordEnv: "FPDEDUP_REDIS_PASSWORD"},
			"--online redis://u:xxxxx@h/0?match=a* holds a password, which would be visible in ps and shell history: remove it and put it in $FPDEDUP_REDIS_PASSWORD or a --password-file"},
		{&reconcile.WrongHashError{Index: "/d/truth.fpx", Hash: "xxh3"},
			"the index's hash is not the online side's: /d/truth.fpx holds xxh3 fingerprints of its keys (the whole record), but the online side keys events by the SHA-256 of theirs; rebuild the index from the same records with --hash sha256 (fpdedup build --hash sha256 -o truth.fpx …)"},
		{&reconcile.WrongHashError{Index: "t.fpx", Hash: "xxh3", Key: []string{"user_id", "device_id", "timestamp_ms"}, KeySep: ":"},
			"the index's hash is not the online side's: t.fpx holds xxh3 fingerprints of its keys (user_id,device_id,timestamp_ms joined by \":\"), but the online side keys events by the SHA-256 of theirs; rebuild the index from the same records with --hash sha256 (fpdedup build --hash sha256 -o t.fpx …)"},
		{&reconcile.NeedRecordsError{Target: "mysql://u@h:3306/d?table=t&column=c"},
			"the online side holds whole 32-byte SHA-256 digests, which a 128-bit index cannot give (mysql://u@h:3306/d?table=t&column=c): --apply needs --records FILE… to compute them from the original keys"},
		{&reconcile.ProbeError{Target: "redis://h/0?match=a*", PerBatch: 5, Err: marker{&reconcile.ProbeWideError{Target: "redis://h/0?match=a*"}}},
			"probing redis://h/0?match=a* failed after 0 keys were answered (0 retries in all, at most 5 per batch): redis://h/0?match=a* names keys by whole SHA-256 digests (hex=64), which a 128-bit index cannot probe: reconcile without --probe (SCAN and merge-join) instead"},
		{&reconcile.NotFingerprintError{Name: "bad.txt", Line: 2, Text: []byte("not hex")}, `bad.txt:2: not a 32- or 64-digit hex fingerprint: "not hex" (with --online-format key each line is a key)`},
		{&reconcile.TooManyDigestsError{Max: 65536}, "more than 65536 whole digests to write do not fit in --mem: apply a slice at a time (mysql …&where=, or a partitioned index)"},
		{&reconcile.FileError{Op: "read", File: reconcile.CheckpointFile, Err: pathErr}, "cannot read --checkpoint: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "write", File: reconcile.CheckpointFile, Path: "c", Err: pathErr}, "cannot write --checkpoint c: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "fsync the directory of", File: reconcile.CheckpointFile, Path: "c", Err: pathErr}, "cannot fsync the directory of --checkpoint c: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "remove", File: reconcile.CheckpointFile, Err: pathErr, AfterApply: true}, "apply done, but cannot remove --checkpoint: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "make a temp directory in", File: reconcile.TempDir, Err: pathErr}, "cannot make a temp directory in --tmpdir: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "make a temp file in", File: reconcile.TempDir, Err: pathErr}, "cannot make a temp file in --tmpdir: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "write to", File: reconcile.TempDir, Err: pathErr}, "cannot write to --tmpdir: open /x/apply.ckpt: permission denied"},
		{&reconcile.FileError{Op: "write", File: reconcile.BackfillFile, Err: pathErr}, "cannot write --backfill: open /x/apply.ckpt: permission denied"},
		{&reconcile.CheckpointError{Path: "c", Problem: reconcile.NotACheckpoint}, "--checkpoint c is not an fpdedup reconcile checkpoint (remove it to start over)"},
		{&reconcile.CheckpointError{Path: "c", Problem: reconcile.OtherRun, FileOnline: "redis://a/0?match=b*", FileFingerprints: 10, Online: "redis://h/0?match=b*", Fingerprints: 20},
			"--checkpoint c belongs to another run (redis://a/0?match=b*, index of 10 fingerprints), not this one (redis://h/0?match=b*, 20): remove it or name another file"},
		{&reconcile.CheckpointError{Path: "c", Problem: reconcile.BadLast, Last: "zz"}, `--checkpoint c: bad last fingerprint "zz"`},
		// A write that failed, and the checkpoint that could not be saved
		// then: both said with the flags, inside the failure's own words.
		{&reconcile.WriteError{Target: "redis://h/0?match=a*", Retries: 3, MaxRetries: 2, Written: 100, Checkpoint: "c", CheckpointLast: "00ff",
			Err: &reconcile.UnsavedCheckpointError{Err: errors.New("i/o timeout"), Save: &reconcile.FileError{Op: "write", File: reconcile.CheckpointFile, Path: "c", Err: pathErr}}},
			"writing to redis://h/0?match=a* failed: i/o timeout (and the checkpoint could not be saved: cannot write --checkpoint c: open /x/apply.ckpt: permission denied) (3 retries in all, at most 2 per batch); 100 keys written in this run, checkpoint c at 00ff: rerun the same command to resume after it"},
		{&reconcile.WriteError{Target: "redis://h/0?match=a*", Err: errors.New("EOF")},
			"writing to redis://h/0?match=a* failed: EOF (0 retries in all, at most 0 per batch); 0 keys written in this run: rerun the same command to write the rest (what was written now shows as present)"},
		{&reconcile.ApplyInterruptedError{Target: "redis://h/0?match=a*", Written: 7, Checkpoint: "c", CheckpointSaved: true, Cause: sig},
			"--apply interrupted (interrupted by SIGINT) after writing 7 keys to redis://h/0?match=a*; rerun with --checkpoint c to resume"},
		{&reconcile.ApplyInterruptedError{Target: "redis://h/0?match=a*", Written: 7, Checkpoint: "c", Cause: sig,
			CheckpointErr: &reconcile.FileError{Op: "write", File: reconcile.CheckpointFile, Path: "c", Err: pathErr}},
			"--apply interrupted (interrupted by SIGINT) after writing 7 keys to redis://h/0?match=a*; the checkpoint could not be saved (cannot write --checkpoint c: open /x/apply.ckpt: permission denied): rerun with --checkpoint c to resume from its last save (keys written since then are found present, not written again)"},
		{&reconcile.ApplyInterruptedError{Target: "redis://h/0?match=a*", Written: 7, Checkpoint: "c", Cause: sig},
			"--apply interrupted (interrupted by SIGINT) after writing 7 keys to redis://h/0?match=a*; rerun with --checkpoint c to write the rest"},
		{&reconcile.ApplyInterruptedError{Target: "redis://h/0?match=a*", Written: 7, Cause: sig},
			"--apply interrupted (interrupted by SIGINT) after writing 7 keys to redis://h/0?match=a*; rerun the same command to write the rest (the keys written now are found present, not written again)"},
		// Errors reconcile does not type keep their words.
		{errors.New("reading x failed"), "reading x failed"},
	} {
		if got := reconcileErr(c.err).Error(); got != c.want {
			t.Errorf("%T:\n got %s\nwant %s", c.err, got, c.want)
		}
		if !errors.Is(reconcileErr(c.err), c.err) {
			t.Errorf("%T: the CLI's error does not wrap the package's", c.err)
		}
	}
}

// An error whose text held the password is said in the CLI's words, and
// the password stays out of them.
func TestSayReconcileScrubbed(t *testing.T) {
	inner := &reconcile.FileError{Op: "write", File: reconcile.BackfillFile, Err: errors.New("auth hunter2 refused")}
	if got, want := say(reconcile.Scrub(inner, "hunter2", "")), "cannot write --backfill: auth ***** refused"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	url := &reconcile.FileError{Op: "write", File: reconcile.BackfillFile, Err: errors.New("redis://h:1/0 (hunter2) down")}
	if got, want := say(reconcile.Scrub(url, "hunter2", "redis://h:1/0")), "cannot write --backfill: redis://h:1/0 (*****) down"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	clean := &reconcile.FileError{Op: "write", File: reconcile.BackfillFile, Err: errors.New("disk full")}
	if got, want := say(reconcile.Scrub(clean, "hunter2", "")), "cannot write --backfill: disk full"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// The options and URLs reconcile refuses are usage errors: exit 2 with
// the usage hint.
func TestReconcileUsageErrors(t *testing.T) {
	for _, err := range []error{
		&reconcile.OptionError{Rule: reconcile.CheckpointWithoutApply},
		&reconcile.URLError{URL: "redis://h/0", Reason: "say which keys"},
		reconcile.ErrNoPath,
	} {
		var buf strings.Builder
		if code := report(&buf, reconcileErr(err)); code != exitError || !strings.Contains(buf.String(), "hint: see fpdedup --help") {
			t.Errorf("%v: exit %d\n%s", err, code, buf.String())
		}
	}
	var buf strings.Builder
	if code := report(&buf, reconcileErr(&reconcile.WrongHashError{Index: "a.fpx", Hash: "xxh3"})); code != exitError || strings.Contains(buf.String(), "hint") {
		t.Errorf("a wrong hash is no usage error: exit %d\n%s", code, buf.String())
	}
}

// marker is a wrapper that adds no words (as reconcile's permanent).
type marker struct{ error }

func (m marker) Unwrap() error { return m.error }

// A Redis reply past what a reply may hold says which flags give it room;
// the other refusals of a broken server need no hint.
func TestReconcileReplyHint(t *testing.T) {
	big := fmt.Errorf("reading redis://h:1/0?match=a*: %w", &reconcile.ReplyError{Server: "h:1", Command: "SCAN", Problem: reconcile.ReplyTooLarge, Declared: 1 << 30, Limit: 2 << 20})
	var buf strings.Builder
	if code := report(&buf, reconcileErr(big)); code != exitError || !strings.Contains(buf.String(), "hint: a reply that large") || !strings.Contains(buf.String(), "--mem") {
		t.Errorf("exit %d\n%s", code, buf.String())
	}
	buf.Reset()
	garbage := &reconcile.ReplyError{Server: "h:1", Command: "SCAN", Problem: reconcile.NotRESP, Bytes: `"?"`}
	if code := report(&buf, reconcileErr(garbage)); code != exitError || strings.Contains(buf.String(), "hint") || !strings.Contains(buf.String(), "redis h:1 answered SCAN with bytes that are not RESP2") {
		t.Errorf("exit %d\n%s", code, buf.String())
	}
}
