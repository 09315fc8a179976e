// Package online is the contract between reconcile's machinery (the
// comparison in package join, the writes in package apply) and the
// adapters of the online stores (Redis keys and sets, the bitmap bloom,
// RedisBloom filters, MySQL, a file export), each a package of its own:
//
//   - Source is an opened online side: read whole, probed, written and read
//     back, with its own Retryable saying which of its errors pass with
//     time. An Auditor is audited rather than listed (a bloom holds bits,
//     not keys); a Sharded source is read back a shard at a time.
//   - Item is a key to write; ReadStats the figures of a read.
//   - Config is what every part beneath reconcile's facade reads of the
//     run's Options (timeouts, retries, memory, pace), and Retry the one
//     retry loop with its backoff.
//   - Pacer paces keys a second from the first key; Ordered runs batches on
//     several connections and hands them back in order; Hangup closes the
//     run's connections when it is interrupted.
//   - The errors every part may return, which callers match with
//     errors.As: FileError, ApplyInterruptedError (and Interrupted, the
//     error of any other interrupted run), URLError. "Options" in their
//     docs are reconcile's.
//
// Concurrency and lifetime: a Config is made once a run and only read
// after, by many goroutines. A Source is used by the run that opened it
// until it is closed; Read is called once, from one goroutine, while
// Probe, Write and Held may be called from Config.Conns goroutines at once.
// A Pacer and a Hangup are safe for concurrent use; a ReadStats belongs to
// one read (its Values alone is atomic).
package online
