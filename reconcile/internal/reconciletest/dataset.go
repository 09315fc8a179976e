package reconciletest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
)

// Dataset is a known state: truth keys (all in the index), which of them
// are online, and online-only extras.
type Dataset struct {
	Keys    []string // truth, in record order
	Online  []int    // indexes into Keys that are online
	Missing []int    // indexes into Keys that are not
	Extras  []string // keys online but not in the truth
	Dir     string
	Index   string // truth.fpx (sha256)
	Records string // records.txt: one key per line, in Keys order
}

// Key is the i-th truth key: user, device, timestamp.
func Key(i int) string { return fmt.Sprintf("u%d:d%d:%d", i, i%97, 1700000000000+int64(i)) }

// Digest is the SHA-256 of k.
func Digest(k string) [32]byte { return sha256.Sum256([]byte(k)) }

// FPHex is the 32-digit fingerprint of k, as `sha256sum | cut -c1-32`.
func FPHex(k string) string { d := Digest(k); return hex.EncodeToString(d[:16]) }

// FullHex is the 64-digit SHA-256 of k.
func FullHex(k string) string { d := Digest(k); return hex.EncodeToString(d[:]) }

// NewDataset makes n truth keys, every tenth of them missing online, and
// n/100 online-only extras; it writes the records and builds the index.
func NewDataset(t *testing.T, n int) *Dataset {
	t.Helper()
	d := &Dataset{Dir: t.TempDir()}
	var recs bytes.Buffer
	for i := 0; i < n; i++ {
		k := Key(i)
		d.Keys = append(d.Keys, k)
		recs.WriteString(k + "\n")
		if i%10 == 3 {
			d.Missing = append(d.Missing, i)
		} else {
			d.Online = append(d.Online, i)
		}
	}
	for i := 0; i < n/100; i++ {
		d.Extras = append(d.Extras, Key(10_000_000+i))
	}
	d.Records = filepath.Join(d.Dir, "records.txt")
	d.Index = filepath.Join(d.Dir, "truth.fpx")
	if err := os.WriteFile(d.Records, recs.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	Fpdedup(t, d.Dir, nil, "build", "-q", "--hash", "sha256", "-o", d.Index, d.Records).Want(t, 0)
	return d
}

// OnlineKeys are the keys the online side holds: the online truth keys
// and the extras.
func (d *Dataset) OnlineKeys() []string {
	var ks []string
	for _, i := range d.Online {
		ks = append(ks, d.Keys[i])
	}
	return append(ks, d.Extras...)
}

// MissingFPs are the sorted fingerprints of the missing keys.
func (d *Dataset) MissingFPs() []string {
	var fps []string
	for _, i := range d.Missing {
		fps = append(fps, FPHex(d.Keys[i]))
	}
	slices.Sort(fps)
	return fps
}

// ExtraFPs are the sorted fingerprints of the extras.
func (d *Dataset) ExtraFPs() []string {
	var fps []string
	for _, k := range d.Extras {
		fps = append(fps, FPHex(k))
	}
	slices.Sort(fps)
	return fps
}

// MissingRecords is what --backfill must hold: the missing keys' records,
// in record order.
func (d *Dataset) MissingRecords() string {
	var b strings.Builder
	for _, i := range d.Missing {
		b.WriteString(d.Keys[i] + "\n")
	}
	return b.String()
}

// WriteIndex writes fps, sorted and distinct, as an index at path whose
// spec names hash ("" for none).
func WriteIndex(t testing.TB, path, hash string, fps []fpstore.Fingerprint) {
	t.Helper()
	w, err := fpstore.Create(path, fpstore.WriterOptions{Spec: fpstore.Spec{Hash: hash}, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(fps...); err != nil {
		w.Abort()
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}
