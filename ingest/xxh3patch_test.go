package ingest

import (
	"bytes"
	"math/rand/v2"
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
					if trial == 0 {
						span[i] = byte(r.Uint32()) | 1 // (rarely) no byte to patch
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
