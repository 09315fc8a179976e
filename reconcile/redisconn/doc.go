// Package redisconn is the connection to a Redis server or a Redis
// Cluster that reconcile's Redis adapters share (the keys and sets, the
// bitmap bloom, the RedisBloom filters): the server a redis:// URL names (Server, ParseServer),
// go-redis's clients opened, pinged and checked (Client: a Cluster whole,
// a single server not a node of one), a pool of prepared-byte pipelines
// for the hot writes (Pool), and which Redis errors a retry may pass
// (Retryable).
//
// A broken or hostile server: every byte a server sends passes through a
// guard (respguard.go) that follows the RESP2 grammar before go-redis or
// Pool reads it, and refuses a reply that declares more than its bounds
// (a string over MaxBulk, a line over MaxLine, arrays nested over
// MaxDepth, more in all than its share of the memory budget,
// ReplyBudget; a client opened with Bounds takes BF.SCANDUMP's larger
// chunks) as a *ReplyError, before anything of its declared size is
// allocated. A reply refused is not retried: the server would send it
// again.
//
// Concurrency and lifetime: a Client and its Pool are safe for concurrent
// use (Config.Conns goroutines write at once) until Close. Every
// connection is tracked by the run's online.Hangup, which closes it at
// once when the run is interrupted.
package redisconn
