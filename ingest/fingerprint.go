package ingest

import (
	"crypto/sha256"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/fpdedup/fpdedup/fpstore"
)

// Hash names the function that turns a key into its 128-bit fingerprint. Its
// numeric value may be recorded in an index spec, so values are never reused.
type Hash uint8

const (
	// XXH3 is XXH3-128, the default: the fingerprint prints as xxh128sum does.
	XXH3 Hash = iota
	// SHA256 is the first 16 bytes of SHA-256, for online systems keyed on
	// SHA-256 digests: it prints as `sha256sum | cut -c1-32` does.
	SHA256
)

var hashNames = [...]string{XXH3: "xxh3", SHA256: "sha256"}

// ParseHash reads a --hash value.
func ParseHash(name string) (Hash, error) {
	for h, n := range hashNames {
		if n == name {
			return Hash(h), nil
		}
	}
	return 0, fmt.Errorf("%w %q (valid: xxh3, sha256)", ErrUnknownHash, name)
}

func (h Hash) String() string {
	if int(h) < len(hashNames) {
		return hashNames[h]
	}
	return fmt.Sprintf("Hash(%d)", uint8(h))
}

// Sum fingerprints key, byte for byte as given. It panics on a Hash value
// that ParseHash cannot return, which only a programming error can produce.
func (h Hash) Sum(key []byte) fpstore.Fingerprint {
	switch h {
	case XXH3:
		// xxh128sum prints the canonical (big-endian) form, high half first,
		// which is exactly Fingerprint{Hi, Lo}.
		u := xxh3.Hash128(key)
		return fpstore.Fingerprint{Hi: u.Hi, Lo: u.Lo}
	case SHA256:
		d := sha256.Sum256(key)
		return fpstore.FromBytes(d[:16])
	}
	panic(fmt.Sprintf("ingest: Sum on invalid %v", h))
}
