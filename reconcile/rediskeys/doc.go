// Package rediskeys is the adapter of the Redis keys and sets that hold a
// dedup store's fingerprints: keys PREFIX<hex> (match=PREFIX*) or members
// <hex> of a set (set=KEY), 32 or 64 hex digits, on one server or in a
// Redis Cluster. Source reads them by SCAN or SSCAN (unsorted: the
// comparison sorts them), a Cluster's masters at once with its slot map
// the same before and after; probes with pipelined EXISTS or SMISMEMBER;
// writes with SET NX (optionally with a TTL) or SADD, and reads back with
// the same read-only probes.
//
// A scan is bounded by what DBSIZE or SCARD said before it (scanBound): a
// cursor that does not come back to 0 is a *ScanBoundError, never a run
// without end. A probe of keys named by whole SHA-256 digests, which a
// 128-bit index cannot name, is a *ProbeWideError.
//
// Concurrency and lifetime: a Source is opened by one run and closed by
// it; Read runs once, Probe, Write and Held from several goroutines at
// once.
package rediskeys
