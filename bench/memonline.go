package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// memRedisDB is the database of $FPDEDUP_REDIS_ADDR the mem job fills and
// empties (bench/reconcile.sh uses 12).
const memRedisDB = 13

// memTruth builds reconcile's truth (the events' index with --hash sha256)
// and an export file of nine in ten of its fingerprints, the online side
// of the audits; missing are the others' hex names.
func (b *runner) memTruth(ctx context.Context, lines string) (truth, online string, err error) {
	truth, online = b.path("mem-truth.fpx"), b.path("mem-online.txt")
	b.progress(Step{Phase: "prepare", Job: "mem", Msg: "mem: building reconcile's truth and its online side"})
	if _, err := b.tool(ctx, nil, nil, "--progress", "never", "-q", "build", "--hash", "sha256", "-o", truth, lines); err != nil {
		return "", "", err
	}
	f, err := os.Create(online)
	if err != nil {
		return "", "", err
	}
	w := &skipTenth{w: bufio.NewWriterSize(f, 1<<20)}
	if _, err = b.tool(ctx, nil, w, "dump", truth); err == nil {
		err = w.w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	b.memMissing = w.skipped
	return truth, online, err
}

// skipTenth passes on nine lines in ten and keeps the tenth's text.
type skipTenth struct {
	w       *bufio.Writer
	n       int
	part    []byte
	skipped []string
}

func (s *skipTenth) Write(p []byte) (int, error) {
	for _, c := range p {
		s.part = append(s.part, c)
		if c != '\n' {
			continue
		}
		if s.n++; s.n%10 == 0 {
			s.skipped = append(s.skipped, string(s.part[:len(s.part)-1]))
		} else if _, err := s.w.Write(s.part); err != nil {
			return 0, err
		}
		s.part = s.part[:0]
	}
	return len(p), nil
}

// memOnline fills database memRedisDB of $FPDEDUP_REDIS_ADDR with the
// online sides of reconcile's server cases (keys, a bitmap bloom,
// RedisBloom filters when the server has the module) and returns those
// cases, what empties the database, and what the report says of them.
func (b *runner) memOnline(ctx context.Context, lines, truth, online string) ([]memCase, func(), string, error) {
	addr := os.Getenv("FPDEDUP_REDIS_ADDR")
	if addr == "" {
		return nil, func() {}, "reconcile against servers not run: $FPDEDUP_REDIS_ADDR is not set (scripts/services/with-services.sh sets it)", nil
	}
	c := redis.NewClient(&redis.Options{Addr: addr, DB: memRedisDB, Password: os.Getenv("FPDEDUP_REDIS_PASSWORD"), Protocol: 2, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	done := func() { c.FlushDB(context.Background()); c.Close() }
	fail := func(err error) ([]memCase, func(), string, error) {
		done()
		return nil, nil, "", fmt.Errorf("redis at %s, database %d: %w", addr, memRedisDB, err)
	}
	if err := c.FlushDB(ctx).Err(); err != nil {
		return fail(err)
	}
	b.progress(Step{Phase: "prepare", Job: "mem", Msg: "mem: filling Redis"})
	const keyPrefix = "mbench:k:"
	f, err := os.Open(online)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	pipe := c.Pipeline()
	for n := 1; sc.Scan(); n++ {
		pipe.Set(ctx, keyPrefix+sc.Text(), "1", 0)
		if n%10000 == 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return fail(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fail(err)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fail(err)
	}
	// --apply writes the missing keys: they are deleted again after it,
	// so that each --mem applies as many.
	unapply := func() error {
		pipe := c.Pipeline()
		for i, hex := range b.memMissing {
			pipe.Del(ctx, keyPrefix+hex)
			if i%10000 == 9999 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	// A bitmap bloom of 10 bits a key in 8 shards, every bit clear (the
	// rebuild sets them: it is put back after it, for the next --mem's
	// audit to read what the first did).
	const shards, k = 8, 7
	bits := max((b.rep.Data.Distinct*10/shards+63)/64*64, 1<<16)
	clearBloom := func() error {
		for i := range shards {
			key := "mbench:bf:{" + strconv.Itoa(i) + "}"
			if err := c.Del(ctx, key).Err(); err != nil {
				return err
			}
			if err := c.SetBit(ctx, key, bits-1, 0).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := clearBloom(); err != nil {
		return fail(err)
	}
	base := "redis://" + addr + "/" + strconv.Itoa(memRedisDB)
	keys := base + "?match=" + keyPrefix + "*"
	bloom := fmt.Sprintf("%s?bloom=mbench:bf:{*}&shards=%d&bits=%d&k=%d", base, shards, bits, k)
	rc := func(extra ...string) []string {
		return append([]string{"reconcile", "--tmpdir", b.work, "--index", truth}, extra...)
	}
	cases := []memCase{
		{name: "reconcile (Redis keys)", args: rc("--online", keys), exit1OK: true},
		{name: "reconcile --apply (Redis keys)", args: rc("--online", keys, "--apply"), exit1OK: true, after: unapply},
		{name: "reconcile (bitmap bloom)", args: rc("--online", bloom), exit1OK: true},
		{name: "reconcile --rebuild-shard all (bitmap bloom)", args: rc("--online", bloom, "--rebuild-shard", "all"),
			mayRefuse: "--rebuild-shard holds a shard in memory", after: clearBloom},
	}
	why := "reconcile against Redis at $FPDEDUP_REDIS_ADDR, database " + strconv.Itoa(memRedisDB)
	if err := c.Do(ctx, "BF.INFO", "mbench:none").Err(); err == nil || err.Error() != "ERR not found" {
		return cases, done, why + "; RedisBloom not run: the server has no RedisBloom module (BF.INFO: " + fmt.Sprint(err) + ")", nil
	}
	// RedisBloom filters, 4 shards routed by MD5 of the key, filled with
	// the truth's keys by an --apply before the sweep.
	const rbShards = 4
	for i := range rbShards {
		if err := c.Do(ctx, "BF.RESERVE", "mbench:rb:{"+strconv.Itoa(i)+"}", 0.01, max(b.rep.Data.Distinct/rbShards, 1000)).Err(); err != nil {
			return fail(err)
		}
	}
	rb := fmt.Sprintf("%s?bf=mbench:rb:{*}&shards=%d&route=mod-md5&item=sha256", base, rbShards)
	b.progress(Step{Phase: "prepare", Job: "mem", Msg: "mem: filling the RedisBloom filters"})
	if _, err := runOnceSampled(ctx, append([]string{b.exe, "--progress", "never", "-q"}, rc("--online", rb, "--records", lines, "--apply")...), ""); err != nil {
		var ee *errExit
		if !errors.As(err, &ee) || ee.status != 1 {
			return fail(fmt.Errorf("filling the RedisBloom filters: %w", err))
		}
	}
	cases = append(cases, memCase{name: "reconcile (RedisBloom)", args: rc("--online", rb, "--records", lines), exit1OK: true,
		mayRefuse: "--mem is too small for a RedisBloom audit"})
	return cases, done, why + ", RedisBloom included", nil
}
