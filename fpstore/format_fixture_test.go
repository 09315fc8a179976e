package fpstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// The frozen format fixtures (docs/FORMAT.md "Versions"), in the manner of
// pebble's per-version sstable fixtures: testdata/format/vN holds indexes
// written by format version N from a committed keys.txt. Every version this
// build reads (MinFormatVersion to FormatVersion) must have its directory and
// must stay readable forever; the current version's fixtures must also come
// out byte for byte identical when rebuilt from their keys, which pins the
// canonical encoding (docs/FORMAT.md "Canonical bytes").
//
// The fixtures are frozen: there is deliberately no -update flag, and their
// SHA-256 digests are pinned below. A format change is a new version — a new
// FormatVersion, a new testdata/format/vN directory with its own fixtures and
// digests here, a "Versions" and a "Changes" entry in docs/FORMAT.md — never a
// rewrite of an old directory. If this test fails after a change to fpstore,
// schema or a dependency (FlatBuffers), the change altered the bytes of
// format v1: undo it, or make it a new version.

const fixtureRoot = "../testdata/format"

type fixture struct {
	file   string
	hash   ingest.Hash
	spec   fpstore.Spec
	sha256 string // of the frozen file
	// byHand pins a few keys to the digests that standard tools print for
	// them (docs/FORMAT.md "How to check an index by hand"): `printf %s KEY |
	// xxh128sum`, or `printf %s KEY | sha256sum`, whose 64 digits ParseHex
	// cuts to the first 128 bits.
	byHand map[string]string
}

// fixtures lists each version's frozen files, built from that version's
// keys.txt (testdata/format/vN/README.md has the exact commands).
var fixtures = map[uint32]struct {
	keysSHA256 string
	files      []fixture
}{
	1: {
		keysSHA256: "f7c53b72a9940b8b7867a7ac5fe755c489053c68b0c596a3b92e18b03d97e3e4",
		files: []fixture{
			{"small.fpx", ingest.XXH3, fpstore.Spec{Hash: "xxh3"}, "ec39d3f4b1a2198b8e460186fdfe53cfbbd9fe4e3fa9fa237d1345833066b64d", map[string]string{
				"u7919:d44:1700000001237": "cc043779a330a52f9ef2bcfb7a9798dd",
				"crlf-key\r":              "fafc60abe0abf48006b79d935d6b944a",
				"no-final-newline":        "15166229597b75eb7e5d7df69ed02dd5",
				"":                        "99aa06d3014798d86001c324468d497f",
			}},
			{"sha256.fpx", ingest.SHA256, fpstore.Spec{Hash: "sha256"}, "59e0946a391dee19b071336564597e3f55a4e5b020781e550db410ae96287c7d", map[string]string{
				"u7919:d44:1700000001237": "eb616f491c31e5d113dfe8ee29b4bd8e7f4f4ecce0f6474e6f078c6fea61e83d",
				"crlf-key\r":              "1f82aaec2cedbd3777c3994c4065956cac4b858fb48d3dec9fad58b5504884a2",
				"no-final-newline":        "117ded4d8ec7a77bb685e8da429ced9f0079eb961a1fdc233c284ab8f3116221",
				"":                        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			}},
		},
	},
}

func TestFormatFixtures(t *testing.T) {
	for v := uint32(fpstore.MinFormatVersion); v <= fpstore.FormatVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			fx, ok := fixtures[v]
			if !ok {
				t.Fatalf("format v%d has no frozen fixture: add testdata/format/v%d and its entry in fixtures", v, v)
			}
			dir := filepath.Join(fixtureRoot, fmt.Sprintf("v%d", v))
			keys := readFixtureKeys(t, filepath.Join(dir, "keys.txt"), fx.keysSHA256)
			for _, f := range fx.files {
				t.Run(f.file, func(t *testing.T) {
					testFixture(t, v, filepath.Join(dir, f.file), f, keys)
				})
			}
		})
	}
}

func testFixture(t *testing.T, version uint32, path string, f fixture, keys [][]byte) {
	frozen, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256Hex(frozen); got != f.sha256 {
		t.Fatalf("%s changed: sha256 %s, frozen as %s (fixtures never change; a format change is a new version directory)", path, got, f.sha256)
	}

	rep, err := fpstore.Verify(path)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("Verify found problems in a frozen fixture:\n%v", rep.Problems)
	}

	want := distinctFingerprints(f.hash, keys)
	x, err := fpstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Version() != version {
		t.Errorf("Version() = %d, want %d", x.Version(), version)
	}
	if !x.Spec().Equal(f.spec) {
		t.Errorf("Spec() = %+v, want %+v", x.Spec(), f.spec)
	}
	if !x.Range().Whole() {
		t.Errorf("Range() = %v, want the whole fingerprint space", x.Range())
	}
	if x.Len() != uint64(len(want)) {
		t.Errorf("Len() = %d, want %d distinct keys", x.Len(), len(want))
	}
	for i, k := range keys {
		if ok, err := x.Contains(f.hash.Sum(k)); err != nil || !ok {
			t.Fatalf("key %d %q (fingerprint %s): Contains = %v, %v; want present", i+1, k, f.hash.Sum(k), ok, err)
		}
	}
	for key, digest := range f.byHand {
		fp, err := fpstore.ParseHex([]byte(digest))
		if err != nil {
			t.Fatal(err)
		}
		if sum := f.hash.Sum([]byte(key)); sum != fp {
			t.Errorf("key %q: %v.Sum = %s, but the standard tool prints %s", key, f.hash, sum, digest)
		}
		if ok, err := x.Contains(fp); err != nil || !ok {
			t.Errorf("key %q (%s): Contains = %v, %v; want present", key, digest, ok, err)
		}
	}
	// Keys that are not in the set are absent (the filter may pass some, the
	// directory and bucket must then say no).
	for i := 0; i < 10000; i++ {
		fp := f.hash.Sum(fmt.Appendf(nil, "absent-%d", i))
		if _, in := slices.BinarySearchFunc(want, fp, fpstore.Fingerprint.Compare); in {
			continue
		}
		if ok, err := x.Contains(fp); err != nil || ok {
			t.Fatalf("absent fingerprint %s: Contains = %v, %v; want absent", fp, ok, err)
		}
	}
	var all []fpstore.Fingerprint
	if err := x.Scan(func(fps []fpstore.Fingerprint) error {
		all = append(all, fps...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all, want) {
		t.Errorf("Scan gives %d fingerprints that differ from the %d distinct fingerprints of the keys", len(all), len(want))
	}

	if version != fpstore.FormatVersion {
		return // an older version: read only; this build writes the current one
	}
	// The byte-identical rewrite: the bytes are a function of (fingerprint set,
	// spec, version, covered range) alone, whatever the thread count.
	for _, threads := range []int{1, 4} {
		out := filepath.Join(t.TempDir(), "rebuilt.fpx")
		w, err := fpstore.Create(out, fpstore.WriterOptions{Spec: f.spec, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(want...); err != nil {
			w.Abort()
			t.Fatal(err)
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		rebuilt, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rebuilt, frozen) {
			t.Fatalf("threads=%d: rebuilding %s from its keys gives different bytes (%d bytes, frozen %d; first difference at offset %d): the v%d encoding changed",
				threads, path, len(rebuilt), len(frozen), firstDiff(rebuilt, frozen), version)
		}
	}
}

// readFixtureKeys reads keys.txt as `fpdedup build` reads lines: each record
// ends with '\n', which is not part of the key; everything else (a '\r', a
// BOM, invalid UTF-8, an empty line) is; a final record without its
// terminator is a record.
func readFixtureKeys(t *testing.T, path, wantSHA256 string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256Hex(data); got != wantSHA256 {
		t.Fatalf("%s changed: sha256 %s, frozen as %s (check that git did not convert line endings)", path, got, wantSHA256)
	}
	keys := bytes.Split(data, []byte{'\n'})
	if len(keys[len(keys)-1]) == 0 {
		keys = keys[:len(keys)-1] // the last record was terminated
	}
	return keys
}

func distinctFingerprints(h ingest.Hash, keys [][]byte) []fpstore.Fingerprint {
	fps := make([]fpstore.Fingerprint, len(keys))
	for i, k := range keys {
		fps[i] = h.Sum(k)
	}
	slices.SortFunc(fps, fpstore.Fingerprint.Compare)
	return slices.Compact(fps)
}

func sha256Hex(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
