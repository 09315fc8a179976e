package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// An --apply with a checkpoint interrupted, then a key it had written
// (at or before the checkpoint) deleted online: the rerun's audit finds it
// missing, and the rerun writes it again, reads it back and ends agreeing,
// the checkpoint removed. Before, the checkpoint skipped it: the rerun
// ended "differ" and removed the checkpoint, so no rerun could fix it.
func TestApplyRerunWritesKeyDeletedBeforeCheckpoint(t *testing.T) {
	reconciletest.PlainOnly(t, "which keys a rerun writes; the checkpointed apply runs under -race in the apply tests")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, d *reconciletest.Dataset) (opts reconcile.Options, del, held func(k string) bool)
	}{
		{"redis keys", func(t *testing.T, d *reconciletest.Dataset) (reconcile.Options, func(string) bool, func(string) bool) {
			c := reconciletest.RedisDB(t, 14)
			var online []string
			for _, i := range d.Online {
				online = append(online, reconciletest.FPHex(d.Keys[i]))
			}
			reconciletest.LoadRedisKeys(t, c, "ck:", online)
			tg, err := reconcile.ParseURL(reconciletest.RedisURL(t, 14, "match=ck:*"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			return reconcile.Options{Target: tg},
				func(k string) bool { return c.Del(ctx, "ck:"+reconciletest.FPHex(k)).Val() == 1 },
				func(k string) bool { return c.Exists(ctx, "ck:"+reconciletest.FPHex(k)).Val() == 1 }
		}},
		{"etcd", func(t *testing.T, d *reconciletest.Dataset) (reconcile.Options, func(string) bool, func(string) bool) {
			eps := reconciletest.Etcd(t)
			c := reconciletest.EtcdClient(t, eps)
			p := reconciletest.EtcdPrefix(t, c)
			var online []string
			for _, i := range d.Online {
				online = append(online, p+reconciletest.FullHex(d.Keys[i]))
			}
			reconciletest.EtcdPut(t, c, online, nil)
			tg, err := reconcile.ParseURL(reconciletest.EtcdURL(eps, p, ""))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			return reconcile.Options{Target: tg, Records: []string{d.Records}},
				func(k string) bool {
					r, err := c.Delete(ctx, p+reconciletest.FullHex(k))
					return err == nil && r.Deleted == 1
				},
				func(k string) bool {
					r, err := c.Get(ctx, p+reconciletest.FullHex(k), clientv3.WithCountOnly())
					return err == nil && r.Count == 1
				}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := reconciletest.NewDataset(t, 20_000)
			opts, del, held := tc.setup(t, d)
			ckpt := filepath.Join(d.Dir, "apply.ckpt")
			opts.Index, opts.Apply, opts.Checkpoint, opts.Batch, opts.Conns, opts.Rate, opts.TmpDir = d.Index, true, ckpt, 50, 1, 500, d.Dir

			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			go func() {
				reconciletest.WaitFor(60*time.Second, func() bool { _, err := os.Stat(ckpt); return err == nil })
				cancel(sigCause{"SIGINT"})
			}()
			_, err := reconcile.Run(ctx, opts)
			var ie *reconcile.ApplyInterruptedError
			if !errors.As(err, &ie) || !ie.CheckpointSaved {
				t.Fatalf("the interrupted run: %T %v", err, err)
			}
			var ck reconcile.Checkpoint
			if err := json.Unmarshal(reconciletest.Must(os.ReadFile(ckpt)), &ck); err != nil || ck.Last == "" || ck.Written >= int64(len(d.Missing)) {
				t.Fatalf("checkpoint %+v (%v) of %d missing", ck, err, len(d.Missing))
			}
			// The first missing key in fingerprint order: the checkpoint
			// covers it.
			var first string
			for _, i := range d.Missing {
				if k := d.Keys[i]; first == "" || reconciletest.FPHex(k) < reconciletest.FPHex(first) {
					first = k
				}
			}
			if reconciletest.FPHex(first) > ck.Last || !del(first) {
				t.Fatalf("the first missing key %s (checkpoint at %s) was not written by the first run", reconciletest.FPHex(first), ck.Last)
			}

			rep, err := reconcile.Run(context.Background(), opts)
			if err != nil {
				t.Fatalf("the rerun: %v", err)
			}
			if !rep.Agree || rep.Missing != 0 || !held(first) || rep.Apply.MissingAgain != 1 || !rep.Apply.CheckpointRemoved ||
				rep.Apply.Written != rep.Counts.OnlyOffline || rep.Counts.OnlyOffline > int64(len(d.Missing))-ck.Written+1 {
				t.Fatalf("the rerun: agree %v, %d missing, apply %+v; the deleted key held again: %v", rep.Agree, rep.Missing, rep.Apply, held(first))
			}
			if _, err := os.Stat(ckpt); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("checkpoint left: %v", err)
			}
		})
	}
}
