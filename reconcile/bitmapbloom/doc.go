// Package bitmapbloom is the adapter of the online L2 tier kept as a
// sharded bloom of plain Redis strings (bloom=TEMPLATE&shards=N&bits=M&k=K,
// laid out as internal/l2bloom says, which replay --l2 models too):
//
//   - Audit (online.Auditor) reads every shard whole with GETRANGE, in
//     passes that fit the memory budget beside a bit a truth key, and tests
//     every truth key's K bits in memory; the report says each shard's
//     fill, the false-positive rate now and the size the truth needs.
//   - Probe and Held ask BITFIELD_RO (GETBIT before Redis 6.2); Write sets
//     bits with SETBIT, which never clears one; the shards written are read
//     back whole (online.Sharded).
//   - Rebuild writes the exact bitmap of the truth's keys beside a live
//     shard (KEY:rebuild), then ORs the live one into it and renames it
//     over the live one in one script, atomically on its node: no bit set
//     online meanwhile is lost, and no reader sees a half-written shard.
//
// Errors: a shard key missing, of another type or another length is a
// *BloomKeyError; a rebuilt segment that lost bits before its swap a
// *RebuiltShortError (not swapped in).
//
// Concurrency and lifetime: a Source is opened by one run and closed by
// it; Audit and Rebuild run once, from the run's goroutine (Rebuild builds
// and writes on goroutines of its own, ended before it returns); Probe,
// Write and Held from several goroutines at once.
package bitmapbloom
