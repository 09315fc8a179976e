// Package pipeline runs the streaming jobs over records (package ingest)
// that the commands are made of:
//
//   - Build: fingerprints of every record, sorted and unique, into an index
//     (build.go), spilling sorted runs beyond its memory budget;
//   - Query: each record's answer against an index set, in input order
//     (query.go, ordered.go);
//   - Dedup: first occurrences in input order through a sharded exact
//     seen-set (seen.go), with a bounded mode of runs on disk and a blocked
//     bloom in RAM (seen_lsm.go, bloom.go), and --record's index.
//
// All read their inputs the same way (read.go): files one after another,
// cut into record-aligned chunks, headers peeled off and checked, keyed
// and fingerprinted on every thread.
//
// Concurrency: each job starts its own goroutines and returns when all
// have stopped; a seen-set shard belongs to one goroutine.
package pipeline
