// Package redisbloom is the adapter of the online L2 tier kept as
// RedisBloom (BF.*) scalable filters, one a shard
// (bf=TEMPLATE&shards=N&route=ROUTER&item=ITEM, Spec): the filters the
// module builds with BF.RESERVE and BF.ADD, as internal/rbloom defines
// them and replay --l2 redisbloom models them.
//
//   - Audit (online.Auditor) reads each shard's filter with BF.SCANDUMP,
//     its header then its bits in passes of what the memory budget holds
//     beside a bit a truth key (rbloom's Plan, Window, Marks), and tests
//     every truth key in its shard (route=all: in every shard) exactly as
//     BF.EXISTS does. A dump is not a snapshot: the keys not found are
//     asked again with BF.MEXISTS, and the header is read again last, so
//     that a filter deleted or replaced meanwhile is an error, not keys
//     missing. The truth's items and shards are functions of the key
//     texts (truth.go): with item=fp and route=all the index alone gives
//     them; otherwise the records (Options.KeyTexts) do, spooled by
//     shard.
//     Each shard audited is also sized (Options.TargetFPR): the capacity
//     and memory its truth keys need (rbloom.Need).
//   - Write adds items with BF.INSERT … NOCREATE ITEMS (BF.MADD that never
//     makes a filter of the module's defaults where a shard's is gone);
//     Held asks BF.MEXISTS; the shards written are read back by their
//     headers, which must extend those the audit read (online.Sharded).
//   - Rebuild (rebuild.go) builds a shard's filter offline as the module
//     would for its truth keys (rbloom.Filter), writes it with
//     BF.LOADCHUNK beside the live one, checks it there and swaps it in
//     with a script only if the live filter's header (its item count) is
//     as the rebuild first read it: an item added meanwhile is never
//     dropped, the swap refused instead.
//
// Errors: a shard's key missing, of another type or with a header the
// module would not load is a *FilterKeyError; a dump whose chunks do not
// make up its header's filter a *DumpError; a filter deleted or replaced
// while read a *ChangedError; a budget too small for an audit a
// *MemError; a rebuild refused because items arrived an *ArrivedError,
// one of a missing filter without parameters a *NoParamsError, one that
// outgrows the budget a *RebuildMemError, a rebuilt filter not as built
// when read back a *RebuiltWrongError.
//
// Concurrency and lifetime: a Source is opened by one run and closed by
// it; Audit, then Rebuild, run once, from the run's goroutine; Write,
// Held and Plan from several goroutines at once.
package redisbloom
