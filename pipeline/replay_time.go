package pipeline

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// parseEventTime reads an event's time field as nanoseconds since the Unix
// epoch: a number of unit (an integer, or a decimal with up to nine digits
// after the point, or a JSON number with an exponent), or an RFC 3339 time
// (2025-12-02T00:00:00.007Z).
func parseEventTime(b []byte, unit int64) (int64, error) {
	// The common case, integer milliseconds, without allocating.
	i, neg := 0, false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		i, neg = 1, b[0] == '-'
	}
	var v int64
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if digits++; digits > 18 {
			return 0, timeRangeError(b)
		}
		v = v*10 + int64(b[i]-'0')
	}
	if digits > 0 && i == len(b) {
		if v > math.MaxInt64/unit {
			return 0, timeRangeError(b)
		}
		if neg {
			return -v * unit, nil
		}
		return v * unit, nil
	}
	if digits > 0 && b[i] == '.' {
		frac, scale := int64(0), int64(1)
		j := i + 1
		for ; j < len(b) && b[j] >= '0' && b[j] <= '9' && scale < 1e9; j++ {
			frac, scale = frac*10+int64(b[j]-'0'), scale*10
		}
		if j == len(b) && j > i+1 {
			if v > math.MaxInt64/unit-1 {
				return 0, timeRangeError(b)
			}
			t := v*unit + frac*unit/scale
			if neg {
				t = -t
			}
			return t, nil
		}
	}
	s := string(b)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		t := f * float64(unit)
		if math.IsNaN(t) || t >= math.MaxInt64 || t <= math.MinInt64 {
			return 0, timeRangeError(b)
		}
		return int64(t), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixNano(), nil
	}
	return 0, fmt.Errorf("%q is not a time: want a number of the time unit since the Unix epoch, or an RFC 3339 time", b)
}

func timeRangeError(b []byte) error {
	return fmt.Errorf("time %q is out of range (nanoseconds since 1970 must fit in 63 bits: years 1678-2262)", b)
}

// formatEventTime shows a time of parseEventTime in messages: RFC 3339 in
// UTC, to the nanosecond where it has one.
func formatEventTime(t int64) string {
	return time.Unix(0, t).UTC().Format(time.RFC3339Nano)
}

// floorDiv is the window number of time t: ⌊t / ttl⌋, rounded down for
// times before the epoch too.
func floorDiv(t, ttl int64) int64 {
	q := t / ttl
	if t%ttl != 0 && t < 0 {
		q--
	}
	return q
}
