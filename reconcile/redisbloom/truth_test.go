package redisbloom

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// truthRecords is a run's records for newTruth: key i's fingerprint,
// keys repeated and keys not in the index among them, handed over in
// batches whose buffers are overwritten once each batch is passed on (as
// the records' reader reuses its own).
type truthRecords struct {
	x      *fpstore.Index
	fps    []fpstore.Fingerprint // key i's
	order  []int                 // the records: key numbers, repeats included
	inIdx  int                   // keys 0 … inIdx-1 are in the index
	router *rbloom.Router
}

func newTruthRecords(t *testing.T, keys, records, shards int) *truthRecords {
	r := rand.New(rand.NewPCG(44, 1))
	tr := &truthRecords{inIdx: keys * 9 / 10}
	seen := map[fpstore.Fingerprint]bool{}
	for len(tr.fps) < keys {
		fp := fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
		if !seen[fp] {
			seen[fp] = true
			tr.fps = append(tr.fps, fp)
		}
	}
	for range records {
		tr.order = append(tr.order, r.IntN(keys))
	}
	in := slices.Clone(tr.fps[:tr.inIdx])
	slices.SortFunc(in, fpstore.Fingerprint.Compare)
	path := filepath.Join(t.TempDir(), "x.fpx")
	reconciletest.WriteIndex(t, path, "", in)
	var err error
	if tr.x, err = fpstore.Open(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.x.Close() })
	if tr.router, err = rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: shards}); err != nil {
		t.Fatal(err)
	}
	return tr
}

func truthKey(i int) []byte { return fmt.Appendf(nil, "key-%07d", i) }

// texts hands the records over in batches of batch; stop, unless nil,
// is asked before each batch and ends the reading with its error.
func (tr *truthRecords) texts(batch int, calls *int, stop func(call int) error) func(context.Context, func([]fpstore.Fingerprint, [][]byte) error) error {
	return func(ctx context.Context, fn func([]fpstore.Fingerprint, [][]byte) error) error {
		fps := make([]fpstore.Fingerprint, 0, batch)
		keys := make([][]byte, 0, batch)
		arena := make([]byte, 0, batch*16)
		for from := 0; from < len(tr.order); from += batch {
			if stop != nil {
				if err := stop(*calls); err != nil {
					return err
				}
			}
			fps, keys, arena = fps[:0], keys[:0], arena[:0]
			for _, k := range tr.order[from:min(from+batch, len(tr.order))] {
				fps = append(fps, tr.fps[k])
				arena = append(arena, truthKey(k)...)
			}
			at := 0
			for _, k := range tr.order[from:min(from+batch, len(tr.order))] {
				n := len(truthKey(k))
				keys = append(keys, arena[at:at+n])
				at += n
			}
			*calls++
			if err := fn(fps, keys); err != nil {
				return err
			}
			clear(arena[:cap(arena)]) // the reader's buffers, reused
		}
		return nil
	}
}

// TestTruthFill: the truth's pass (read, placed, kept, each on its own
// goroutine) keeps each truth key once, in its shard's bucket, with its
// rank and item, in the order the records first give it; the counts are
// the records'. A failure in any stage ends the pass with that stage's
// error, the records' reading stopped.
func TestTruthFill(t *testing.T) {
	const keys, records, shards = 30_000, 90_000, 5
	tr := newTruthRecords(t, keys, records, shards)
	spec := Spec{Template: "t:{*}", Router: tr.router, Item: rbloom.ItemKey}
	cfg := func(dir string) *online.Config {
		return &online.Config{TmpDir: dir, Plan: memplan.Plan{Spool: 64 << 10}}
	}

	// The reference: a Go map of the keys seen, in the records' order.
	type entry struct {
		rank uint64
		item string
	}
	want := make([][]entry, shards)
	seen := map[int]bool{}
	notInIndex := 0
	for _, k := range tr.order {
		rank, found, err := tr.x.Rank(tr.fps[k])
		if err != nil {
			t.Fatal(err)
		}
		if found != (k < tr.inIdx) {
			t.Fatalf("key %d: in the index %v", k, found)
		}
		if !found {
			notInIndex++
			continue
		}
		if !seen[k] {
			seen[k] = true
			s := tr.router.Shard(truthKey(k))
			want[s] = append(want[s], entry{rank, string(truthKey(k))})
		}
	}

	for _, batch := range []int{1, 777, 4096, records} {
		t.Run(fmt.Sprintf("batches of %d", batch), func(t *testing.T) {
			var calls int
			truth, err := newTruth(context.Background(), tr.x, &spec, cfg(t.TempDir()), tr.texts(batch, &calls, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer truth.close()
			if truth.records != records || truth.notInIndex != int64(notInIndex) || truth.distinct != int64(len(seen)) {
				t.Fatalf("records %d, not in the index %d, distinct %d; want %d, %d, %d",
					truth.records, truth.notInIndex, truth.distinct, records, notInIndex, len(seen))
			}
			for s := range shards {
				var got []entry
				err := truth.each(context.Background(), s, func(j int, rank uint64, item []byte) error {
					if j != len(got) {
						t.Fatalf("shard %d: entry %d numbered %d", s, len(got), j)
					}
					got = append(got, entry{rank, string(item)})
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want[s]) || truth.keys(s) != int64(len(want[s])) {
					t.Fatalf("shard %d: %d entries kept (counted %d), want %d; first differing at %d",
						s, len(got), truth.keys(s), len(want[s]), firstDiff(got, want[s]))
				}
			}
		})
	}

	stopped := errors.New("the records' reader failed")
	for _, c := range []struct {
		name string
		dir  string
		stop func(int) error
		want func(error) bool
	}{
		{"the reader fails", "", func(call int) error {
			if call == 20 {
				return stopped
			}
			return nil
		}, func(err error) bool { return errors.Is(err, stopped) }},
		// The spool cannot make its file: the keeping stage fails.
		{"the keeping fails", "/nonexistent/dir", nil, func(err error) bool {
			var fe *online.FileError
			return errors.As(err, &fe)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir
			if dir == "" {
				dir = t.TempDir()
			}
			var calls int
			truth, err := newTruth(context.Background(), tr.x, &spec, cfg(dir), tr.texts(100, &calls, c.stop))
			if err == nil {
				truth.close()
				t.Fatal("no error")
			}
			if !c.want(err) {
				t.Fatalf("error %T %v", err, err)
			}
			if calls >= records/100 {
				t.Fatalf("the records were read to the end (%d batches) after a stage failed", calls)
			}
		})
	}
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var calls int
		_, err := newTruth(ctx, tr.x, &spec, cfg(t.TempDir()), tr.texts(100, &calls, func(call int) error {
			if call == 10 {
				cancel()
			}
			return ctx.Err()
		}))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	})
}

func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
