package reconcile_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyAgreeIsReadBack: keys written by --apply deleted while the
// apply runs (its writes held back by a proxy while the test deletes
// them; for the bloom, a whole shard): "agree" and exit 0 must come from
// reading back, so the run exits 1 and counts the deleted keys missing.
// (It said "the sides agree", exit 0, computed from the writes' count.)
func TestApplyAgreeIsReadBack(t *testing.T) {
	db := mysqlDB(t)
	c := redisDB(t, 13)
	ctx := context.Background()
	d := newDataset(t, 20_000)
	// Online: the truth's keys but the missing ones, no extras, so that
	// the sides agree once the missing ones are written and stay.
	var held []string
	for _, i := range d.online {
		held = append(held, d.keys[i])
	}
	createTable(t, db, "rc_readback", "BINARY(16)")
	loadRows(t, db, "rc_readback", rowValues(held, bin16))
	loadRedisKeys(t, c, "dd:", hexes(held, fpHex))
	loadRedisSet(t, c, "seen", hexes(held, fpHex))
	missing := d.missingFPs()
	for _, tc := range []struct {
		name, target, trigger string
		after                 int64
		url                   func(addr string) string
		env                   []string
		del                   func() int64 // deletes the written keys, returns how many
	}{
		{"redis keys", redisAddr(t), "NX", 1000, func(a string) string { return fmt.Sprintf("redis://%s/13?match=dd:*", a) }, nil,
			func() int64 {
				var n int64
				for _, fp := range missing {
					n += c.Del(ctx, "dd:"+fp).Val()
				}
				return n
			}},
		{"redis set", redisAddr(t), "SADD", 12, func(a string) string { return fmt.Sprintf("redis://%s/13?set=seen", a) }, nil,
			func() int64 {
				args := make([]any, len(missing))
				for i, fp := range missing {
					args[i] = fp
				}
				return c.SRem(ctx, "seen", args...).Val()
			}},
		{"mysql", mysqlDSN(t).Addr, "INSERT IGNORE", 30, func(a string) string { return mysqlProxyURL(t, a, "rc_readback") }, mysqlEnv(t),
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
			p := newHoldProxy(t, tc.target, tc.trigger, tc.after)
			report := strings.ReplaceAll(tc.name, " ", "-") + ".json"
			done := runAsync(t, d.dir, tc.env, "reconcile", "--index", d.index, "--online", tc.url(p.addr), "--apply",
				"--batch", "100", "--conns", "1", "--timeout", "60s", "--report", report)
			select {
			case <-p.held:
			case r := <-done:
				t.Fatalf("the writes were never held: exit %d\n%s", r.code, r.stderr)
			}
			deleted := tc.del()
			p.release()
			r := <-done
			t.Logf("%d written keys deleted during the apply; exit %d: %s", deleted, r.code, r.stderr)
			if deleted == 0 || deleted >= int64(len(missing)) {
				t.Fatalf("%d of %d keys deleted: the deletion was not during the apply", deleted, len(missing))
			}
			r.want(t, 1)
			rep := readReport(t, filepath.Join(d.dir, report))
			if rep.Agree || rep.ExitCode != 1 || rep.Missing != deleted || rep.Apply == nil || rep.Apply.Written != int64(len(missing)) {
				t.Fatalf("report: agree %v, exit %d, %d missing after (want %d), apply %+v", rep.Agree, rep.ExitCode, rep.Missing, deleted, rep.Apply)
			}
			if strings.Contains(r.stderr, "the sides agree") || !strings.Contains(r.stderr, fmt.Sprintf("the sides differ (%d missing online after the run)", deleted)) {
				t.Fatalf("summary: %s", r.stderr)
			}
		})
	}

	t.Run("bloom", func(t *testing.T) {
		dir := t.TempDir()
		_, fps := bloomTruth(t, dir, 40_000)
		const shards, m, k = 4, 8_000_000, 3
		online := newRefBloom(shards, m, k)
		for i, fp := range fps {
			if i%3 != 0 {
				online.add(fp)
			}
		}
		for s := range shards {
			c.Set(ctx, fmt.Sprintf("ab:{%d}", s), online.bytes[s], 0)
		}
		p := newHoldProxy(t, redisAddr(t), "SETBIT", 2500)
		url := fmt.Sprintf("redis://%s/13?bloom=ab:{*}&shards=%d&bits=%d&k=%d", p.addr, shards, m, k)
		done := runAsync(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--apply", "--batch", "100", "--conns", "1",
			"--timeout", "60s", "--report", "b.json")
		select {
		case <-p.held:
		case r := <-done:
			t.Fatalf("the writes were never held: exit %d\n%s", r.code, r.stderr)
		}
		c.Del(ctx, "ab:{0}")
		p.release()
		r := <-done
		t.Logf("exit %d: %s", r.code, r.stderr)
		r.want(t, 1)
		if strings.Contains(r.stderr, "the sides agree") || !strings.Contains(r.stderr, "ab:{0}") {
			t.Fatalf("summary of a shard deleted during --apply: %s", r.stderr)
		}
		if rep := readReport(t, filepath.Join(dir, "b.json")); rep.Agree || rep.ExitCode != 1 {
			t.Fatalf("report: agree %v, exit %d", rep.Agree, rep.ExitCode)
		}
		// A later audit agrees: the shard is not whole (short: exit 2, or
		// missing keys: exit 1).
		if a := fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", redisURL(t, 13, fmt.Sprintf("bloom=ab:{*}&shards=%d&bits=%d&k=%d", shards, m, k))); a.code == 0 {
			t.Fatalf("the audit after: exit 0: %s", a.stderr)
		}
	})
}
