// Package etcdkeys is the adapter of the fingerprint keys a dedup store
// keeps under an etcd prefix (etcd://host:port[,host:port…]/?prefix=P,
// keys P<64 hex of SHA-256>, or hex=32), over the etcd client of package
// etcdkv:
//
//   - Read reads every key under the prefix in key order, in pages, all at
//     one revision (a consistent snapshot, however long it runs): sorted,
//     so it merge-joins with the index and no set is held in memory. A key
//     that is not the prefix and lowercase hex of the width is counted and
//     sampled, never trusted; keys bound to leases are counted with the
//     shortest time they have left (Report), so that a key missing later
//     can be told from one expired by design. A revision compacted under
//     the read asks for the comparison again (online.ReadAgainError), at
//     a new revision, up to Config.Retries times.
//   - Write creates keys by compare-and-create transactions
//     (CreateRevision == 0), so an existing value is never overwritten and
//     a transaction sent again after a lost member writes nothing twice;
//     the value comes from a template over the record's fields (Valued:
//     made and checked in the records pass, before any write) or is the
//     same for every key. Held reads the keys back with Get.
//
// Retries are the client's (a request fails over to another member and is
// sent again, Config.Retries times, each within Config.Timeout), so
// Retryable says no: a cluster that stays down fails once, naming its
// members. A cancelled context ends every request at once (gRPC calls
// follow their context), whatever the members do.
//
// Concurrency and lifetime: a Source is opened by one run and closed by
// it; Read runs once a comparison, KeepValue from the records pass's
// goroutine, Write, Held and Plan from several goroutines at once.
package etcdkeys
