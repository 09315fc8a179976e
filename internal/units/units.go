// Package units reads and writes the sizes and counts of fpdedup's flags
// and summaries, with one grammar for the product and its benchmark
// harness: sizes in KiB/MiB/GiB/TiB or kB/MB/GB/TB, counts with k/M/G.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a byte size: a plain number of bytes, or a number with
// KiB/MiB/GiB/TiB (powers of 1024) or kB/MB/GB/TB (powers of 1000); K, M,
// G, T alone mean the binary units, as in sort -S.
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"k", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
		{"B", 1}, {"", 1},
	}
	t := strings.TrimSpace(s)
	for _, u := range units {
		if !strings.HasSuffix(t, u.suffix) {
			continue
		}
		num := strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || num == "" || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			break
		}
		bytes := v * u.mult
		if bytes > math.MaxInt64/2 {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return int64(bytes), nil
	}
	return 0, fmt.Errorf("invalid size %q (use e.g. 512MiB, 4GiB, 2GB or a number of bytes)", s)
}

// ParseCount reads a count with an optional k/M/G suffix (powers of 1000).
func ParseCount(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1e6, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1e9, t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || v < 0 || v*mult > math.MaxInt64/2 || v*mult != math.Trunc(v*mult) {
		return 0, fmt.Errorf("invalid count %q (use e.g. 1000, 10k, 10M, 1G)", s)
	}
	return int64(v * mult), nil
}

// FormatBytes prints a byte count in binary units for people.
func FormatBytes(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
		if f < 1024 || u == "TiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}
