package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/reconcile"
)

// The summary of a run against RedisBloom filters (?bf=…), and
// --rebuild-shard's shard names: the RedisBloom store's words, kept apart
// from the words every store shares (reconcile.go).

// redisBloomSummary is an audit of RedisBloom filters: a line in all, and
// a table of the shards (the 16 missing most keys when there are more).
func redisBloomSummary(j *job, r *reconcile.Report, b *reconcile.RedisBloomReport) {
	from := "the index's fingerprints"
	if b.TruthFrom == "records" {
		from = fmt.Sprintf("the keys of %s, %d of them not in the index", counted(b.Records, "record"), b.RecordsNotInIndex)
	}
	j.summary("reconcile (redisbloom-audit): %d truth keys tested (%s), %d held by the filters, %d not (a repeat of any of them passes L2 today); %s of %d filters read in %s; %.2f s",
		b.TruthKeys, from, b.Held, b.Missing, units.FormatBytes(b.BytesRead), len(b.Shards), counted(b.Passes, "pass"), r.Timings.Compare)
	if b.Rechecked > 0 {
		j.summary("reconcile: %d keys not in the dumps as read were found when asked again (%s): added while the audit read them", b.Rechecked, askedAgain(b.Shards))
	}
	if b.Unaudited > 0 {
		j.summary("reconcile: %d of the index's %d fingerprints are not audited: no record among --records has their key (give the records the index was built from)", b.Unaudited, r.Index.Fingerprints)
	}
	shards := worstShards(j, b.Shards, func(s reconcile.RedisBloomShard) int64 { return s.Missing })
	const row = "reconcile:   %5s  %10s  %10s  %8s  %11s  %10s  %8s  %8s  %9s  %s"
	j.summary(row, "shard", "items", "truth keys", "missing", "sub-filters", "capacity", "fpr now", "target", "memory", "room")
	for _, s := range shards {
		missing := shardMissing(s.Missing, s.Rebuilt, s.Rebuild)
		room := strconv.FormatUint(s.Room, 10)
		if s.NonScaling {
			room += " (nonscaling)"
		}
		j.summary(row, s.Shard, strconv.FormatUint(s.Items, 10), strconv.FormatInt(s.TruthKeys, 10), missing, strconv.Itoa(len(s.SubFilters)),
			strconv.FormatUint(s.Capacity, 10), fmt.Sprintf("%.4f%%", 100*s.FPRNow), fmt.Sprintf("%.4f%%", 100*s.TargetFPR), units.FormatBytes(int64(s.Memory)), room)
	}
	if b.TargetFPR > 0 {
		redisBloomSizing(j, b.TargetFPR, shards)
	}
}

// parseShardNames reads --rebuild-shard of RedisBloom filters: "all", or
// shards by the router's names (0 … N-1, or a ring's nodes),
// comma-separated.
func parseShardNames(s string, n int, name func(int) string) ([]uint64, error) {
	if s == "all" {
		return parseShardList(s, uint64(n))
	}
	byName := make(map[string]uint64, n)
	var names []string
	for i := range n {
		byName[name(i)] = uint64(i)
		if i < 8 {
			names = append(names, name(i))
		}
	}
	if n > 8 {
		names = append(names, "…")
	}
	var list []uint64
	for _, f := range strings.Split(s, ",") {
		v, ok := byName[f]
		if !ok {
			return nil, usageErrorf("--rebuild-shard %s: %q names no shard: want all, or shards' names (%s), comma-separated", s, f, strings.Join(names, ", "))
		}
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list, nil
}

// redisBloomSizing is --fpr's sizing of the shards shown: the filter each
// one's truth keys need, beside what it has.
func redisBloomSizing(j *job, fpr float64, shards []reconcile.RedisBloomShard) {
	j.summary("reconcile: sized for a false-positive rate of %s (--fpr), the truth keys of each shard need BF.RESERVE at that error with this capacity (its expansion kept), beside what it has now:", percent(fpr))
	const row = "reconcile:   %5s  %10s  %12s  %10s  %10s  %10s"
	j.summary(row, "shard", "truth keys", "need capacity", "memory", "capacity", "memory")
	for _, s := range shards {
		if s.NeedCapacity == 0 {
			continue
		}
		j.summary(row, s.Shard, strconv.FormatInt(s.TruthKeys, 10), strconv.FormatUint(s.NeedCapacity, 10), units.FormatBytes(int64(s.NeedMemory)),
			strconv.FormatUint(s.Capacity, 10), units.FormatBytes(int64(s.Memory)))
	}
}

func percent(f float64) string {
	return strconv.FormatFloat(100*f, 'g', 4, 64) + "%"
}

// redisBloomRebuildSummary is --rebuild-shard of RedisBloom filters.
func redisBloomRebuildSummary(j *job, r *reconcile.Report, b *reconcile.RebuildStats) {
	if b.DryRun {
		j.summary("reconcile: %s would be rebuilt on %s from %d truth keys (stdout says how), %.2f s", counted(len(b.Shards), "filter"), b.Target, b.Keys, b.Seconds)
		return
	}
	short := ""
	if b.Swapped > b.Rebuilt {
		short = fmt.Sprintf(" (%d more swapped in, short when read back)", b.Swapped-b.Rebuilt)
	}
	j.summary("reconcile: %d of %s rebuilt%s on %s from %d truth keys: %s written with BF.LOADCHUNK beside the live ones, checked, swapped in; %.2f s",
		b.Rebuilt, counted(len(b.Shards), "filter"), short, b.Target, b.Keys, units.FormatBytes(b.BytesWritten), b.Seconds)
}

// redisBloomReadBackSummary says what was read back after --apply or
// --rebuild-shard wrote RedisBloom filters.
func redisBloomReadBackSummary(j *job, r *reconcile.Report, rb *reconcile.ReadBack) {
	what := "the keys that were missing"
	if r.Rebuild != nil {
		what = "a sample of the rebuilt filters' truth keys"
	}
	how := readBackHow(rb)
	switch {
	case rb.Keys > 0 && rb.NotHeld == 0:
		j.summary("reconcile: read back after the writes (%s): %s, %d, are all held", how, what, rb.Keys)
	case rb.Keys > 0:
		j.summary("reconcile: read back after the writes (%s): %d of %s, %d, are not held (the filter deleted or replaced since?), e.g. %s",
			how, rb.NotHeld, what, rb.Keys, strings.Join(rb.Samples[:min(3, len(rb.Samples))], ", "))
	}
	for _, sh := range rb.Shards {
		if !sh.Short {
			continue
		}
		found := fmt.Sprintf("holds %d items", sh.Items)
		switch {
		case sh.Type == "none":
			found = "does not exist"
		case sh.Type != reconcile.RedisBloomType:
			found = "holds a " + sh.Type
		}
		from := "the rebuilt filter's"
		if sh.WantFrom == "audit" {
			from = "those the audit read before the writes"
		}
		j.summary("reconcile: read back after the writes: filter %s %s, where it must be the filter written or one grown from it, holding at least %d items (%s): it was deleted, flushed or replaced since",
			sh.Key, found, sh.WantItems, from)
	}
}

// askedAgain says how the shards that asked again did (BF.MEXISTS, their
// dumps read again, or some each way).
func askedAgain(shards []reconcile.RedisBloomShard) string {
	var ways []string
	for _, s := range shards {
		if s.AskedAgain != "" && !slices.Contains(ways, s.AskedAgain) {
			ways = append(ways, s.AskedAgain)
		}
	}
	slices.Sort(ways)
	return strings.Join(ways, "; ")
}

// readBackHow says how the keys were read back: asked with BF.MEXISTS,
// tested in the filters' dumps read whole, or some each way.
func readBackHow(rb *reconcile.ReadBack) string {
	whole := 0
	for _, sh := range rb.Shards {
		if sh.DumpRead {
			whole++
		}
	}
	switch {
	case whole == 0:
		return "BF.MEXISTS"
	case whole == len(rb.Shards):
		return fmt.Sprintf("tested in the dumps of the filters written to, read whole: %s, %s", counted(whole, "filter"), units.FormatBytes(rb.BytesRead))
	}
	return fmt.Sprintf("tested in the dumps of %s of the %d written to, read whole, %s; BF.MEXISTS in the others", counted(whole, "filter"), len(rb.Shards), units.FormatBytes(rb.BytesRead))
}
