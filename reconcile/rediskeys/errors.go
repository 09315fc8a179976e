package rediskeys

import "fmt"

// A ProbeWideError: a probe of a Redis side whose key names are whole
// SHA-256 digests (hex=64), which a 128-bit index cannot name; reading
// the whole side (no Options.Probe) compares them.
type ProbeWideError struct {
	Target string // the online side's redacted URL
}

func (e *ProbeWideError) Error() string {
	return fmt.Sprintf("%s names keys by whole SHA-256 digests (hex=64), which a 128-bit index cannot probe: compare without Options.Probe (SCAN and merge-join) instead", e.Target)
}

// A ScanBoundError is a SCAN or SSCAN whose cursor did not come back to
// 0 within what the store's size justifies: keys (or calls) far beyond
// what DBSIZE or SCARD said before the scan. A Redis server returns each
// key at least once and a few more times only while its table is resized;
// this is a broken server, or a store growing much faster than it is read.
type ScanBoundError struct {
	Target    string // the online side's redacted URL
	Server    string // the node scanned (host:port)
	Command   string // "SCAN" or "SSCAN"
	Counted   string // what said the size: "DBSIZE" or "SCARD"
	Expected  int64  // what it said
	Count     int    // COUNT asked per call
	Values    int64  // values returned when the scan was stopped
	Calls     int64  // calls made
	MaxValues int64  // the bounds (scanBound)
	MaxCalls  int64
}

func (e *ScanBoundError) Error() string {
	return fmt.Sprintf("reading %s: %s on %s returned %d values in %d calls and its cursor has not come back to 0, past the bound of %d values or %d calls that %s %d (COUNT %d) allows: a broken server, or a store growing much faster than it is read; rerun when it is quieter",
		e.Target, e.Command, e.Server, e.Values, e.Calls, e.MaxValues, e.MaxCalls, e.Counted, e.Expected, e.Count)
}
