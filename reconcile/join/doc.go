// Package join compares the truth index with an online side
// (online.Source) and says where they differ: Compare counts the
// fingerprints both hold, those only the index holds (missing online) and
// those only the online side holds, puts the figures in the report, and
// sends the differences to their outputs (Differences: the missing and
// extra indexes, or a Spool of the missing keys when only the writes need
// them).
//
// How the online side is read: a sorted source (a table read in its
// order) is merge-joined with the index's cursor in one pass, the order
// checked as it is read (ErrUnsorted); an unsorted one (SCAN, SSCAN, a
// file) goes through fpstore's external sorter first, in half the memory
// budget, spilling to Config.TmpDir; with Config.Probe each offline
// fingerprint is looked up online in batches on Config.Conns connections,
// answers taken in index order (a failure is a *ProbeError); an
// online.Auditor (a bloom) is audited by its own code. Reading overlaps
// the join: the source is read on its own goroutine.
//
// Lifetime: Differences are made before Compare and live until the run
// ends; Commit publishes the indexes (at the command's commit point when
// they belong to an atomicfile.Group), Close removes whatever was not
// committed. One run uses them from one goroutine.
package join
