// Package apply writes the keys missing online (Missing): in batches of
// Config.Batch on Config.Conns connections at once, paced to Options.Rate,
// each batch retried as the source says (online.Source.Retryable), never
// classified by what the writes answered (a retried write would call a
// key this run created "already there"). Batches are acknowledged in
// order, so the Checkpoint only ever moves to the end of the longest
// prefix all written; a rerun resumes by its own audit, which finds that
// prefix present (and writes again a key of it deleted since). Once written, every
// key is read back with the source's read-only Held (and a
// online.Sharded source's shards whole): whether the sides agree after
// the run rests on that, never on the writes' count.
//
// Errors: a batch that fails after its retries is a *WriteError (what was
// written, the checkpoint to resume from); an interruption once writing
// has begun an *online.ApplyInterruptedError; a failed read back a
// *ReadBackError; a checkpoint of another run or that is no checkpoint a
// *CheckpointError.
//
// Lifetime: Missing runs once a run, after the comparison; its goroutines
// end before it returns. A Checkpoint file is saved about once a second
// and when the run stops, and removed once every key is written.
package apply
