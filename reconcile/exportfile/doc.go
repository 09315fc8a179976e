// Package exportfile is the adapter of an export of the online side, a
// file (file:PATH; "-" is stdin): one hex fingerprint of 32 or 64 digits
// a line, or with keys (reconcile's OnlineFormat "key") one key a line,
// hashed with SHA-256 byte for byte; plain, gzip or zstd, found by their
// magic bytes. It is read whole, never probed or written: those are
// Permanent errors. A line that is not a fingerprint is a
// *NotFingerprintError naming the file and line.
//
// A Source is read once, by the run that opened it.
package exportfile
