// Package reconcile compares an offline truth index with the online dedup
// store (DESIGN section 5): Redis keys named PREFIX<hex> or members of a
// set, on one server or in a Redis Cluster, a MySQL/MariaDB table with a BINARY(16|32) or CHAR(32|64) hex
// fingerprint column, or a plain export file. It counts the fingerprints
// both sides hold, those only the index holds (missing online: the
// backfill) and those only the online side holds (unknown offline: the
// audit), writes them as indexes, extracts the original records of the
// missing keys for replay (read with the index's key recipe through the
// ingest record layer: lines, csv, tsv, jsonl), and with Options.Apply writes the missing keys
// online, idempotently, in bounded batches, rate-limited, resumable from a
// checkpoint.
//
// How the online side is read:
//
//   - Sorted sources (a table read by one streamed `SELECT C FROM T ORDER BY
//     C`) are merge-joined with the index's cursor in one pass. For BINARY
//     columns the byte order is the fingerprint order; for lowercase hex in
//     CHAR columns it is too. The join checks the order as it reads, so a
//     column whose order is not the fingerprint order (mixed-case hex under
//     a binary collation) is an error, never a wrong count.
//   - Unsorted sources (SCAN, SSCAN, files) go through fpstore's external
//     sorter first, in memory bounded by Options.Mem, spilling sorted runs
//     to Options.TmpDir. In a Redis Cluster SCAN runs on the masters at
//     once (as many as Options.Mem allows: replyBudget) and their pages
//     make one stream; the slot map (CLUSTER SLOTS) taken before and after
//     must match the masters scanned, so a failover or resharding during
//     the scan (FAULTS.md row 24) is an error rather than keys silently
//     missed. Probes and writes go through go-redis's cluster pipelines,
//     which split a batch by node and follow MOVED/ASK.
//   - In probe mode each offline fingerprint is looked up online in
//     pipelined batches (EXISTS, SMISMEMBER, `WHERE C IN (…)`): for audits
//     of a slice, when reading the whole online side costs more.
//
// Faults (FAULTS.md rows 22, 23): a streamed SELECT whose connection dies
// shows only in rows.Err(), which is always checked; the read then resumes
// from the last value (`WHERE C > ?`) with bounded retries and backoff, and
// the number of rows read is compared with a COUNT(*) taken in the same
// snapshot where that is cheap (tables of up to ~2M rows, or &count=1).
// Writes are never classified by SET NX / INSERT IGNORE return values: a
// retry after a lost reply would call a key this run wrote "already there".
// A reconnect that fails is counted as a failed attempt, never a nil
// connection used; after the retries the error says how far the read got.
//
// A broken or hostile server (respguard.go): every byte a Redis server
// sends is checked against the RESP2 grammar before go-redis or respPool
// reads it, and a reply that declares more than its bounds (a string over
// 1 MiB, a line over 64 KiB, arrays nested over 32, more in all than its
// share of Options.Mem) is a *ReplyError before anything of its declared
// size is allocated. A SCAN or SSCAN is bounded by what DBSIZE or SCARD
// said before it (scanBound): a cursor that does not come back to 0 is a
// *ScanBoundError, never a run without end.
//
// A broken or hostile MySQL server (mysqlguard.go): what it sends cannot make
// reconcile allocate what it claims, run for ever or crash. Every
// connection reads through a guard that refuses, before
// the driver sees it, a logical packet over 1 MiB, a result of over 4096
// columns and a value longer than its packet; each packet must come whole
// within Options.Timeout of being asked for (a drip ends there, as
// silence does, and is retried like it). The streamed read stops past
// the rows COUNT(*) said (or four times the row estimate), the replies to
// the other queries and batches end within Options.Timeout, and the
// driver's panics on short packets are recovered. A *BadServerError
// (mysqlguard.go, with the other MySQL server errors) says which server
// sent what, and is not retried; a *SlowServerError is.
//
// Interruptions: a cancelled context (SIGINT, SIGTERM in the CLI) never
// ends Run with nil or a partial report passed as success. Once Apply
// has begun writing, the error is an *ApplyInterruptedError (keys written,
// the target, the checkpoint saved at that point) so the caller can say
// what was published and how to resume; before that, the error wraps the
// context's cause and context.Canceled.
//
// Secrets: passwords come in Options.Password, never in a URL; every
// message and the report name the online side by its redacted URL, and
// errors are scrubbed of the password in case a driver ever echoes it.
//
// Errors name what is wrong by the Options field, the file's role or the
// URL part, never by a command-line flag; the typed ones (errors.go) carry
// the facts as fields for a command line to say in its own words. The
// package writes nothing but the outputs it is asked for: no report file,
// no exit code, no log lines (QuietRedisLogs silences go-redis's, which
// are process-wide, for a caller that wants that).
package reconcile
