package redisbloom

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// TestMissingItems: the items --apply writes, taken from the audit's
// spool (entries in the records' order, each bucket's blocks on disk and
// in memory), are those of the keys found missing, in fingerprint order,
// each with its own fingerprint, shard and item; past the byte limit, none
// (the records give them then).
func TestMissingItems(t *testing.T) {
	// A third missing: one part (layout), and several.
	for _, n := range []int{20_000, 200_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testMissingItems(t, n) })
	}
}

func testMissingItems(t *testing.T, n int) {
	const shards = 4
	r := rand.New(rand.NewPCG(4, 7))
	seen := map[fpstore.Fingerprint]bool{}
	var fps []fpstore.Fingerprint
	for len(fps) < n {
		fp := fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
		if !seen[fp] {
			seen[fp] = true
			fps = append(fps, fp)
		}
	}
	slices.SortFunc(fps, fpstore.Fingerprint.Compare)
	path := filepath.Join(t.TempDir(), "x.fpx")
	reconciletest.WriteIndex(t, path, "", fps)
	x, err := fpstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Template: "t:{*}", Router: router, Item: rbloom.ItemKey}
	tr := &truth{x: x, spec: &spec, count: make([]int64, shards), sp: newSpool(t.TempDir(), shards, 16<<10)}
	defer tr.close()
	missed := make([]uint64, (n+63)/64)
	shardOf := make([]int, n)
	var text int64
	var want []int                   // ranks missing, in order
	for _, rank := range r.Perm(n) { // as the records come
		s := r.IntN(shards)
		shardOf[rank] = s
		item := fmt.Appendf(nil, "item-%d", rank)
		if err := tr.sp.add(s, uint64(rank), item); err != nil {
			t.Fatal(err)
		}
		tr.count[s]++
		if r.IntN(3) == 0 {
			missed[rank>>6] |= 1 << (rank & 63)
			text += int64(len(item))
		}
	}
	for rank := range n {
		if missed[rank>>6]&(1<<(rank&63)) != 0 {
			want = append(want, rank)
		}
	}
	need := missingItemsBytes(int64(len(want)), text)

	b := &Source{spec: spec, truth: tr, missed: missed}
	if items, ok, err := b.MissingItems(context.Background(), need-1); err != nil || ok || items != nil || b.keyIsItem {
		t.Fatalf("over the limit: %d items, %v, %v", len(items), ok, err)
	}
	items, ok, err := b.MissingItems(context.Background(), need)
	if err != nil || !ok || len(items) != len(want) || !b.keyIsItem {
		t.Fatalf("%d items, %v, %v; want %d", len(items), ok, err, len(want))
	}
	for i, rank := range want {
		it := &items[i]
		if it.FP != fps[rank] || b.shardOf(it) != shardOf[rank] || string(b.itemOf(nil, it)) != fmt.Sprintf("item-%d", rank) {
			t.Fatalf("item %d: %v shard %d %q; want rank %d's: %v shard %d", i, it.FP, b.shardOf(it), b.itemOf(nil, it), rank, fps[rank], shardOf[rank])
		}
	}
}
