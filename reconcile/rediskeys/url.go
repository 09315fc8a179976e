package rediskeys

import (
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Keys say which keys of a Redis server hold the fingerprints, and how
// they are scanned and named.
type Keys struct {
	Prefix    string // keys are Prefix + hex (match=PREFIX*)
	Set       string // the set's key (set=KEY); "": keys, not members
	ScanCount int    // SCAN/SSCAN COUNT
	HexDigits int    // 32 or 64 when given by hex=; 0: from what is read
}

// ParseKeys reads the keys of a redis:// URL, printed as redacted: match
// (match=PREFIX*, its value) or else set (set=KEY), and how they are
// scanned and named, count= and hex=.
func ParseKeys(redacted, match, set string, q *online.Params) (Keys, error) {
	k := Keys{Set: set}
	if match != "" {
		if !strings.HasSuffix(match, "*") || strings.ContainsAny(match[:len(match)-1], `*?[]\`) {
			return k, online.BadURL(redacted, "match= must be a literal prefix followed by one *, like match=dedup:*")
		}
		k.Prefix = match[:len(match)-1]
	}
	k.ScanCount = 1000
	if c := q.Get("count"); c != "" {
		var err error
		if k.ScanCount, err = strconv.Atoi(c); err != nil || k.ScanCount < 1 {
			return k, online.BadURL(redacted, "count= must be a positive number")
		}
	}
	switch h := q.Get("hex"); h {
	case "":
	case "32", "64":
		k.HexDigits, _ = strconv.Atoi(h)
	default:
		return k, online.BadURL(redacted, "hex= must be 32 or 64")
	}
	return k, nil
}
