package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pattern gives n deterministic bytes covering all byte values, for keys long
// enough to reach every XXH3 code path (0, 1-3, 4-8, 9-16, 17-128, 129-240,
// >240 bytes) and SHA-256's multi-block path.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + 7)
	}
	return b
}

// The literals below were printed by xxh128sum 0.8.1 and coreutils sha256sum
// (`printf %s KEY | xxh128sum`, `... | sha256sum | cut -c1-32`), so they pin
// the fingerprints to what the standard tools and online systems compute.
var goldenFingerprints = []struct {
	key          string
	xxh3, sha256 string
}{
	{"", "99aa06d3014798d86001c324468d497f", "e3b0c44298fc1c149afbf4c8996fb924"},
	{"a", "a96faf705af16834e6c632b61e964e1f", "ca978112ca1bbdcafac231b39a23dc4d"},
	{"abc", "06b05ab6733a618578af5f94892f3950", "ba7816bf8f01cfea414140de5dae2223"},
	{"u1:d1:1700000000000", "f8cfd8db0cd421ff2e467260fc3bfc2b", "28c7f88737af59130803ca9d276bdbcf"},
	{"\x00", "a6cd5e9392000f6ac44bdff4074eecdb", "6e340b9cffb37a989ca544e6bb780a2c"},
	{"a\x00b", "39797789ed4c7ea0d5a06cd078125351", "59b271ae1bbcb1d31d41929817f4b16f"},
	{"a\r", "bf9a3e3423f4df80df797650d359c939", "961a57df036f6c4f44ca8a054271c45e"},
	{"u\xff:d:1", "815a27657aa32fa7ac24aecb5184bee9", "ff708f9eb91e9b566465089bcb272c8a"},
	{"\xef\xbb\xbfa", "55695726a2ad41290b97e1e7ecd2e6ac", "1951c7860e968e742658b3af34e60741"},
	{" a ", "7f81ca2098753bc739b0af816af18ba8", "cbf7f30004f3667cb093b3c7b55169a9"},
	{string(pattern(8)), "803c675a846cc6c256bb836ceb6d4baa", "4fb900ca3f5832fcc475b79bf07217bf"},
	{string(pattern(9)), "d46556872d230f224376673580310154", "1a4d14ade81567725e079c6fc24507fe"},
	{string(pattern(16)), "650fe308c566747df853dd94614dfa07", "f087c7ff57988205ab8885ecbfca8a77"},
	{string(pattern(17)), "18217300b5132d5a78c349fe81b2f26c", "b6ff0191041cc77b1ef514adaed53fdd"},
	{string(pattern(128)), "b4f87b99d2db8a511e04fad9f0cacb4d", "cc548ca2dec1f6fe4f58b2e27aa9c752"},
	{string(pattern(129)), "6881633650cd8924c51bc887976aef63", "81e89a7b2911aaa7795f9e3d4910cb47"},
	{string(pattern(240)), "de57aab31e77a2ff93e173833f75ab66", "ba56c3138ebb08e71dc4158f1ecbeda5"},
	{string(pattern(241)), "92b991a7192f3f080b3b630948ce4a00", "5ac5b664d57ad40f1666748497f314aa"},
	{string(pattern(1000)), "f534f51e82a81d29989765d0ea7a5ecd", "5097e7d587352f5097062ae679f37bda"},
	{string(pattern(4096)), "49d3842b33d51e8aa3c19f8174cde0bb", "d41d438c379110c7f7b2c561b1f04f26"},
	{string(pattern(1048576)), "e3503d8de40743b7269eb834f6c110a9", "06b7bbfb7824aa03382051691630eb26"},
}

func TestSumGolden(t *testing.T) {
	for _, g := range goldenFingerprints {
		name := fmt.Sprintf("%q", g.key)
		if len(name) > 40 {
			name = fmt.Sprintf("len%d", len(g.key))
		}
		t.Run(name, func(t *testing.T) {
			if got := XXH3.Sum([]byte(g.key)).String(); got != g.xxh3 {
				t.Errorf("xxh3 = %s, want %s", got, g.xxh3)
			}
			if got := SHA256.Sum([]byte(g.key)).String(); got != g.sha256 {
				t.Errorf("sha256 = %s, want %s", got, g.sha256)
			}
		})
	}
}

func TestParseHash(t *testing.T) {
	for _, h := range []Hash{XXH3, SHA256} {
		got, err := ParseHash(h.String())
		if err != nil || got != h {
			t.Errorf("ParseHash(%q) = %v, %v", h.String(), got, err)
		}
	}
	for _, bad := range []string{"", "XXH3", "md5", "sha-256", "xxh64"} {
		_, err := ParseHash(bad)
		if !errors.Is(err, ErrUnknownHash) {
			t.Errorf("ParseHash(%q) error = %v, want ErrUnknownHash", bad, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "xxh3") || !strings.Contains(msg, "sha256") {
			t.Errorf("ParseHash(%q) error %q does not list the valid names", bad, msg)
		}
	}
}

func TestSumDoesNotAllocate(t *testing.T) {
	key := []byte("u1:d1:1700000000000")
	for _, h := range []Hash{XXH3, SHA256} {
		if n := testing.AllocsPerRun(100, func() { h.Sum(key) }); n != 0 {
			t.Errorf("%v.Sum allocates %v times per call", h, n)
		}
	}
}

// TestSumAgainstTools compares random keys (NUL, CR, LF, invalid UTF-8, every
// length class) with the standard tools, when they are installed.
func TestSumAgainstTools(t *testing.T) {
	tools := map[Hash]string{XXH3: "xxh128sum", SHA256: "sha256sum"}
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	var files []string
	var keys [][]byte
	for i := 0; i < 200; i++ {
		n := rng.IntN(300)
		if i%20 == 0 {
			n = rng.IntN(100_000)
		}
		key := make([]byte, n)
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		f := filepath.Join(dir, fmt.Sprintf("k%03d", i))
		if err := os.WriteFile(f, key, 0o600); err != nil {
			t.Fatal(err)
		}
		files, keys = append(files, f), append(keys, key)
	}
	for h, tool := range tools {
		t.Run(tool, func(t *testing.T) {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s not on PATH", tool)
			}
			out, err := exec.Command(tool, files...).Output()
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			i := 0
			for ; sc.Scan(); i++ {
				fields := strings.Fields(sc.Text())
				if len(fields) != 2 || fields[1] != files[i] {
					t.Fatalf("unexpected %s output line %q", tool, sc.Text())
				}
				if got, want := h.Sum(keys[i]).String(), fields[0][:32]; got != want {
					t.Errorf("key %d (%d bytes): %v = %s, %s says %s", i, len(keys[i]), h, got, tool, want)
				}
			}
			if i != len(files) {
				t.Fatalf("%s printed %d lines for %d files", tool, i, len(files))
			}
		})
	}
}

func BenchmarkSum(b *testing.B) {
	for _, h := range []Hash{XXH3, SHA256} {
		for _, n := range []int{20, 50, 200} {
			key := pattern(n)
			b.Run(fmt.Sprintf("%v/%dB", h, n), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					h.Sum(key)
				}
			})
		}
	}
}
