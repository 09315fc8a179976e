// Package gen makes the data fpdedup is measured and tested on: a
// deterministic stream of login/payment-like events (Generate, behind
// `fpdedup gen`) and random 128-bit fingerprints (Fingerprints, the
// input of `fpdedup build --format fp`). It has no dependency beyond the
// standard library, so the product links it without the benchmark harness
// (package bench, command fpdedup-bench).
//
// Generate writes
//
//	user_id,device_id,timestamp_ms,event_type,amount
//	u4821337,d3f9a01c22,1764633600123,login_success,0.00
//
// in which a chosen fraction of records repeats an earlier one, byte for byte.
// Its promise is that Stats.Distinct is exact by construction, so a
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
// Errors begin with "bench:", the name of the command that shows them
// (fpdedup gen), whose messages do not change with the package.
package gen
