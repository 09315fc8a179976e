package redisbloom

import (
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// sizeFilter puts in sh the filter its truth keys need for a
// false-positive rate within fpr (0: the filter's own target), its
// expansion and scaling kept.
func sizeFilter(sh *report.RedisBloomShard, h *rbloom.Header, fpr float64) {
	if fpr == 0 {
		fpr = h.TargetError()
	}
	var expansion uint32
	if h.Scaling() {
		expansion = h.Growth
	}
	p, mem, err := rbloom.Need(uint64(max(sh.TruthKeys, 0)), fpr, expansion, !h.Scaling())
	if err != nil {
		return
	}
	sh.SizedFor, sh.NeedCapacity, sh.NeedMemory = fpr, p.Capacity, mem
}

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
