// Package mysqltable is the adapter of a fingerprint column of a MySQL or
// MariaDB table (mysql://user@host:port/db?table=T&column=C): BINARY(16) or
// BINARY(32) raw, CHAR(32) or CHAR(64) hex. Source reads the column with
// one streamed `SELECT C FROM T ORDER BY C` (sorted: it merge-joins with
// the index), probes with `WHERE C IN (…)`, writes with multi-row INSERT
// IGNORE, and reads back with `WHERE C IN (…)` of the values written.
//
// Faults: a streamed read whose connection dies shows only in rows.Err(),
// which is always checked; the read resumes after the last value
// (`WHERE C > ?`) with bounded retries, and the rows read are compared
// with a COUNT(*) taken in the same snapshot where that is cheap (Count).
// A reconnect that fails is a failed attempt, never a nil connection used.
//
// A broken or hostile server (mysqlguard.go): every connection reads
// through a guard that refuses, before the driver sees it, a packet over
// 1 MiB, a result of over 4096 columns and a value longer than its packet,
// and makes each packet come whole within Config.Timeout; the driver's
// panics on short packets are recovered. A *BadServerError says which
// server sent what and is not retried; a *SlowServerError is.
//
// Concurrency and lifetime: a Source is opened by one run and closed by
// it; Read runs once, Probe, Write and Held from several goroutines at
// once (database/sql's pool, Config.Conns+2 connections).
package mysqltable
