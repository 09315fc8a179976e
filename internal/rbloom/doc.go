// Package rbloom is the one definition of a RedisBloom (BF.*) scalable
// bloom filter as the real module (RedisBloom 2.x to 8.x: Redis Stack,
// Redis 8, managed "Redis with bloom") builds and answers it: the L2 tier
// as online dedup systems run it. reconcile audits, repairs and rebuilds
// live filters through it, and replay --l2 models the tier with it, so
// that both answer exactly as BF.EXISTS and BF.ADD would.
//
// The model. A filter (a key) is a chain of sub-filters. BF.RESERVE key E C
// [EXPANSION X] [NONSCALING] makes one of capacity C and error E/2 (E for
// NONSCALING). BF.ADD tests the item against every sub-filter; present in
// one (all its bits set), the answer is 0 and nothing changes. Otherwise
// it goes to the last sub-filter, after appending a new one of X times the
// last's capacity and half its error if the last already holds its
// capacity (a NONSCALING filter refuses it instead), and the answer is 1.
// An item's bits in a sub-filter derive from one hash pair (Hash: two
// MurmurHash64A), bit i = (A + i·B) mod M, stored least significant bit
// first in a byte. A sub-filter's size comes from its capacity and error
// (SizeLink: bits per entry -ln(E)/ln(2)², hashes ceil(ln(2)·bpe)).
//
// The dump. BF.SCANDUMP key 0 gives a header (Header, ParseHeader: packed
// little-endian fields, header.go), then BF.SCANDUMP key I the sub-filters'
// bit arrays in chunks of at most 16 MiB that never cross a sub-filter,
// each with the next iterator, ending with (0, ""); BF.LOADCHUNK takes the
// same pairs back. Dumps are untrusted: ParseHeader and Reader check every
// field and every chunk before they are used, and nothing is allocated
// that a header asks for beyond the caller's budget (errors.go lists what
// they refuse).
//
// Evaluation. Filter holds a whole chain in memory (a builder's, or one
// Loader read). A chain larger than memory is evaluated in passes: Plan
// cuts the dump into byte ranges, each loaded into a Window from its own
// BF.SCANDUMP iterator, and the keys are tested against each in turn with
// Marks, a bit a key (two while a sub-filter is split between passes).
//
// A dump is not a snapshot: adds while it is read may or may not be in it.
// The module only ever sets bits, and never changes a sub-filter's size,
// so an item whose add was answered before the header was read is found
// in whatever order the chunks are read; one added since may sit in a
// sub-filter appended after the header (not read, or ErrDumpLong at the
// end), so a caller re-asks BF.MEXISTS before it calls an item missing.
// A filter deleted and made again while read is told by reading the
// header again after the chunks (Header.Extends).
//
// Facts here were read in the module's public source (src/sb.c,
// deps/bloom/bloom.c, src/rebloom.c at v2.6.28) and each is checked
// against the module itself by the tests (rbloomtest starts it); no code
// of it is copied (its licence is RSALv2/SSPLv1).
package rbloom
