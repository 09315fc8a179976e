package reconcile_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// TestApplyAgreeIsReadBack: keys written by --apply deleted while the
// apply runs (its writes held back by a proxy while the test deletes
// them; for the bloom, a whole shard): "agree" and exit 0 must come from
// reading back, so the run exits 1 and counts the deleted keys missing.
// (It said "the sides agree", exit 0, computed from the writes' count.)
func TestApplyAgreeIsReadBack(t *testing.T) {
	db := reconciletest.MySQLDB(t)
	c := reconciletest.RedisDB(t, 13)
	ctx := context.Background()
	d := reconciletest.NewDataset(t, 20_000)
	// Online: the truth's keys but the missing ones, no extras, so that
	// the sides agree once the missing ones are written and stay.
	var held []string
	for _, i := range d.Online {
		held = append(held, d.Keys[i])
	}
	reconciletest.CreateTable(t, db, "rc_readback", "BINARY(16)")
	reconciletest.LoadRows(t, db, "rc_readback", reconciletest.RowValues(held, reconciletest.Bin16))
	reconciletest.LoadRedisKeys(t, c, "dd:", reconciletest.Hexes(held, reconciletest.FPHex))
	reconciletest.LoadRedisSet(t, c, "seen", reconciletest.Hexes(held, reconciletest.FPHex))
	missing := d.MissingFPs()
	for _, tc := range []struct {
		name, target, trigger string
		after                 int64
		url                   func(addr string) string
		env                   []string
		del                   func() int64 // deletes the written keys, returns how many
	}{
		{"redis keys", reconciletest.RedisAddr(t), "NX", 1000, func(a string) string { return fmt.Sprintf("redis://%s/13?match=dd:*", a) }, nil,
			func() int64 {
				var n int64
				for _, fp := range missing {
					n += c.Del(ctx, "dd:"+fp).Val()
				}
				return n
			}},
		{"redis set", reconciletest.RedisAddr(t), "SADD", 12, func(a string) string { return fmt.Sprintf("redis://%s/13?set=seen", a) }, nil,
			func() int64 {
				args := make([]any, len(missing))
				for i, fp := range missing {
					args[i] = fp
				}
				return c.SRem(ctx, "seen", args...).Val()
			}},
		{"mysql", reconciletest.MySQLDSN(t).Addr, "INSERT IGNORE", 30, func(a string) string { return reconciletest.MySQLProxyURL(t, a, "rc_readback") }, reconciletest.MySQLEnv(t),
			func() int64 {
				args := make([]any, len(missing))
				for i, fp := range missing {
					args[i], _ = hex.DecodeString(fp)
				}
				res, err := db.Exec("DELETE FROM rc_readback WHERE fp IN (?"+strings.Repeat(",?", len(args)-1)+")", args...)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := res.RowsAffected()
				return n
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := reconciletest.NewHoldProxy(t, tc.target, tc.trigger, tc.after)
			report := strings.ReplaceAll(tc.name, " ", "-") + ".json"
			done := reconciletest.RunAsync(t, d.Dir, tc.env, "reconcile", "--index", d.Index, "--online", tc.url(p.Addr), "--apply",
				"--batch", "100", "--conns", "1", "--timeout", "60s", "--report", report)
			select {
			case <-p.Held:
			case r := <-done:
				t.Fatalf("the writes were never held: exit %d\n%s", r.Code, r.Stderr)
			}
			deleted := tc.del()
			p.Release()
			r := <-done
			t.Logf("%d written keys deleted during the apply; exit %d: %s", deleted, r.Code, r.Stderr)
			if deleted == 0 || deleted >= int64(len(missing)) {
				t.Fatalf("%d of %d keys deleted: the deletion was not during the apply", deleted, len(missing))
			}
			r.Want(t, 1)
			rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, report))
			if rep.Agree || rep.ExitCode != 1 || rep.Missing != deleted || rep.Apply == nil || rep.Apply.Written != int64(len(missing)) {
				t.Fatalf("report: agree %v, exit %d, %d missing after (want %d), apply %+v", rep.Agree, rep.ExitCode, rep.Missing, deleted, rep.Apply)
			}
			if strings.Contains(r.Stderr, "the sides agree") || !strings.Contains(r.Stderr, fmt.Sprintf("the sides differ (%d missing online after the run", deleted)) {
				t.Fatalf("summary: %s", r.Stderr)
			}
		})
	}

	t.Run("bloom", func(t *testing.T) {
		dir := t.TempDir()
		_, fps := reconciletest.BloomTruth(t, dir, 40_000)
		const shards, m, k = 4, 8_000_000, 3
		online := reconciletest.NewRefBloom(shards, m, k)
		for i, fp := range fps {
			if i%3 != 0 {
				online.Add(fp)
			}
		}
		for s := range shards {
			c.Set(ctx, fmt.Sprintf("ab:{%d}", s), online.Bytes[s], 0)
		}
		p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "SETBIT", 2500)
		url := fmt.Sprintf("redis://%s/13?bloom=ab:{*}&shards=%d&bits=%d&k=%d", p.Addr, shards, m, k)
		done := reconciletest.RunAsync(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--apply", "--batch", "100", "--conns", "1",
			"--timeout", "60s", "--report", "b.json")
		select {
		case <-p.Held:
		case r := <-done:
			t.Fatalf("the writes were never held: exit %d\n%s", r.Code, r.Stderr)
		}
		c.Del(ctx, "ab:{0}")
		p.Release()
		r := <-done
		t.Logf("exit %d: %s", r.Code, r.Stderr)
		r.Want(t, 1)
		if strings.Contains(r.Stderr, "the sides agree") || !strings.Contains(r.Stderr, "ab:{0}") {
			t.Fatalf("summary of a shard deleted during --apply: %s", r.Stderr)
		}
		if rep := reconciletest.ReadReport(t, filepath.Join(dir, "b.json")); rep.Agree || rep.ExitCode != 1 {
			t.Fatalf("report: agree %v, exit %d", rep.Agree, rep.ExitCode)
		}
		// A later audit agrees: the shard is not whole (short: exit 2, or
		// missing keys: exit 1).
		if a := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", reconciletest.RedisURL(t, 13, fmt.Sprintf("bloom=ab:{*}&shards=%d&bits=%d&k=%d", shards, m, k))); a.Code == 0 {
			t.Fatalf("the audit after: exit 0: %s", a.Stderr)
		}
	})
}
