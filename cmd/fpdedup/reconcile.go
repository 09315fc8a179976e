package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/reconcile"
)

type reconcileOptions struct {
	index, online, passwordFile string
	probe                       bool
	rebuild                     string
	capacity                    uint64
	errorRate                   float64
	fpr                         float64
	onlineFormat                string
	report, missing, extra      string
	records                     []string
	recs                        recordFlags
	backfill                    string
	apply, dryRun               bool
	ttl                         time.Duration
	rate, readRate              string
	batch, conns, retries       int
	timeout                     time.Duration
	checkpoint, tmpDir          string
	samples                     int
	value                       string
}

func newReconcileCommand(inv *invocation) *cobra.Command {
	o := &reconcileOptions{}
	cmd := &cobra.Command{
		Use:   "reconcile --index TRUTH.fpx --online URL [--records FILE...]",
		Short: "Compare an index with the online dedup store; report, backfill, repair",
		Long: `Reconcile compares the offline truth (an index built with --hash sha256; any
hash for a bloom) with the online dedup store, and counts the fingerprints both
hold, those only the index holds (missing online: to backfill) and those only
the online side holds (unknown offline: to audit).

Online sources (--online):
  redis://[user@]host:port/db?match=PREFIX*   keys PREFIX<hex>, found by SCAN
  redis://[user@]host:port/db?set=KEY         members <hex> of a set, by SSCAN
      &count=N (SCAN COUNT, default 1000), &hex=32|64 (width of the names
      when there are none yet to tell)
  redis://[user@]host1:port1,host2:port2/?match=PREFIX*   a Redis Cluster:
      several seed addresses, in the host or as &addr=host:port (go-redis's
      ParseClusterURL form); &cluster=1 with a single seed. SCAN runs on every
      master at once (the slot map must not change meanwhile: a failover or
      resharding during the scan is an error); ?set=KEY, probes and --apply
      go to the masters owning the slots (cluster pipelines). Database 0 only.
      A single node of a cluster without cluster=1 is refused: its SCAN would
      see only its own slots.
  mysql://user@host:port/db?table=T&column=C  C is BINARY(16), BINARY(32),
      CHAR(32) or CHAR(64) hex; &where=SQL for a slice; &count=auto|1|0:
      compare the rows read with COUNT(*) (auto: up to ~2M rows, where cheap)
  file:PATH                                   one hex fingerprint per line
      (--online-format key: one key per line); gzip/zstd detected
  etcd://[user@]host:port[,host:port…]/?prefix=P   keys P<hex> under an etcd
      prefix: &hex=64 (the default: the whole SHA-256 in lowercase hex) or
      &hex=32 (its first 128 bits); &page=N keys a Range (default 10000);
      TLS with &ca=FILE, a client certificate with &cert=FILE&key=FILE. A
      member without a port is on 2379 (no host: 127.0.0.1:2379). Several
      members are one cluster: a request fails over to another. Read in key
      order, in pages, all at one revision (the first page's): a consistent
      snapshot, merge-joined with the index. A revision compacted during
      the audit starts it again at a new one (up to --retries times; the
      report lists them). Keys under the prefix that are not lowercase hex of
      the width are counted and named, not trusted; keys bound to leases are
      counted with the shortest TTL left, so that "missing" later can be told
      from "expired by design".
  redis://host:port/0?bloom=l2:bf:{*}&shards=N&bits=M&k=K   the L2 sharded
      bloom itself: plain Redis strings, one a shard (* is the shard number;
      a shard over 2^32 bits is KEY:0, KEY:1, …), bit positions as replay
      --l2 shards=N,bits=M,k=K computes them from the index's own fingerprints
      (any --hash): shard = hi mod N, bit j = (lo + j*hi) mod 2^64 mod M, Redis
      bit order (SETBIT/GETBIT). bits= takes replay's forms (2^33, 1GiB, 1M).
      Cluster seeds as above. RedisBloom's BF.* filters are bf= below.
  redis://host:port/0?bf=l2:rb:{*}&shards=N&route=ROUTER&item=ITEM   the L2 as
      RedisBloom scalable filters (BF.RESERVE/BF.ADD; Redis Stack, Redis 8),
      one a shard, * the shard's name (0 … N-1, or a ring's node; no * for a
      single filter). ROUTER, a function of the key text: mod-md5 (shard =
      first 4 bytes of MD5(key), big-endian, mod N), ring (&nodes=A,B,…&vnodes=V:
      points MD5("NODE#i") first 4 bytes, a key goes to the first point at or
      after its own hash, wrapping; shards= optional), all (the router is not
      known: a key is held if any shard holds it; conservative, and nothing
      can be written). ITEM, what the filters hold of a key: key (its text, as
      the index's recipe makes it), sha256 (its lowercase hex SHA-256), fp (the
      index's own fingerprint, 32 hex). Cluster seeds as above.
Hex names of 64 digits (whole SHA-256 digests) are compared on their first
128 bits. Passwords come from $FPDEDUP_REDIS_PASSWORD, $FPDEDUP_MYSQL_PASSWORD,
$FPDEDUP_ETCD_PASSWORD or --password-file, never from the URL (one holding a
password anywhere, as it is or percent-encoded, is refused, its query not
shown), and are never printed, in any of the forms a URL encodes them in.

A MySQL column is read by one streamed SELECT … ORDER BY and merge-joined with
the index in one pass; a lost connection resumes after the last value read
(--retries), and the rows read must equal a COUNT(*) taken in the same
snapshot (where that is cheap). Redis and files are unsorted: they go through
the external sorter, within --mem, spilling to --tmpdir. --probe instead looks each offline
fingerprint up online in pipelined batches (EXISTS, SMISMEMBER, WHERE C IN),
for audits of a small index; it cannot see what only the online side holds.

A bloom is audited: every shard is read once with pipelined GETRANGE, as much
of it at a time as --mem allows beside a bit a truth key, and every truth
key's K bits are tested; the keys with a bit unset are "missing online" (a
repeat of any of them passes the L2 today). The summary and --report give each
shard's fill, its truth keys, its false-positive rate now (fill^K) beside the
formula's for those keys, and what N shards would need for the truth's keys at
--fpr. Every shard key must exist as a string of its full length (SETBIT KEY
M-1 0 makes one): a missing key, another type or another length is an error
naming it. --probe asks for each key's bits instead (BITFIELD_RO GET u1, a
shard's bits of a batch in one command; GETBIT before Redis 6.2), for a small
index.

RedisBloom filters (bf=) are audited: each shard's filter is read with
BF.SCANDUMP, chunk by chunk, as much of it at a time as --mem allows beside a
bit a truth key, and each truth key is tested in its shard (route=all: in
every shard) exactly as BF.EXISTS tests it; keys not found are asked again
before they are called missing (a dump is not a snapshot: an add racing the
audit is never reported), with BF.MEXISTS, or by reading the dump again where
that costs less (many keys missing in a small filter), and each filter's header is read again
last (a filter deleted or replaced meanwhile is an error, exit 2). What is
audited: with item=fp and route=all the index's fingerprints; otherwise the
keys of --records (required then: the index holds no key texts), each record
whose key's fingerprint the index holds, once; index fingerprints no record
gives are counted "not audited" and the sides are not said to agree (exit 1).
The summary and --report give each shard's filter: the items the module counts,
the truth keys routed there, those missing, its sub-filters (capacity, error,
fill), its false-positive rate now against BF.RESERVE's, its memory and how
many new items until the next sub-filter. A shard's key that is missing, of
another type or with a header the module would not load is an error naming the
shard and the key (exit 2). --fpr F adds what each shard needs for its truth
keys at rate F: BF.RESERVE's capacity at error F (its expansion kept) and the
memory, beside what it has. --apply adds the missing items with BF.INSERT KEY
NOCREATE ITEMS … (BF.MADD that never makes a filter of the module's defaults
where a shard's is gone), the items taken from what the audit read of the
records, and reads them back: with BF.MEXISTS, or in the dump, read whole, of a
filter that got many beside its size. --rebuild-shard
S,S|all makes each named shard's filter offline, as the module would build it
for the shard's truth keys (BF.RESERVE at --capacity and --error, else the live
filter's, then each key added in the records' order), writes it with
BF.LOADCHUNK to KEY:rebuild, checks it there (its header, BF.INFO, BF.MEXISTS
of a sample), and renames it over the live filter only if the live one holds
the same items as when the rebuild read it: an item added online meanwhile
makes it refuse, exit 2, the live filter as it was (rebuild with the writers
paused, or migrate by dual-writing). A missing filter needs --capacity and
--error. In a Cluster the shard's name must be in the hash tag (l2:rb:{*}).

Outputs: the summary on stderr; --report FILE.json (counts, spec, source,
timings, samples of each side); --missing and --extra as indexes; with
--records FILE... --backfill OUT gets the records whose keys are missing
online, in input order, bytes unchanged (a csv/tsv header once, first);
Parquet records give a Parquet backfill of their rows, every column as read
(--output-format csv, tsv or jsonl: as text, as dedup writes them).
--records are read as the index was built: its recorded --format, --key,
--key-sep and --header, unless the record flags say otherwise (then they must
give the same recipe, or --assume-recipe); --on-bad says what a record
without a key does.

Nothing is written online without --apply: then the missing keys are written
(Redis SET PREFIX<hex> 1 NX [--ttl], SADD; a bloom's SETBIT of each bit, which
never clears one; MySQL INSERT IGNORE; etcd compare-and-create transactions,
If(CreateRevision(key) == 0) Then(Put(key, value)), which never overwrite a
value, each key's value from --value JSON or empty) in batches of
--batch on --conns connections, at most --rate keys/s, retried with backoff;
--checkpoint FILE records the last key written and that a rerun is the same
run; the rerun audits again, so it writes what is still missing, a key
deleted since included. Then every key that was missing is read back with read-only
commands (EXISTS, SMISMEMBER, SELECT … IN, etcd Range, BITFIELD_RO; a bloom's shards written
also by STRLEN and BITCOUNT, which must be whole and hold at least the bits
the audit read): the sides agree only if all are there, never because the
writes were answered; keys gone since (deleted, expired) are counted missing,
exit 1. --dry-run prints the commands instead. --rebuild-shard rewrites whole
bloom shards instead: the truth's bitmap of a shard is written beside it
(KEY:rebuild, SETRANGE) and one Lua script on its node ORs the live shard into
it and renames it over the live one, so no bit set online is ever cleared and
no reader sees half a shard (in a Cluster the shard number must be the keys'
hash tag, as in l2:bf:{*}); rerunning it is harmless. The shards it names are
not audited first, and may be missing or short, as after a flush or a failover
without data: that is what it is for. The script holds the node for its
BITOP OR, for a time in proportion to the shard's size. What is written is read back: the
new key's BITCOUNT must be the truth's (else it is written again whole: a
server restarted during the write holds none of it), the script refuses to swap
in one with fewer bits (both counts said), and a shard is "rebuilt" (exit 0)
only if, read back after the swap, it is whole and holds at least the truth's
bits; else exit 1, saying what was read.
Where the online side holds whole 32-byte digests, --apply needs --records to
compute them.

--value JSON (etcd) is the value written with each key: JSON in which $name is
the field name of the key's record (csv/tsv header name or column number,
jsonl field path a.b; ${name} for any other name, $$ a literal $), written
JSON-escaped inside a string ("$user_id:$device_id") and as it is outside one,
where it must be a number, true, false or null ({"ts":$timestamp_ms}). The
template is checked before anything is opened, and every value is made from
its record before any write: a record without the field, or with one that
does not fit, stops the run naming it. Without fields it is one value for
every key; without --value the value is empty. A value is at most 1 MiB
(etcd's default --max-request-bytes, 1.5 MiB, holds a transaction's keys,
each three times, and values): a longer one is refused before any write.
Up to 128 keys go in a transaction; one the server refuses for its size (its
--max-txn-ops or --max-request-bytes below that) is sent again in halves,
down to one key.

Exit codes: 0 the sides agree (after --apply); 1 they differ; 2 usage, I/O or
server error (the report, if asked, says what); 130/143 interrupted (at once,
even while the server is silent: its connections are closed): nothing is
published, but once --apply has begun the message says how many keys were
written online and how to resume from --checkpoint.

` + wrapped(reconcileMemSentence(), 79),
		Example: `  FPDEDUP_MYSQL_PASSWORD=… fpdedup reconcile --index truth.fpx \
      --online 'mysql://audit@db1:3306/dedup?table=events&column=fp' \
      --report audit.json --missing missing.fpx
  fpdedup reconcile --index truth.fpx --online 'redis://10.0.0.5:6379/0?match=dd:*' \
      --records events.log --backfill replay.log
  fpdedup reconcile --index today.fpx --online 'redis://10.0.0.5:6379/0?set=seen' --probe
  fpdedup reconcile --index truth.fpx --online 'redis://10.0.1.1:7000,10.0.1.2:7000,10.0.1.3:7000/?match=dd:*' \
      --records events.csv.gz --backfill replay.csv
  fpdedup reconcile --index truth.fpx --online 'redis://10.0.0.5:6379/0?match=dd:*' \
      --apply --ttl 72h --rate 50k --checkpoint apply.ckpt
  fpdedup reconcile --index truth.fpx --online 'etcd://10.0.2.1:2379,10.0.2.2:2379,10.0.2.3:2379/?prefix=/dedupe/sha256/' \
      --records events.jsonl --apply --value '{"obj":"$bucket:$object","ts":$ts}' --checkpoint etcd.ckpt
  fpdedup reconcile --index week.fpx --report l2.json --missing lost.fpx \
      --online 'redis://10.0.1.1:7000,10.0.1.2:7000/?bloom=l2:bf:{*}&shards=16&bits=2^33&k=3'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReconcile(cmd, inv, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.index, "index", "", "the truth `INDEX` (built with --hash sha256)")
	f.StringVar(&o.online, "online", "", "the online store: redis://…, mysql://…, etcd://… or file:PATH")
	f.StringVar(&o.passwordFile, "password-file", "", "read the online store's password from `FILE` (first line)")
	f.BoolVar(&o.probe, "probe", false, "look each offline fingerprint up online instead of reading the online side")
	f.StringVar(&o.onlineFormat, "online-format", "fp", "file: source lines: fp (hex fingerprints) or key (keys, hashed with SHA-256)")
	f.StringVar(&o.report, "report", "", "write a JSON report to `FILE`")
	f.StringVar(&o.missing, "missing", "", "write the fingerprints missing online as an index `OUT.fpx`")
	f.StringVar(&o.extra, "extra", "", "write the fingerprints unknown offline as an index `OUT.fpx`")
	f.StringArrayVar(&o.records, "records", nil, "records whose keys the index holds (repeatable; FILE arguments too), read with the index's recipe")
	f.StringVar(&o.backfill, "backfill", "", "write the records whose keys are missing online to `OUT`")
	o.recs.add(f, "lines (the whole record is the key), csv, tsv, jsonl, parquet (keyed by --key); default: the --index's recipe")
	o.recs.addOutput(f, "--backfill")
	f.BoolVar(&o.recs.assumeRecipe, "assume-recipe", false, "read --records with another --key/--key-sep than the index's, with a warning")
	f.BoolVar(&o.apply, "apply", false, "write the missing keys online (SET NX, SADD, INSERT IGNORE, etcd compare-and-create)")
	f.StringVar(&o.value, "value", "", "etcd: the `JSON` value written with each key, $field taken from its record (default: empty)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print on stdout what --apply would write, write nothing")
	f.DurationVar(&o.ttl, "ttl", 0, "with --apply to Redis keys: their time to live (e.g. 72h)")
	f.StringVar(&o.rate, "rate", "0", "with --apply: at most this many keys/s written (e.g. 50k; 0: no limit)")
	f.StringVar(&o.readRate, "read-rate", "0", "at most this many keys/s read, probed or read back online, or truth keys tested in a bloom audit, from the first key (0: no limit)")
	f.IntVar(&o.batch, "batch", 1000, "keys per pipeline, statement or probe")
	f.IntVar(&o.conns, "conns", 8, "connections used at once by --probe and --apply")
	f.IntVar(&o.retries, "retries", 5, "retries of a failed read, probe or write before giving up, after a backoff of 0.25 s doubling to 5 s: a silent server fails after (1 + N) × --timeout plus the backoffs, 3m8s with the defaults (etcd: a backoff of 50 ms doubling to 1.6 s, and at least 1 retry, which compare-and-create makes safe)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "network timeout of one operation, more than 0 (each retry waits as long again; SIGINT/SIGTERM do not wait for it)")
	f.StringVar(&o.checkpoint, "checkpoint", "", "with --apply: resume from and record progress in `FILE`")
	f.StringVar(&o.tmpDir, "tmpdir", os.TempDir(), "directory for sorted runs and temporary indexes")
	f.IntVar(&o.samples, "samples", 20, "fingerprints of each side listed in the report")
	f.Float64Var(&o.fpr, "fpr", 0, "bloom audit: the false-positive rate to size the L2 for (0: 0.01; RedisBloom: each filter's own error rate)")
	f.StringVar(&o.rebuild, "rebuild-shard", "", "bloom: rebuild these `SHARDS` (S, S,S,… or all; RedisBloom: the shards' names) from the truth instead of auditing them, missing or short ones too: each written beside the live one and swapped in atomically; --mem must hold a shard")
	f.Uint64Var(&o.capacity, "capacity", 0, "with --rebuild-shard of RedisBloom filters: BF.RESERVE's capacity of the rebuilt filters (0: the live filter's)")
	f.Float64Var(&o.errorRate, "error", 0, "with --rebuild-shard of RedisBloom filters: BF.RESERVE's error rate of the rebuilt filters (0: the live filter's)")
	return cmd
}

func runReconcile(cmd *cobra.Command, inv *invocation, o *reconcileOptions, args []string) error {
	opts, err := reconcileRunOptions(cmd, inv, o, args)
	if err != nil {
		return err
	}
	j := inv.job(cmd)
	reconcilePaths(j, o, opts.Records)
	if opts.Target.Kind == reconcile.Etcd {
		j.input("--online", kindOther, opts.Target.Etcd.Files()...)
	}
	var dryRun *stream
	if o.dryRun {
		dryRun = j.stream("stdout", "")
	}
	opts.Group = j.grp
	opts.Plan = reconcile.MemoryPlan(opts)
	j.memory(opts.Plan)
	j.progress(opts.Progress)
	return j.run(func(ctx context.Context) (map[string]any, error) {
		if opts.Password, err = password(opts.Target, o.passwordFile); err != nil {
			return nil, err
		}
		if dryRun != nil {
			opts.DryRunOut = dryRun.w
		}
		// A silent server takes minutes to give up: say what is awaited.
		opts.Waiting = func(w reconcile.Wait) {
			if !inv.quiet {
				fmt.Fprintf(inv.stderr, "fpdedup: %s: try %d of %d failed (%s); trying again in %s\n",
					w.What, w.Try, w.Tries, say(reconcile.Scrub(w.Err, opts.Password, opts.Target.Redacted)), w.Next)
			}
		}
		// The error that ends the run says what failed, once; stderr is
		// for the summary, not for go-redis's own log lines.
		reconcile.QuietRedisLogs()
		rep, err := reconcile.Run(ctx, opts)
		return finishReconcile(ctx, j, o, rep, err)
	})
}

// reconcileRunOptions checks the flags and makes reconcile's options of
// them.
func reconcileRunOptions(cmd *cobra.Command, inv *invocation, o *reconcileOptions, args []string) (reconcile.Options, error) {
	if o.index == "" || o.online == "" {
		return reconcile.Options{}, usageErrorf("reconcile needs --index TRUTH.fpx and --online URL")
	}
	t, err := reconcile.ParseURL(o.online)
	if err != nil {
		return reconcile.Options{}, reconcileErr(err)
	}
	opts := reconcile.Options{
		Index: o.index, Target: t, Probe: o.probe, OnlineFormat: o.onlineFormat,
		Missing: o.missing, Extra: o.extra,
		Records: append(o.records, args...), Backfill: o.backfill, BadRecords: o.recs.onBad,
		Apply: o.apply, DryRun: o.dryRun, TTL: o.ttl, Value: o.value,
		Batch: o.batch, Conns: o.conns, Retries: o.retries, Timeout: o.timeout, Checkpoint: o.checkpoint,
		Mem: inv.mem, TmpDir: o.tmpDir, Threads: inv.threads, Samples: o.samples, TargetFPR: o.fpr,
		RebuildCapacity: o.capacity, RebuildError: o.errorRate,
		Progress: &ingest.Progress{}, Version: version,
	}
	// --records are read as the index was built (its recorded format and
	// key recipe) unless the record flags say otherwise; then the recipes
	// must agree, as for dedup --against.
	if len(opts.Records) == 0 && (o.recs.given(cmd.Flags()) || cmd.Flags().Changed("zero-terminated")) {
		return opts, usageErrorf("--format, --key, --key-sep, --header and -z describe --records: give the records too")
	}
	if len(opts.Records) > 0 {
		req, _, err := o.recs.request(cmd.Flags(), false)
		if err != nil {
			return opts, err
		}
		opts.RecordReading = &req
		if opts.BackfillFormat, err = o.recs.rowFormat(); err != nil {
			return opts, err
		}
		if opts.MaxRecord, err = o.recs.maxRecordBytes(cmd.Flags(), inv.mem); err != nil {
			return opts, err
		}
	}
	if o.rebuild != "" {
		switch t.Kind {
		case reconcile.RedisBloom:
			opts.Rebuild, err = parseShardList(o.rebuild, t.Bloom.Shards)
		case reconcile.RedisBF:
			opts.Rebuild, err = parseShardNames(o.rebuild, t.BF.Router.Shards(), t.BF.Router.Name)
		default:
			return opts, usageErrorf("--rebuild-shard is for a bloom (--online redis://…?bloom=… or ?bf=…)")
		}
		if err != nil {
			return opts, err
		}
	}
	if o.timeout <= 0 {
		return opts, usageErrorf("--timeout must be more than 0 (such as 30s): it bounds each operation on the online side")
	}
	if o.batch < 1 || o.conns < 1 || o.retries < 0 || o.samples < 0 {
		return opts, usageErrorf("--batch and --conns must be at least 1, --retries and --samples at least 0")
	}
	for _, r := range []struct {
		name string
		s    string
		v    *float64
	}{{"--rate", o.rate, &opts.Rate}, {"--read-rate", o.readRate, &opts.ReadRate}} {
		n, err := units.ParseCount(r.s)
		if err != nil {
			return opts, usageErrorf("%s: %v", r.name, err)
		}
		*r.v = float64(n)
	}
	return opts, nil
}

// reconcilePaths declares the files reconcile reads and writes.
func reconcilePaths(j *job, o *reconcileOptions, records []string) {
	j.input("--index", kindIndex, o.index)
	j.input("--records", kindRecords, records...)
	j.input("--password-file", kindOther, o.passwordFile)
	if strings.HasPrefix(o.online, "file:") {
		j.input("--online", kindOther, strings.TrimPrefix(o.online, "file:"))
	}
	j.output("--missing", o.missing)
	j.output("--extra", o.extra)
	j.output("--backfill", o.backfill)
	j.output("--report", o.report)
	j.output("--checkpoint", o.checkpoint)
	j.output("--on-bad quarantine", quarantinePath(o.recs.onBad))
}

// finishReconcile ends the work as Run ended: a failed run's report is
// written at once, to say what failed and with which exit code the
// process ends; a run that succeeded has its report published with the
// other outputs at the commit point, and exits 0 or 1.
func finishReconcile(ctx context.Context, j *job, o *reconcileOptions, rep *reconcile.Report, err error) (map[string]any, error) {
	for _, w := range rep.Warnings {
		fmt.Fprintln(j.inv.stderr, "fpdedup: warning:", w, "(--assume-recipe)")
	}
	out := &reconcileReport{Report: rep}
	if err != nil {
		err = reconcileErr(err)
		out.Error = say(err)
		out.ExitCode = exitCode(underSignal(ctx, err, true))
		if o.report != "" {
			_ = writeReconcileReport(nil, o.report, out) // err says what matters
		}
		return nil, err
	}
	if !rep.Agree {
		out.ExitCode = exitNegative
	}
	if o.report != "" {
		if err := writeReconcileReport(j.grp, o.report, out); err != nil {
			return nil, err
		}
	}
	// Once --apply has written keys online the work is done: the outputs
	// are published whatever signal comes now.
	j.final = rep.Apply != nil && !rep.Apply.DryRun && rep.Apply.Written > 0 ||
		rep.Rebuild != nil && !rep.Rebuild.DryRun && rep.Rebuild.Swapped > 0
	reconcileSummary(j, rep)
	figures := map[string]any{"reconcile": out}
	if !rep.Agree {
		return figures, negativeAnswer{}
	}
	return figures, nil
}

// reconcileReport is what --report holds: the run's figures, then how the
// command ended (its error as the CLI says it, its exit code). The
// figures are reconcile's; the words and the exit code are the CLI's.
type reconcileReport struct {
	*reconcile.Report
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// writeReconcileReport writes the report as indented JSON (& < > kept as
// they are: URLs read better), published with grp at the commit point, or at
// once with a nil grp.
func writeReconcileReport(grp *atomicfile.Group, path string, r *reconcileReport) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return err
	}
	af, err := atomicfile.Create(path)
	if err != nil {
		return fmt.Errorf("cannot write --report: %w", err)
	}
	defer af.Abort()
	if _, err := af.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("cannot write --report: %w", err)
	}
	return grp.Finish(af)
}

// password reads the online store's password from --password-file or the
// environment; it is never taken from the URL or the command line.
func password(t *reconcile.Target, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("cannot read --password-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimSuffix(line, "\r"), nil
	}
	if env := t.PasswordEnv(); env != "" {
		return os.Getenv(env), nil
	}
	return "", nil
}

func reconcileSummary(j *job, r *reconcile.Report) {
	online := "not listed (probe)"
	if r.Counts.OnlyOnline >= 0 {
		online = fmt.Sprint(r.Counts.OnlyOnline)
	}
	if b := r.Bloom; b != nil {
		bloomSummary(j, r, b)
	} else if b := r.RedisBloom; b != nil {
		redisBloomSummary(j, r, b)
	} else {
		j.summary("reconcile (%s): %d offline, %d online values read; both %d, only offline (missing online) %d, only online (unknown offline) %s; %.2f s, %s keys/s",
			r.Mode, r.Index.Fingerprints, r.Online.Values, r.Counts.Both, r.Counts.OnlyOffline, online,
			r.Timings.Compare, humanRate(r.Timings.KeysPerSecond))
	}
	if r.Online.Bad > 0 {
		j.summary("reconcile: %d online values are not fingerprints, e.g. %s", r.Online.Bad, strings.Join(r.Online.BadSamples[:min(3, len(r.Online.BadSamples))], ", "))
	}
	if r.Online.OutsideRange > 0 {
		j.summary("reconcile: %d online fingerprints lie outside the index's partition %s and were not compared", r.Online.OutsideRange, r.Index.Range)
	}
	if r.Online.Note != "" {
		j.summary("reconcile: %s", r.Online.Note)
	}
	if e := r.Etcd; e != nil {
		etcdReadSummary(j, e)
	}
	if rs := r.Records; rs != nil {
		backfill := "" // the records are read for the keys' digests alone, without --backfill
		if rs.Backfill != "" {
			backfill = fmt.Sprintf(", %d written to %s", rs.Written, rs.Backfill)
		}
		j.summary("reconcile: %d records read (%s), %d with keys missing online%s", rs.Records, rs.Format, rs.Missing, backfill)
		if rs.Bad > 0 {
			j.summary("reconcile: %d records without a key were skipped (--on-bad)", rs.Bad)
		}
	}
	if b := r.Rebuild; b != nil && r.RedisBloom != nil {
		redisBloomRebuildSummary(j, r, b)
	} else if b != nil {
		verb := "rebuilt"
		if b.DryRun {
			verb = "would be rebuilt"
		}
		short := ""
		if b.Swapped > b.Rebuilt {
			short = fmt.Sprintf(" (%d more swapped in, short when read back)", b.Swapped-b.Rebuilt)
		}
		j.summary("reconcile: %d of %d shards %s%s on %s from %d truth keys (%d bits), %s written, %d bits set after, %.2f s",
			max(b.Rebuilt, int64(len(b.Shards))*boolInt(b.DryRun)), len(b.Shards), verb, short, b.Target, b.Keys, b.BitsTruth, units.FormatBytes(b.BytesWritten), b.BitsAfter, b.Seconds)
	}
	if a := r.Apply; a != nil {
		verb := "written"
		if a.DryRun {
			verb = "would be written"
		}
		j.summary("reconcile: %s %s to %s in %s, %.2f s, %s keys/s (%d retries, %d missing again before the checkpoint, %d without a record)",
			counted(a.Written, "key"), verb, a.Target, counted(a.Batches, "batch"), a.Seconds, humanRate(a.KeysPerSecond), a.Retries, a.MissingAgain, a.NotInRecords)
	}
	if e := r.Etcd; e != nil {
		etcdWriteSummary(j, e)
	}
	if rb := r.ReadBack; rb != nil && r.RedisBloom != nil {
		redisBloomReadBackSummary(j, r, rb)
	} else if rb != nil {
		readBackSummary(j, rb)
	}
	if r.Agree {
		j.summary("reconcile: the sides agree")
		return
	}
	// Every reason the sides differ, not only the keys missing: a run
	// whose only difference is values that are no fingerprints said "0
	// missing" and nothing else.
	why := fmt.Sprintf("%d missing online after the run", r.Missing)
	if r.ReadBack != nil && r.ReadBack.Short > 0 {
		why += "; " + counted(r.ReadBack.Short, "shard") + " short when read back"
	}
	if n := r.Counts.OnlyOnline; n > 0 {
		why += fmt.Sprintf("; %d online not in the index", n)
	}
	if n := r.Online.Bad; n > 0 {
		why += fmt.Sprintf("; %d online values not fingerprints", n)
	}
	j.summary("reconcile: the sides differ (%s)", why)
}

// readBackSummary says what was read back after the writes: the keys
// written not found, and the bloom shards that fall short.
func readBackSummary(j *job, rb *reconcile.ReadBack) {
	switch {
	case rb.Keys > 0 && rb.NotHeld == 0:
		if rb.Keys == 1 {
			j.summary("reconcile: read back after the writes: the 1 key that was missing is online")
		} else {
			j.summary("reconcile: read back after the writes: the %d keys that were missing are online", rb.Keys)
		}
	case rb.Keys > 0:
		j.summary("reconcile: read back after the writes: %d of the %d keys that were missing are not online (deleted or expired since they were written?), e.g. %s",
			rb.NotHeld, rb.Keys, strings.Join(rb.Samples[:min(3, len(rb.Samples))], ", "))
	}
	for _, sh := range rb.Shards {
		if !sh.Short {
			continue
		}
		found := fmt.Sprintf("is %d bytes with %d bits set", sh.Bytes, sh.Bits)
		switch sh.Type {
		case "none":
			found = "does not exist"
		case "string":
		default:
			found = "holds a " + sh.Type
		}
		from := "the truth's"
		if sh.WantFrom == "audit" {
			from = "those the audit read before the writes"
		}
		j.summary("reconcile: read back after the writes: shard %d (%s) %s, where it must be %d bytes with at least %d bits set (%s): bits were lost after they were written (the shard deleted or flushed, or its server restarted?)",
			sh.Shard, sh.Key, found, sh.WantBytes, sh.WantBits, from)
	}
}

// bloomSummary is an audit's per-shard table (the worst 16 shards by keys
// missing when there are more) and its sizing.
func bloomSummary(j *job, r *reconcile.Report, b *reconcile.BloomReport) {
	j.summary("reconcile (bloom-audit): %d truth keys, %d held by the bloom, %d not (a repeat of any of them passes L2 today); %s of %s (%s) read, %s over the index; %.2f s, %s keys/s",
		r.Index.Fingerprints, b.Held, b.Missing, units.FormatBytes(b.BytesRead), b.Layout, b.Keys, counted(b.Passes, "pass"),
		r.Timings.Compare, humanRate(r.Timings.KeysPerSecond))
	shards := worstShards(j, b.Shards, func(s reconcile.BloomShard) int64 { return s.Missing })
	j.summary("reconcile:   shard  truth keys   missing    fill   fpr now  formula")
	for _, s := range shards {
		missing := shardMissing(s.Missing, s.Rebuilt, s.Rebuild)
		j.summary("reconcile:   %5d  %10d  %8s  %5.1f%%  %7.4f%%  %6.4f%%", s.Shard, s.Keys, missing, 100*s.Fill, 100*s.FPRNow, 100*s.FPRFormula)
	}
	z := b.Sizing
	j.summary("reconcile: sizing: the live %s gives %.4f%% now (the formula: %.4f%% for the truth's keys); %.4f%% needs %d bits a shard, %s in all (live: %s)",
		b.Layout, 100*b.FPRNow, 100*z.LiveFPRTruth, 100*z.TargetFPR, z.BitsNeeded, units.FormatBytes(z.BytesNeeded), units.FormatBytes(z.BytesLive))
}

// worstShards is shards, or when there are more than 16 the 16 missing
// most keys (missing says how many a shard misses), said so: a table of
// thousands of shards is no summary.
func worstShards[S any](j *job, shards []S, missing func(S) int64) []S {
	shards = slices.Clone(shards)
	if len(shards) > 16 {
		slices.SortStableFunc(shards, func(a, b S) int { return cmp.Compare(missing(b), missing(a)) })
		j.summary("reconcile: the 16 shards missing most keys of %d:", len(shards))
		shards = shards[:16]
	}
	return shards
}

// shardMissing is a shard's "missing" cell: the keys it misses, "rebuilt",
// or "-" for one a rebuild named, neither audited nor rebuilt.
func shardMissing(missing int64, rebuilt, rebuild bool) string {
	switch {
	case rebuilt:
		return "rebuilt"
	case rebuild:
		return "-"
	}
	return strconv.FormatInt(missing, 10)
}

// parseShardList reads --rebuild-shard: "all", or shard numbers below n,
// comma-separated.
func parseShardList(s string, n uint64) ([]uint64, error) {
	if s == "all" {
		all := make([]uint64, n)
		for i := range all {
			all[i] = uint64(i)
		}
		return all, nil
	}
	var list []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil || v >= n {
			return nil, usageErrorf("--rebuild-shard %s: want all, or shard numbers 0 to %d, comma-separated", s, n-1)
		}
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// etcdReadSummary says what an etcd prefix held beyond the counts: the
// revision read at, the keys bound to leases.
func etcdReadSummary(j *job, e *reconcile.EtcdReport) {
	if e.Revision > 0 {
		again := ""
		if n := len(e.Compacted); n > 0 {
			again = fmt.Sprintf(" (started again %s: revision %s compacted during the audit)", counted(int64(n), "time"), joinInts(e.Compacted))
		}
		j.summary("reconcile: etcd prefix %q read at revision %d%s: %s in %s, %s of a fingerprint", e.Prefix, e.Revision, again,
			counted(e.Keys, "key"), counted(int64(e.Pages), "page"), counted(e.Repeats, "repeat"))
	}
	if e.Leased > 0 {
		ttl := "none of their leases is live"
		if e.MinTTL >= 0 {
			ttl = fmt.Sprintf("the shortest with %d s to live", e.MinTTL)
		}
		j.summary("reconcile: %s bound to %s (%s; %d already expired): they vanish by design, so a key missing later may have expired", counted(e.Leased, "key"), counted(int64(e.Leases), "lease"), ttl, e.Expired)
	}
}

// etcdWriteSummary says what the compare-and-create transactions and the
// read back found.
func etcdWriteSummary(j *job, e *reconcile.EtcdReport) {
	if e.Txns > 0 || e.Created > 0 || e.Existed > 0 {
		j.summary("reconcile: etcd compare-and-create: %s created, %d found there and left as they were (%d after a lost reply), %s, %d sent again", counted(e.Created, "key"), e.Existed, e.Ambiguous, counted(e.Txns, "transaction"), e.TxnRetry)
	}
	if e.OtherValue > 0 {
		hold := " hold"
		if e.OtherValue == 1 {
			hold = " holds"
		}
		j.summary("reconcile: read back: %s another value than --value's (written first by another writer; never overwritten), e.g. %s", counted(e.OtherValue, "key")+hold, strings.Join(e.OtherValueSamples[:min(3, len(e.OtherValueSamples))], ", "))
	}
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ", ")
}

// reconcileMemSentence says how reconcile shares --mem, with its plan's
// figures (memplan.Reconcile): reconcile --help and the README say it.
func reconcileMemSentence() string {
	return fmt.Sprintf("Memory: reconcile shares --mem out in its plan (memory.plan in --stats-json): an online side read in no order (Redis keys or sets, a file) is sorted in half of it, off the Go heap, whose soft limit is the rest; a bitmap bloom audit reads in passes of what a bit a truth key and %d MiB leave of it, a rebuild holds its shards in what %d MiB leave; RedisBloom's passes and filters are on the Go heap, within what %d MiB of slack, the truth's bits and a chunk of read-ahead (%d MiB at least) leave; the records pass keeps the missing keys' digests or texts in half of it.",
		memplan.BloomAuditReserve>>20, memplan.RebuildReserve>>20, memplan.RedisBloomSlack>>20, memplan.BFChunk>>20)
}
