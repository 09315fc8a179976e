package reconcile

import (
	"errors"
	"fmt"
	"testing"

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
