package ingest

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// patchedReference is what xxh3Patched must equal: the library's hash of
// the patched copy.
func patchedReference(span []byte, from, to byte) [2]uint64 {
	fp := XXH3.Sum(bytes.ReplaceAll(span, []byte{from}, []byte{to}))
	return [2]uint64{fp.Hi, fp.Lo}
}

// TestXXH3Patched: every length the function takes, spans dense with the
// byte to patch and without it, and bytes next to it that a word-wise
// patch could confuse (from±1, 0x80 above it).
func TestXXH3Patched(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for l := 17; l <= 128; l++ {
		for _, c := range []struct{ from, to byte }{{',', ':'}, {'\t', '|'}, {0, 0xff}, {0xff, 0}, {',', ','}} {
			for trial := range 20 {
				span := make([]byte, l)
				for i := range span {
					switch r.IntN(4) {
					case 0:
						span[i] = c.from
					case 1:
						span[i] = c.from + 1
					case 2:
						span[i] = c.from ^ 0x80
					default:
						span[i] = byte(r.Uint32())
					}
					if trial == 0 && span[i] == c.from { // no byte to patch
						span[i]++
					}
				}
				fp := xxh3Patched(span, c.from, c.to)
				if got, want := [2]uint64{fp.Hi, fp.Lo}, patchedReference(span, c.from, c.to); got != want {
					t.Fatalf("len %d, %q -> %q, %q: %x, want %x", l, c.from, c.to, span, got, want)
				}
			}
		}
	}
}

func FuzzXXH3Patched(f *testing.F) {
	f.Add([]byte("u1918327,d7029f77dd,1764633600002"), byte(','), byte(':'))
	f.Add(bytes.Repeat([]byte{0, 1, 0x80, ','}, 32), byte(0), byte(','))
	f.Fuzz(func(t *testing.T, data []byte, from, to byte) {
		if len(data) < 17 || len(data) > 128 {
			return
		}
		fp := xxh3Patched(data, from, to)
		if got, want := [2]uint64{fp.Hi, fp.Lo}, patchedReference(data, from, to); got != want {
			t.Fatalf("%q, %q -> %q: %x, want %x", data, from, to, got, want)
		}
	})
}

func BenchmarkXXH3Patched(b *testing.B) {
	span := []byte("u1918327,d7029f77dd,1764633600002")
	var sink uint64
	b.Run("patched", func(b *testing.B) {
		for b.Loop() {
			sink += xxh3Patched(span, ',', ':').Lo
		}
	})
	b.Run("copy+library", func(b *testing.B) {
		buf := make([]byte, 0, 64)
		for b.Loop() {
			buf = append(buf[:0], span...)
			buf[8], buf[19] = ':', ':'
			sink += XXH3.Sum(buf).Lo
		}
	})
	_ = sink
}

// TestFingerprintLengths: Keyer.Fingerprint equals h.Sum of Key's key for
// keys of adjacent columns whose span is 15 to 130 bytes (both sides of
// the patched path's 17 and 128), csv and tsv, a separator that is the
// delimiter and one that is not, the first record with a BOM and "\r\n".
func TestFingerprintLengths(t *testing.T) {
	for _, f := range []Format{FormatCSV, FormatTSV} {
		delim := ","
		if f == FormatTSV {
			delim = "\t"
		}
		for _, sep := range []string{":", delim} {
			k, err := NewKeyer(KeySpec{Format: f, Keys: []string{"2", "3", "4"}, Sep: sep}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for n := 15; n <= 130; n++ {
				// fields 2-4 span n bytes: two delimiters and n-2 bytes
				a := (n - 2) / 3
				rec := "x" + delim + strings.Repeat("a", a) + delim + strings.Repeat("b", a) + delim + strings.Repeat("c", n-2-2*a) + delim + "z\r\n"
				for _, first := range []bool{false, true} {
					in := rec
					if first {
						in = bom + rec
					}
					key, err := k.Key([]byte(in), first)
					if err != nil || len(key) != n {
						t.Fatalf("%q: key %q (%d bytes), %v; want %d bytes", in, key, len(key), err, n)
					}
					want := XXH3.Sum(key)
					for _, simple := range []bool{false, true} {
						if got, err := k.Fingerprint([]byte(in), first, simple, XXH3); err != nil || got != want {
							t.Fatalf("%v sep %q, %d bytes, first %v, simple %v: %v, %v; want %v", f, sep, n, first, simple, got, err, want)
						}
					}
				}
			}
		}
	}
}
