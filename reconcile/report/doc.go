// Package report is the document a reconcile run fills: its figures, as a
// caller writes them in its JSON report and summarises them. Report holds
// every section, whichever part of the run fills it: the comparison
// (Counts, Samples, OnlineInfo), the records pass (RecordStats), the writes
// and their read back (ApplyStats, ReadBack), a bloom's audit and rebuild
// (BloomReport, RedisBloomReport, RebuildStats). It is the one place that says the report's
// shape, so a store added to reconcile adds its section here.
//
// Only types and the reading of the process's memory: no part of the run
// lives here, and the package imports none of reconcile's. A Report is
// filled by one run, from one goroutine at a time (the parts that write it
// run one after the other), and read once the run has returned.
package report
