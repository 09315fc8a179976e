// Package reconcile compares an offline truth index with the online dedup
// store (DESIGN section 5): Redis keys named PREFIX<hex> or members of a
// set, on one server or in a Redis Cluster, the L2 bloom, a MySQL/MariaDB
// table with a BINARY(16|32) or CHAR(32|64) hex fingerprint column, keys
// under an etcd prefix, or a plain export file. It counts
// the fingerprints both sides hold, those only the index holds (missing
// online: the backfill) and those only the online side holds (unknown
// offline: the audit), writes them as indexes, extracts the original
// records of the missing keys for replay (read with the index's key recipe
// through the ingest record layer: lines, csv, tsv, jsonl, parquet), and
// with Options.Apply writes the missing keys online, idempotently, in
// bounded batches, rate-limited, resumable from a checkpoint.
//
// The L2 bloom is audited, not listed (a bloom holds bits, not keys), in
// one of two modes, each a sub-package: the bitmap bloom (bitmapbloom:
// ?bloom=, shards of plain Redis strings, the layout of internal/l2bloom)
// read in passes and tested bit by bit for every truth key, its shards
// rebuilt from the truth with Options.Rebuild; and RedisBloom (redisbloom:
// ?bf=, BF.* filters, internal/rbloom) read with BF.SCANDUMP and tested as
// BF.EXISTS would, its filters rebuilt and loaded with BF.LOADCHUNK.
//
// Memory: every buffer that grows with Options.Mem takes its share from
// the run's plan (MemoryPlan, internal/memplan), which a caller bounding
// the Go heap declares before Run.
//
// This package is the facade a command line calls: Options, Run, the
// online URL (ParseURL, Target), the records pass and the backfill; the
// report and the errors a caller matches are named here whichever package
// holds them. Beneath it, lowest first (TestLayering keeps the order):
//
//   - report: the run's JSON document, every section.
//   - online: the contract between the machinery and the stores'
//     adapters (Source, Config, Retry, the errors every part returns).
//   - join: the index joined with the online side (merge-join,
//     sort-merge-join through the external sorter, probe), and where the
//     differences go; redisconn: the connections to a Redis server or
//     Cluster, each reply checked before it is read.
//   - apply: the writes of the missing keys, the checkpoint, the read back.
//   - etcdkv: an etcd client of its own (scans page by page at one
//     revision, compare-and-create transactions), beneath etcdkeys.
//   - the stores' adapters, none importing another: rediskeys (keys and
//     sets), bitmapbloom, redisbloom, mysqltable, etcdkeys, exportfile.
//     Each says how its store is read, probed, written and read back, and
//     how it fails.
//   - internal/reconciletest: the tests' servers, indexes and CLI runs.
//
// Interruptions: a cancelled context (SIGINT, SIGTERM in the CLI) never
// ends Run with nil or a partial report passed as success. Once Apply
// has begun writing, the error is an *ApplyInterruptedError (keys written,
// the target, the checkpoint saved at that point) so the caller can say
// what was published and how to resume; before that, the error wraps the
// context's cause and context.Canceled. Every connection a run opens is
// closed when its context is done, so a signal acts at once whatever the
// server does.
//
// Secrets: passwords come in Options.Password, never in a URL; every
// message and the report name the online side by its redacted URL, and
// errors are scrubbed of the password in case a driver ever echoes it.
//
// Errors name what is wrong by the Options field, the file's role or the
// URL part, never by a command-line flag; the typed ones carry the facts
// as fields for a command line to say in its own words. The package
// writes nothing but the outputs it is asked for: no report file, no exit
// code, no log lines (QuietRedisLogs silences go-redis's, which are
// process-wide, for a caller that wants that).
package reconcile
