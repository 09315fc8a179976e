// Package pipeline runs the streaming jobs over records (package ingest)
// that the commands are made of:
//
//   - Build: fingerprints of every record, sorted and unique, into an index
//     (build.go), spilling sorted runs beyond its memory budget;
//   - Query, QueryKeys: each record's or key's answer against an index set,
//     in input order (query.go, ordered.go);
//   - Dedup: first occurrences in input order through a sharded exact
//     seen-set (seen.go), with a bounded mode of runs on disk and a blocked
//     bloom in RAM (seen_lsm.go, bloom.go), and --record's index; FindFirst
//     says where a --check's repeated key first occurred (dedup.go);
//   - Dedup with KeepLast: last occurrences, by a first pass that tallies
//     each key's last record and a second that writes them (keeplast.go);
//   - Count: each distinct key's first record with its count, in
//     first-occurrence order, by the same two passes (count.go); both
//     tally in a hash table in huge pages that spills to sorted runs and
//     an index beyond its budget (tally.go);
//   - Replay: an online dedup's two bloom tiers simulated over a day of
//     events against the exact truth (replay.go; the simulation
//     replay_sim.go, its tiers replay_tiers.go and, as RedisBloom filters,
//     replay_rbloom.go; event times replay_time.go, parsing replay_parse.go,
//     the report replay_report.go).
//
// All read their inputs the same way (read.go): files one after another,
// cut into record-aligned chunks, headers peeled off and checked, keyed
// and fingerprinted on every thread; a Parquet input is read row group by
// row group, its key columns only (read_parquet.go, over ingest's Parquet
// reader). Each job takes its shares of --mem from its internal/memplan
// plan, made from its options in memory.go; the errors a job returns are
// errors.go.
//
// Concurrency: each job starts its own goroutines and returns when all
// have stopped; a seen-set shard belongs to one goroutine.
package pipeline
