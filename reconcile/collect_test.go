package reconcile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// TestCollectSortsAmortized: the digests and key texts the records pass
// collects for --apply are sorted and their repeats dropped when they
// reach their limit, and a collection left just under it is not sorted
// again at every key after. Under a limit of 100: 93 distinct keys, then
// 20,000 repeats of them, are kept (93) in a sort every 7 keys; 99
// distinct keys, which before afterSlack were sorted again at each of
// the 20,000 repeats, are refused at the first sort; and so are 120.
func TestCollectSortsAmortized(t *testing.T) {
	fp := func(i int) fpstore.Fingerprint {
		return fpstore.Fingerprint{Hi: uint64(i)*0x9e3779b97f4a7c15 + 1, Lo: uint64(i)}
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	run := func(distinct, repeats int) (*recordsReader, error) {
		var digs [][32]byte
		var items []online.Item
		r := &recordsReader{st: &RecordStats{}, batch: &recordBatch{},
			collect: &digs, maxDigests: 100, keyed: &items, maxKeyBytes: 100 * (itemBytes + 6)}
		p := r.batch
		for i := range distinct + repeats {
			k := i % distinct
			p.fps, p.digs, p.kept, p.hits = append(p.fps[:0], fp(k)), append(p.digs[:0], [32]byte{byte(k), byte(k >> 8)}), append(p.kept[:0], key(k)), append(p.hits[:0], 0)
			if err := r.keep(); err != nil {
				return r, err
			}
		}
		return r, nil
	}
	r, err := run(93, 20_000)
	if err != nil {
		t.Fatal(err)
	}
	if r.sorts > 2*(20_000/6+2) {
		t.Errorf("%d sorts for 93 distinct keys and 20,000 repeats under a limit of 100", r.sorts)
	}
	if items := sortUniqueItems(*r.keyed); len(items) != 93 {
		t.Errorf("%d key texts kept, want 93", len(items))
	}
	// After thousands of sorts every key text kept is still its
	// fingerprint's.
	texts := map[fpstore.Fingerprint]string{}
	for i := range 93 {
		texts[fp(i)] = string(key(i))
	}
	for _, it := range *r.keyed {
		if string(it.Key) != texts[it.FP] {
			t.Fatalf("the key text of %v is %q, want %q", it.FP, it.Key, texts[it.FP])
		}
	}
	if digs := sortUnique(*r.collect); len(digs) != 93 {
		t.Errorf("%d digests kept, want 93", len(digs))
	}
	for _, distinct := range []int{99, 120} {
		r, err := run(distinct, 20_000)
		var de *TooManyDigestsError
		if !errors.As(err, &de) || de.Max != afterSlack(100) || r.sorts != 1 {
			t.Errorf("%d distinct keys under a limit of 100: %v after %d sorts, want TooManyDigestsError{%d} at the first", distinct, err, r.sorts, afterSlack(100))
		}
	}
	// The key texts alone (no digests collected): refused by their own error.
	var items []online.Item
	r = &recordsReader{st: &RecordStats{}, batch: &recordBatch{}, keyed: &items, maxKeyBytes: 100 * (itemBytes + 6)}
	p := r.batch
	for i := range 200 {
		p.fps, p.kept, p.hits = append(p.fps[:0], fp(i)), append(p.kept[:0], key(i)), append(p.hits[:0], 0)
		if err = r.keep(); err != nil {
			break
		}
	}
	var ke *TooManyKeyTextsError
	if !errors.As(err, &ke) || ke.Max != afterSlack(100*(itemBytes+6)) {
		t.Errorf("200 distinct key texts under a limit of 100: %v", err)
	}
}

// TestSortUniqueItems: the items sorted by fingerprint, one of each, as a
// plain sort and compaction leave them, whether their fingerprints spread
// over the whole range (split among the cores by their leading bits),
// share their leading bits (no split, or a lopsided one) or repeat; each
// kept item keeps its own key text.
func TestSortUniqueItems(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name string
		n    int
		hi   func() uint64
	}{
		{"spread", 5 * minSortShare, r.Uint64},
		{"one prefix", 3 * minSortShare, func() uint64 { return 0xabc<<52 | r.Uint64()>>12 }},
		{"lopsided", 4 * minSortShare, func() uint64 { return r.Uint64() >> (r.Uint64() % 3) }},
		{"repeats", 3 * minSortShare, func() uint64 { return r.Uint64() % 1000 << 40 }},
		{"few", 100, r.Uint64},
	} {
		for _, procs := range []int{1, 2, 3, 8} {
			items := make([]online.Item, c.n)
			for i := range items {
				fp := fpstore.Fingerprint{Hi: c.hi(), Lo: r.Uint64() % 4}
				items[i] = online.Item{FP: fp, Key: fmt.Appendf(nil, "%x", fp.Hi^fp.Lo)}
			}
			want := slices.Clone(items)
			slices.SortFunc(want, func(a, b online.Item) int { return a.FP.Compare(b.FP) })
			want = slices.CompactFunc(want, func(a, b online.Item) bool { return a.FP == b.FP })
			was := runtime.GOMAXPROCS(procs)
			got := sortUniqueItems(items)
			runtime.GOMAXPROCS(was)
			if len(got) != len(want) {
				t.Fatalf("%s, %d cores: %d items, want %d", c.name, procs, len(got), len(want))
			}
			for i := range got {
				if got[i].FP != want[i].FP || string(got[i].Key) != fmt.Sprintf("%x", got[i].FP.Hi^got[i].FP.Lo) {
					t.Fatalf("%s, %d cores: item %d is %v %q, want %v", c.name, procs, i, got[i].FP, got[i].Key, want[i].FP)
				}
			}
		}
	}
}

// TestPackKeys: the key texts, sorted, are copied into one block in their
// order when the copy fits the limit beside them, each item keeping its
// own; over the limit they stay where they are.
func TestPackKeys(t *testing.T) {
	items := make([]online.Item, 1000)
	for i := range items {
		items[i] = online.Item{FP: fpstore.Fingerprint{Hi: uint64(i)}, Key: fmt.Appendf(nil, "key-%d", i)}
	}
	items[7].Key = []byte{}
	text := int64(0)
	for _, it := range items {
		text += int64(len(it.Key))
	}
	fits := int64(len(items))*itemBytes + 2*text
	was := &items[1].Key[0]
	packKeys(items, fits-1)
	if &items[1].Key[0] != was {
		t.Fatal("packed over the limit")
	}
	packKeys(items, fits)
	for i, it := range items {
		if want := fmt.Sprintf("key-%d", i); i != 7 && string(it.Key) != want || it.Key == nil || cap(it.Key) != len(it.Key) {
			t.Fatalf("item %d: %q (cap %d), want %q", i, it.Key, cap(it.Key), want)
		}
		if prev := items[max(i-1, 0)].Key; i > 0 && len(it.Key) > 0 && len(prev) > 0 && uintptr(unsafe.Pointer(&it.Key[0])) != uintptr(unsafe.Pointer(&prev[0]))+uintptr(len(prev)) {
			t.Fatalf("item %d's text does not follow item %d's", i, i-1)
		}
	}
}
