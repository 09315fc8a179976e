package units

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"256MiB", 256 << 20, true}, {"1.5GiB", 3 << 29, true},
		{"2GB", 2e9, true}, {"10kB", 10000, true}, {"64K", 64 << 10, true}, {"1TiB", 1 << 40, true},
		{"", 0, false}, {"MiB", 0, false}, {"-1", 0, false}, {"12XB", 0, false}, {"1e30TB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"10", 10, true}, {"10k", 10000, true}, {"10M", 10_000_000, true}, {"1G", 1e9, true}, {"2.5M", 2_500_000, true},
		{"", 0, false}, {"x", 0, false}, {"1.5", 0, false}, {"-3", 0, false},
	} {
		got, err := ParseCount(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCount(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
