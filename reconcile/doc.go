// Package reconcile compares an offline truth index with the online dedup
// store (DESIGN section 5): Redis keys named PREFIX<hex> or members of a
// set, on one server or in a Redis Cluster, the L2 bloom kept in plain
// Redis strings or as RedisBloom (BF.*) filters, a MySQL/MariaDB table with a BINARY(16|32) or
// CHAR(32|64) hex fingerprint column, or a plain export file. It counts
// the fingerprints both sides hold, those only the index holds (missing
// online: the backfill) and those only the online side holds (unknown
// offline: the audit), writes them as indexes, extracts the original
// records of the missing keys for replay (read with the index's key recipe
// through the ingest record layer: lines, csv, tsv, jsonl, parquet), and
// with Options.Apply writes the missing keys online, idempotently, in
// bounded batches, rate-limited, resumable from a checkpoint.
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
//   - the stores' adapters, none importing another: rediskeys,
//     bitmapbloom, redisbloom, mysqltable, exportfile. Each says how its store is read,
//     probed, written and read back, and how it fails.
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
