package redisbloom

import (
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// describeFilter puts a filter, as its dump was read (h, and the bits set
// in each sub-filter), in its shard's report.
func describeFilter(sh *report.RedisBloomShard, h *rbloom.Header, fill []uint64) {
	sh.Items, sh.Capacity, sh.Memory, sh.Expansion, sh.NonScaling = h.Size, h.Capacity(), h.Memory(), h.Growth, !h.Scaling()
	sh.SubFilters = sh.SubFilters[:0]
	for i := range h.Links {
		l := &h.Links[i]
		sh.SubFilters = append(sh.SubFilters, report.RedisBloomSubFilter{Capacity: l.Entries, Items: l.Size, Error: l.Error,
			Hashes: l.Hashes, Bytes: l.Bytes, Fill: float64(fill[i]) / float64(l.Modulus())})
	}
	sh.FPRNow = h.FPR(fill)
	sh.TargetFPR = h.TargetError()
	sh.Room = h.Room()
	if next, err := h.Next(); err == nil {
		sh.Next = &report.RedisBloomSubFilter{Capacity: next.Entries, Error: next.Error, Hashes: next.Hashes, Bytes: next.Bytes}
	}
}
