// Package etcdkv reads and writes fingerprint keys held in etcd: the dedup
// metadata that online systems keep as keys PREFIX<hex of SHA-256> with a
// small value, written once by a compare-and-create transaction and
// replicated by Raft (DESIGN.md section 5, "etcd").
//
// It is the etcd store on its own, with no reconcile machinery: Dial
// connects (endpoints, TLS files, a user and password given by the caller,
// never read from a URL and never printed); a Scanner reads every key under
// a prefix in key order, in pages, all at one revision, and turns the keys
// into 128-bit fingerprints; Create writes compare-and-create transactions
// that never overwrite a value; Get reads written keys back; a Template
// makes a value from a record's fields.
//
// Key order is fingerprint order: etcd sorts keys by their bytes, and
// lowercase hex of a fixed width sorts as the number it spells. So only
// lowercase hex of the configured width is a fingerprint key; anything else
// under the prefix (upper case, another width, other text) is counted and
// sampled as a bad key, never trusted, because one such key out of order
// would break a merge join.
//
// What a store adapter does with it, in order: Dial with the URL's
// endpoints and the caller's credentials; Scan with the URL's KeyFormat and
// merge-join the Entries (fingerprints ascending, unique) with the index;
// on a *CompactedError throw the join away and scan again (bounded tries);
// report ScanStats (Bad and BadSamples as "not fingerprints", Repeats,
// Leased, Expired and MinTTL as lease-bound keys, Rev as the snapshot).
// To repair: ParseTemplate the value once (check Fields against the
// records' fields before any write), KeyFormat.Append each missing
// record's SHA-256 as its key, Render its value, Create the batch (from
// several goroutines for --conns), then Get the keys back: each must be
// Found, with the value written where Create says it created it.
//
// Concurrency: a Client is safe for concurrent use (its Create and Get may
// be called from several goroutines, each an independent request); a
// Scanner belongs to one goroutine. Slices a Scanner yields are valid until
// its next call to Next.
package etcdkv
