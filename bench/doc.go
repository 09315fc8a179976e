// Package bench makes the data that fpdedup and its peers are measured on,
// and holds the scripts that measure them side by side (DESIGN section 7).
//
// Generate writes a deterministic stream of login/payment-like events,
//
//	user_id,device_id,timestamp_ms,event_type,amount
//	u4821337,d3f9a01c22,1764633600123,login_success,0.00
//
// in which a chosen fraction of records repeats an earlier one, byte for byte.
// Its promise is that GenStats.Distinct is exact by construction, so a
// benchmark or a test can check a dedup tool's answer without keeping a second
// copy of the data or a map of everything seen:
//
//   - Every new record gets a timestamp no earlier record has (the n-th new
//     record's timestamp lies in [base+4n, base+4n+3]), so new records never
//     collide by accident, whatever their other fields are.
//   - Every field of the n-th new record is a pure function of (seed, n), so a
//     repeat re-renders record j from its index instead of remembering it:
//     memory stays constant for 100M or 10G records.
//   - Which positions are repeats is drawn sequentially so that exactly
//     round(Repeat*Records) of them are (never the first record), hence
//     Distinct = Records - round(Repeat*Records) for every seed.
//
// A repeat is "near" (one of the last ~1000 new records: a retried or doubly
// delivered event, the case an online bloom with a short TTL catches) or "far"
// (any earlier new record: a replayed batch or a second data centre, the case
// that needs the exact offline index).
//
// The scripts beside this file:
//
//   - peers.sh installs the peer tools (hyperfine, zstd, the DCSO bloom CLI,
//     awk, DuckDB through npm into bench/.peers).
//   - duckdb-distinct.mjs counts distinct lines of a file with DuckDB
//     (duckdb-peer.mjs: what the DuckDB scripts share).
//   - foundation.sh runs fpdedup build/query and the peers in one hyperfine
//     run per job and writes a markdown table of ratios to bench/results.
//   - dedup.sh, merge.sh and reconcile.sh do the same for dedup (lines, csv,
//     zstd, bounded memory), merge (two-way, partitions stitched, partitioned
//     builds) and reconcile (against the real servers of scripts/services).
//   - benchtool (a command) generates data without the fpdedup CLI and turns
//     hyperfine's JSON into that table, so no parsing is done in shell.
//
// Run (run.go and the files beside it) is `fpdedup bench`: every job as a
// whole process beside the installed peers, medians, CPU and peak RSS,
// in-process lookup latency warm and cold, report.json (schema.json),
// report.md, charts, the issues' targets judged, and a capacity estimate.
package bench
