package redisbloom

import (
	"fmt"
	"time"
)

// FilterKeyError is a shard's key that is not a RedisBloom filter: missing,
// of another type, or one whose dump's header the module would not load
// (or could not have made: rbloom.ErrBadHeader).
type FilterKeyError struct {
	Shard string // the router's name of the shard
	Key   string
	Type  string // TYPE's answer ("none": missing)
	Err   error  // the header's fault, for a key of the module's type
}

// ModuleType is the TYPE of a RedisBloom filter's key.
const ModuleType = "MBbloom--"

func (e *FilterKeyError) Error() string {
	switch {
	case e.Type == "none":
		return fmt.Sprintf("RedisBloom shard %s: filter %q does not exist (BF.RESERVE makes one; a rebuild of the shard makes it from the truth)", e.Shard, e.Key)
	case e.Type != ModuleType:
		return fmt.Sprintf("RedisBloom shard %s: key %q holds a %s, not a RedisBloom filter (%s)", e.Shard, e.Key, e.Type, ModuleType)
	}
	return fmt.Sprintf("RedisBloom shard %s: filter %q: its dump's header is not one the module would load or could have made: %v", e.Shard, e.Key, e.Err)
}

func (e *FilterKeyError) Unwrap() error { return e.Err }

// DumpError is a filter's dump whose chunks do not make up the filter its
// header describes (rbloom.ErrBadDump): a broken server or proxy, or not
// RedisBloom. Not retried: the server would send it again.
type DumpError struct {
	Shard, Key string
	Err        error
}

func (e *DumpError) Error() string {
	return fmt.Sprintf("RedisBloom shard %s: filter %q: BF.SCANDUMP gave a dump that does not make up its filter (a broken server or proxy?): %v", e.Shard, e.Key, e.Err)
}

func (e *DumpError) Unwrap() error { return e.Err }

// ChangedError is a filter deleted or replaced while it was read: its
// dump is not the filter's whose header was read first (a dump is read
// over many commands), so nothing is said of it.
type ChangedError struct {
	Shard, Key string
	Gone       bool // deleted (a flush, a server restarted empty); else replaced (made again, or loaded anew)
}

func (e *ChangedError) Error() string {
	what := "was replaced (deleted and made again, or loaded anew: its header is not the one read before its bits)"
	if e.Gone {
		what = "was deleted (flushed, or its server restarted empty?)"
	}
	return fmt.Sprintf("RedisBloom shard %s: filter %q %s while the audit read it: rerun the audit", e.Shard, e.Key, what)
}

// ArrivedError is a rebuild refused at its swap: items were added to the
// live filter while the shard was rebuilt, which the rebuilt filter does
// not hold and a bloom cannot list, so swapping it in would lose them
// without a word. The live filter is as it was (and the rebuilt one
// deleted).
type ArrivedError struct {
	Shard, Key  string
	Before, Now uint64        // the live filter's items when the rebuild read it, and at the swap
	Took        time.Duration // from that read to the swap
	Changed     bool          // the filter was replaced, not only added to (Now may be below Before)
}

func (e *ArrivedError) Error() string {
	what := fmt.Sprintf("%d items arrived in it (%d when the rebuild read it, %d at the swap)", e.Now-e.Before, e.Before, e.Now)
	if e.Changed || e.Now < e.Before {
		what = fmt.Sprintf("it was replaced (%d items when the rebuild read it, %d at the swap)", e.Before, e.Now)
	}
	return fmt.Sprintf("RedisBloom shard %s: not rebuilt: %s during the %s the rebuild took; a bloom cannot list its items, so the rebuilt filter, which lacks them, was not swapped in and %q is as it was. Rebuild it with this shard's writers paused; or migrate without a pause, by dual-writing: BF.RESERVE a new filter, have the writers add to both, apply the truth to the new one (its missing items are added, none taken away), then switch to it",
		e.Shard, what, e.Took.Round(time.Millisecond), e.Key)
}
