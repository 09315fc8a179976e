package main

import (
	"slices"
	"testing"
)

// The shard tables of both blooms: at most 16 rows, those missing most
// keys (ties in their order), said so; a shard's missing cell.
func TestShardTables(t *testing.T) {
	type shard struct{ n, missing int64 }
	var all []shard
	for i := range int64(20) {
		all = append(all, shard{i, i % 5})
	}
	j := &job{}
	got := worstShards(j, all, func(s shard) int64 { return s.missing })
	var names []int64
	for _, s := range got {
		names = append(names, s.n)
	}
	if want := []int64{4, 9, 14, 19, 3, 8, 13, 18, 2, 7, 12, 17, 1, 6, 11, 16}; !slices.Equal(names, want) {
		t.Fatalf("shards %v, want %v", names, want)
	}
	if len(j.lines) != 1 || j.lines[0] != "reconcile: the 16 shards missing most keys of 20:" || all[0].n != 0 {
		t.Fatalf("lines %q; the input reordered: %v", j.lines, all[0])
	}
	j = &job{}
	if got := worstShards(j, all[:16], func(s shard) int64 { return s.missing }); len(got) != 16 || got[0].n != 0 || len(j.lines) != 0 {
		t.Fatalf("16 shards: %v, %q", got, j.lines)
	}
	for _, c := range []struct {
		missing        int64
		rebuilt, named bool
		want           string
	}{{7, false, false, "7"}, {7, true, true, "rebuilt"}, {0, false, true, "-"}} {
		if got := shardMissing(c.missing, c.rebuilt, c.named); got != c.want {
			t.Errorf("%+v: %q", c, got)
		}
	}
}
