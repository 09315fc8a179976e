package bitmapbloom_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// TestBloomRebuildServerRestarted: Redis restarted, empty (a real
// restart), in the middle of the rebuild's SETRANGE writes: the retried
// write must not take the chunks written before the restart for written.
// Either the rebuild says "rebuilt" and the shard holds every bit of the
// truth (an audit agrees), or it says what it found. (It said "1 of 1
// shards rebuilt … the sides agree", exit 0, over a shard missing the
// first half of its bits.)
func TestBloomRebuildServerRestarted(t *testing.T) {
	reconciletest.PlainOnly(t, "a server restarted and waited for; the rebuild's goroutines run under -race in TestBloomRebuild")
	reconciletest.NeedKill(t)
	c := reconciletest.RedisDB(t, 12)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 30_000)
	const shards, m, k = 1, 1 << 27, 3 // 16 MiB: four pipelines of eight 512 KiB chunks
	truth, live := reconciletest.NewRefBloom(shards, m, k), reconciletest.NewRefBloom(shards, m, k)
	for i, fp := range fps {
		truth.Add(fp)
		if i%2 == 0 {
			live.Add(fp)
		}
	}
	if err := c.Set(ctx, "rr:{0}", live.Bytes[0], 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Cut after the answers to the first pipeline (DEL, the last byte)
	// and two of chunks (15 + 2·88 bytes): in the third.
	p := reconciletest.NewTCPProxy(t, reconciletest.RedisAddr(t), "setrange", 200, 0)
	url := fmt.Sprintf("redis://%s/12?bloom=rr:{*}&shards=%d&bits=%d&k=%d", p.Addr, shards, m, k)
	done := reconciletest.RunAsync(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "0",
		"--mem", "96MiB", "--retries", "8", "--timeout", "20s", "--report", "r.json")
	select {
	case <-p.Shut:
	case r := <-done:
		t.Fatalf("the proxy never cut the rebuild's writes: exit %d\n%s", r.Code, r.Stderr)
	}
	reconciletest.RestartRedis(t)
	p.ListenAgain()
	r := <-done
	t.Logf("exit %d: %s", r.Code, r.Stderr)
	got, _ := c.Get(ctx, "rr:{0}").Bytes()
	var have, want int64
	for i := range truth.Bytes[0] {
		var g byte
		if i < len(got) {
			g = got[i]
		}
		for b := range 8 {
			if truth.Bytes[0][i]&(0x80>>b) != 0 {
				want++
				if g&(0x80>>b) != 0 {
					have++
				}
			}
		}
	}
	switch r.Code {
	case 0:
		if have != want || !strings.Contains(r.Stderr, "1 of 1 shards rebuilt") {
			t.Fatalf("exit 0, but the shard holds %d of the truth's %d bits (%d bytes):\n%s", have, want, len(got), r.Stderr)
		}
		reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", reconciletest.RedisURL(t, 12, fmt.Sprintf("bloom=rr:{*}&shards=%d&bits=%d&k=%d", shards, m, k))).Want(t, 0)
	default:
		t.Fatalf("exit %d after a restart the retries outlast: the rewritten shard should be whole:\n%s", r.Code, r.Stderr)
	}
}

// TestBloomRebuildSwapCountsBits: the rebuilt key loses bits between its
// writes and its swap (here: a megabyte of it zeroed, while the swap's
// request is held back): the swap is refused, naming the key and both
// counts (the bits it holds, the bits the truth sets), and the live shard
// is left as it was. (The swap checked the length alone.)
func TestBloomRebuildSwapCountsBits(t *testing.T) {
	reconciletest.PlainOnly(t, "the swap's read-back; the rebuild runs under -race in TestBloomRebuild")
	c := reconciletest.RedisDB(t, 12)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 30_000)
	const shards, m, k = 1, 1 << 27, 3
	truth, live := reconciletest.NewRefBloom(shards, m, k), reconciletest.NewRefBloom(shards, m, k)
	for i, fp := range fps {
		truth.Add(fp)
		if i%2 == 0 {
			live.Add(fp)
		}
	}
	c.Set(ctx, "rs:{0}", live.Bytes[0], 0)
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "evalsha", -1)
	url := fmt.Sprintf("redis://%s/12?bloom=rs:{*}&shards=%d&bits=%d&k=%d", p.Addr, shards, m, k)
	done := reconciletest.RunAsync(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "0", "--mem", "96MiB", "--timeout", "60s")
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("the swap was never held: exit %d\n%s", r.Code, r.Stderr)
	}
	if err := c.SetRange(ctx, "rs:{0}:rebuild", 0, strings.Repeat("\x00", 1<<20)).Err(); err != nil {
		t.Fatal(err)
	}
	left := c.BitCount(ctx, "rs:{0}:rebuild", nil).Val()
	p.Release()
	r := <-done
	r.Want(t, 2)
	if want := truth.Ones(0); left >= want || !strings.Contains(r.Stderr, "rs:{0}:rebuild") ||
		!strings.Contains(r.Stderr, fmt.Sprint(left)) || !strings.Contains(r.Stderr, fmt.Sprint(want)) {
		t.Fatalf("the refusal does not name the key and both counts (%d held, %d the truth's): %s", left, want, r.Stderr)
	}
	if got, _ := c.Get(ctx, "rs:{0}").Bytes(); string(got) != string(live.Bytes[0]) {
		t.Fatal("the live shard was changed by a refused swap")
	}
	if c.Exists(ctx, "rs:{0}:rebuild").Val() != 0 {
		t.Fatal("rs:{0}:rebuild is left behind")
	}
}

// TestBloomRebuildReadBack: the shard lost after its swap (deleted while
// the read that follows the swap is held back): the rebuild does not say
// "rebuilt" or "agree" of it; it exits 1 and says what it read.
func TestBloomRebuildReadBack(t *testing.T) {
	c := reconciletest.RedisDB(t, 12)
	ctx := context.Background()
	dir := t.TempDir()
	_, fps := reconciletest.BloomTruth(t, dir, 20_000)
	const shards, m, k = 2, 1 << 22, 3
	truth := reconciletest.NewRefBloom(shards, m, k)
	for _, fp := range fps {
		truth.Add(fp)
	}
	c.Set(ctx, "rk:{0}", truth.Bytes[0], 0) // audited, and whole
	c.SetBit(ctx, "rk:{1}", m-1, 0)
	// The read after the swap: a BITCOUNT of the live key itself (the
	// write's own read back is of rk:{1}:rebuild).
	p := reconciletest.NewHoldProxy(t, reconciletest.RedisAddr(t), "bitcount\r\n$6\r\nrk:{1}\r\n", -1)
	url := fmt.Sprintf("redis://%s/12?bloom=rk:{*}&shards=%d&bits=%d&k=%d", p.Addr, shards, m, k)
	done := reconciletest.RunAsync(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--rebuild-shard", "1", "--timeout", "60s", "--report", "r.json")
	select {
	case <-p.Held:
	case r := <-done:
		t.Fatalf("the rebuild never read the shard back after its swap: exit %d\n%s", r.Code, r.Stderr)
	}
	if c.BitCount(ctx, "rk:{1}", nil).Val() == 0 {
		t.Fatal("held before the swap")
	}
	c.Del(ctx, "rk:{1}")
	p.Release()
	r := <-done
	t.Logf("exit %d: %s", r.Code, r.Stderr)
	r.Want(t, 1)
	if strings.Contains(r.Stderr, "the sides agree") || strings.Contains(r.Stderr, "1 of 1 shards rebuilt") || !strings.Contains(r.Stderr, `rk:{1}`) {
		t.Fatalf("the summary of a shard lost after its swap: %s", r.Stderr)
	}
	rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json"))
	if rep.Agree || rep.ExitCode != 1 || rep.Rebuild == nil || rep.Rebuild.Rebuilt != 0 {
		t.Fatalf("report: agree %v, exit %d, rebuild %+v", rep.Agree, rep.ExitCode, rep.Rebuild)
	}
}
