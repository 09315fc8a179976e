// Package fpstore reads and writes fpdedup indexes: immutable .fpx files of
// sorted unique 128-bit fingerprints, cut into prefix-trie segments that are
// independent FlatBuffers buffers, read through mmap without copying.
// docs/FORMAT.md is the byte-by-byte description; the constants here carry
// its names.
//
// Lifetime: an *Index maps its file until Close. The one slice that
// aliases the mapping is the one Scan hands to its callback: valid only
// while the callback runs. Lookups (Contains, ContainsBatch, Set) return
// answers, and cursors copy into the caller's buffer, so nothing else
// outlives Close.
//
// Concurrency: an *Index and a *Set answer lookups from many goroutines at
// once; a Cursor, a Writer, a Collector and a Lookups each belong to one
// goroutine; a Sorter takes one Collector per goroutine.
//
// Damage: every byte read from a file is checked before it is trusted
// (sizes, checksums, offsets; Go FlatBuffers has no verifier), and a mapped
// page that faults (a file truncated under us, an I/O error) becomes an
// error, never a SIGBUS: reads run with debug.SetPanicOnFault.
//
// Cold reads: a lookup batch in an index not in memory reads its pages as
// planned (coldread.go), priced with the disk's read rates the caller
// gives when it opens the index (WithRates); the package never measures a
// disk, nor reads the environment. With read buffers from the caller
// (WithReadBuffers: a share of its memory plan), cold lookups, single
// ones too, read the pages they need with pread into them (pread.go);
// warm ones read the mapping without a copy.
//
// The package has no CLI concerns: no stdout, no os.Exit, no flags.
package fpstore
