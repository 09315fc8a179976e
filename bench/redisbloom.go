package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	iunits "github.com/fpdedup/fpdedup/internal/units"
)

// The RedisBloom jobs (issue 44): fpdedup reconcile against RedisBloom
// filters on a redis-server of the run's own with the module loaded,
// side by side with the bare module commands on the same filters.
// RBShards filters routed by mod-md5, item=key, each BF.RESERVE'd at
// 0.01 and a sixth of its truth keys with EXPANSION 2, so that a shard's
// keys and its share of RBExtra grow it three sub-filters; 99% of RBKeys
// truth keys added, 1% never (what the audit finds missing), and RBExtra
// items of no truth key besides: the history an online filter holds
// beside a day's keys, which makes its dumps as large as online.
//
//	redisbloom-audit:   fpdedup reconcile --records (the audit), against
//	                    the bare BF.SCANDUMP loops of the same dumps (the
//	                    floor) and every truth key asked with pipelined
//	                    BF.MEXISTS (the peer: the other way to audit)
//	redisbloom-rebuild: fpdedup reconcile --rebuild-shard all, against the
//	                    bare BF.LOADCHUNK of the same filters' bytes
//	redisbloom-apply:   fpdedup reconcile --apply of every truth key into
//	                    filters emptied (a shard flushed: BF.RESERVE'd
//	                    again as the audit's were), against redis-cli
//	                    --pipe of the same BF.INSERT … NOCREATE commands
const (
	DefaultRBKeys   = 1_000_000 // the scale is 10^7: --rb-keys 10M
	DefaultRBShards = 16
	rbDB            = 0
	rbTemplate      = "rbbench:{*}"
	rbApplyTemplate = "rbapply:{*}" // the apply job's filters, emptied before each run
)

// RedisBloomJobs are the RedisBloom jobs (ExtraJobs).
var RedisBloomJobs = []string{"redisbloom-audit", "redisbloom-rebuild", "redisbloom-apply"}

// rbPeer names the redis-server the RedisBloom jobs start; the bare rows
// are the bench binary's own (fpdedup-bench redisbloom-bare).
const rbPeer = "redis-server + RedisBloom"

// The bare rows beside the RedisBloom jobs (their targets: targets.go).
const (
	rbScandumpTool  = "floor: BF.SCANDUMP loops"
	rbMexistsTool   = "BF.MEXISTS of every key (1000 a command, 64 a pipeline)"
	rbLoadchunkTool = "floor: BF.LOADCHUNK of the same bytes"
	rbPipeTool      = "redis-cli --pipe of the same BF.INSERT commands"
	// The truth's own pass: every truth key read, hashed and looked up
	// in the index, which the audit and the rebuild do before any bit is
	// tested or set, and the bare dump rows never do.
	rbTruthTool = "floor: the truth's own pass (fpdedup query --count INDEX < KEYS)"
)

// rbState is the RedisBloom jobs' server and files, made once.
type rbState struct {
	addr, keys, index, dumps string
	inserts                  string // the apply's commands, as RESP (rbInserts)
	insertCmds               int64
	keysN, missing           int64 // truth keys; of them, not held (BF.MEXISTS)
	dumpBytes                int64
	filters                  int // sub-filters, fewest of a shard
	cmd                      *exec.Cmd
	err                      error
}

func (b *runner) rbURL() string { return b.rbURLOf(rbTemplate) }

func (b *runner) rbURLOf(template string) string {
	return fmt.Sprintf("redis://%s/%d?bf=%s&shards=%d&route=mod-md5&item=key", b.rb.addr, rbDB, template, b.o.RBShards)
}

// redisbloomJobs are the three jobs' specs.
func (b *runner) redisbloomJobs() []jobSpec {
	if b.rb == nil {
		b.rb = &rbState{keys: b.path("rb-keys.txt"), index: b.path("rb-truth.fpx"), dumps: b.path("rb-dumps.bin"), inserts: b.path("rb-inserts.resp")}
		// The port is chosen now: the rows' commands name it.
		if l, err := net.Listen("tcp", "127.0.0.1:0"); err != nil {
			b.rb.err = err
		} else {
			b.rb.addr = l.Addr().String()
			l.Close()
		}
	}
	n := b.o.RBKeys
	rb := b.rb
	bare := func(args ...string) command {
		return command{argv: append([]string{b.o.Bound, "redisbloom-bare", "--addr", rb.addr, "--shards", strconv.Itoa(b.o.RBShards)}, args...)}
	}
	auditReport, rebuildReport := b.path("rb-audit.json"), b.path("rb-rebuild.json")
	rbTruthRow := func() rowSpec {
		c := b.fp("", "query", "--count", rb.index)
		c.stdin = rb.keys
		return rowSpec{tool: rbTruthTool, kind: kindFloor, cmd: c,
			verify: func(o outStats, _ map[string]any) (string, *bool) {
				// Exit 0 (checked by the run): no key absent.
				return fmt.Sprintf("prints %q", o.Head), truth(o.Head == fmt.Sprintf("present\t%d", n))
			}}
	}
	auditRows := func() []rowSpec {
		return []rowSpec{
			{tool: "fpdedup reconcile (audit)", kind: kindFpdedup, needs: []string{rbPeer}, wantExit: 1,
				cmd: b.fp("", "reconcile", "-q", "--index", rb.index, "--records", rb.keys, "--online", b.rbURL(), "--report", auditReport),
				verify: rbVerify(auditReport, func(r rbReport) (string, bool) {
					return fmt.Sprintf("%d missing", r.missing()), r.missing() == rb.missing
				})},
			{tool: rbScandumpTool, kind: kindFloor, needs: []string{rbPeer, boundPeer}, cmd: bare("scandump")},
			rbTruthRow(),
			{tool: rbMexistsTool, kind: kindPeer, needs: []string{rbPeer, boundPeer}, cmd: bare("mexists", "--keys", rb.keys),
				verify: func(o outStats, _ map[string]any) (string, *bool) {
					return fmt.Sprintf("prints %q", strings.TrimSpace(o.Head)), truth(strings.TrimSpace(o.Head) == strconv.FormatInt(rb.missing, 10))
				}},
		}
	}
	rebuildRows := func() []rowSpec {
		return []rowSpec{
			{tool: "fpdedup reconcile --rebuild-shard all", kind: kindFpdedup, needs: []string{rbPeer},
				cmd: b.fp("", "reconcile", "-q", "--index", rb.index, "--records", rb.keys, "--online", b.rbURL(), "--rebuild-shard", "all", "--report", rebuildReport),
				verify: rbVerify(rebuildReport, func(r rbReport) (string, bool) {
					return fmt.Sprintf("%d of %d shards rebuilt and read back", r.Rebuild.Rebuilt, b.o.RBShards), r.Rebuild.Rebuilt == int64(b.o.RBShards)
				})},
			{tool: rbLoadchunkTool, kind: kindFloor, needs: []string{rbPeer, boundPeer}, cmd: bare("loadchunk", "--dumps", rb.dumps)},
			rbTruthRow(),
		}
	}
	title := fmt.Sprintf("%s truth keys in %d RedisBloom filters (mod-md5, item=key, 1%% never added; %s items of history)", countText(n), b.o.RBShards, countText(b.o.RBExtra))
	audit := jobSpec{name: "redisbloom-audit", title: "audit " + title, input: "rb-keys.txt + rb-truth.fpx + the filters",
		units: n, unit: "truth keys", ref: "fpdedup reconcile (audit)", rows: auditRows()}
	rebuild := jobSpec{name: "redisbloom-rebuild", title: "rebuild every filter of " + title, input: "rb-keys.txt + rb-truth.fpx",
		units: n, unit: "truth keys", ref: "fpdedup reconcile --rebuild-shard all", rows: rebuildRows()}
	audit.prep = func(ctx context.Context, j *Job) error {
		if err := b.rbPrepare(ctx); err != nil {
			return err
		}
		j.InputBytes = fileSize(rb.keys) + fileSize(rb.index) + rb.dumpBytes
		return nil
	}
	rebuild.prep = func(ctx context.Context, j *Job) error {
		if err := b.rbPrepare(ctx); err != nil {
			return err
		}
		// The bytes the floor writes: the filters rebuilt, dumped.
		if _, err := b.tool(ctx, nil, nil, "--progress", "never", "-q", "reconcile", "--index", rb.index, "--records", rb.keys, "--online", b.rbURL(), "--rebuild-shard", "all"); err != nil {
			return err
		}
		n, err := rbSaveDumps(ctx, rb.addr, b.o.RBShards, rb.dumps)
		if err != nil {
			return err
		}
		j.InputBytes = fileSize(rb.keys) + fileSize(rb.index) + n
		return nil
	}
	applyReport := b.path("rb-apply.json")
	host, port, _ := net.SplitHostPort(rb.addr)
	applied := func(o outStats, _ map[string]any) (string, *bool) {
		notHeld, err := mexistsAll(context.Background(), rb.addr, rbApplyTemplate, b.o.RBShards, rb.keys)
		if err != nil {
			return "BF.MEXISTS after: " + err.Error(), truth(false)
		}
		return fmt.Sprintf("%d of %d truth keys not held after (BF.MEXISTS)", notHeld, n), truth(notHeld == 0)
	}
	apply := jobSpec{name: "redisbloom-apply", input: "rb-keys.txt + rb-truth.fpx",
		title: fmt.Sprintf("--apply of %s truth keys into %d emptied RedisBloom filters (a shard flushed: every key missing; BF.RESERVE 0.01, EXPANSION 2 as the audit's), %d keys a batch", countText(n), b.o.RBShards, rbApplyBatch),
		units: n, unit: "truth keys", ref: "fpdedup reconcile --apply",
		rows: []rowSpec{
			{tool: "fpdedup reconcile --apply", kind: kindFpdedup, needs: []string{rbPeer}, before: b.rbEmpty,
				cmd:    b.fp("", "reconcile", "-q", "--index", rb.index, "--records", rb.keys, "--online", b.rbURLOf(rbApplyTemplate), "--apply", "--batch", strconv.Itoa(rbApplyBatch), "--report", applyReport),
				verify: applied},
			{tool: rbPipeTool, kind: kindPeer, needs: []string{rbPeer}, before: b.rbEmpty,
				// Its last line says how it went: the check's.
				cmd: sh(fmt.Sprintf("redis-cli -h %s -p %s -n %d --pipe < %s | tail -n 1", host, port, rbDB, shellQuote(rb.inserts))),
				verify: func(o outStats, st map[string]any) (string, *bool) {
					if want := fmt.Sprintf("errors: 0, replies: %d", rb.insertCmds); strings.TrimSpace(o.Head) != want {
						return fmt.Sprintf("redis-cli --pipe did not say %q: %q", want, strings.TrimSpace(o.Head)), truth(false)
					}
					return applied(o, st)
				}},
		}}
	apply.prep = func(ctx context.Context, j *Job) error {
		if err := b.rbPrepare(ctx); err != nil {
			return err
		}
		var err error
		if rb.insertCmds, err = rbInserts(rb.keys, rb.inserts, b.o.RBShards); err != nil {
			return err
		}
		j.InputBytes = fileSize(rb.keys) + fileSize(rb.index)
		return nil
	}
	return []jobSpec{audit, rebuild, apply}
}

// rbApplyBatch is the keys a batch of the apply job: reconcile's --batch
// default, and so its BF.INSERT commands' (one a shard a batch).
const rbApplyBatch = 1000

// rbEmpty puts the apply job's filters back as the audit's were made:
// deleted, then BF.RESERVE'd empty.
func (b *runner) rbEmpty(ctx context.Context) error {
	c := rbClient(b.rb.addr)
	defer c.Close()
	for s := range b.o.RBShards {
		key := rbKeyOf(rbApplyTemplate, s)
		if err := c.Del(ctx, key).Err(); err != nil {
			return err
		}
		if err := b.rbReserve(ctx, c, key); err != nil {
			return err
		}
	}
	return nil
}

// rbCapacity is what each filter is BF.RESERVE'd at: a sixth of its share
// of the keys and history, so that they grow three sub-filters.
func (b *runner) rbCapacity() int64 {
	return max((b.o.RBKeys+b.o.RBExtra)/int64(b.o.RBShards)/6, 1)
}

// rbInserts writes, as RESP for redis-cli --pipe, the commands reconcile
// --apply sends when every key of keysFile is missing: rbApplyBatch keys
// a batch, each batch one BF.INSERT KEY NOCREATE ITEMS … a shard, in the
// order its shards first appear (reconcile/redisbloom's Write). The keys
// go in the file's order where reconcile's go in their fingerprints':
// the same items in commands of the same sizes. It returns how many
// commands.
func rbInserts(keysFile, out string, shards int) (int64, error) {
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: shards})
	if err != nil {
		return 0, err
	}
	in, err := os.Open(keysFile)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var cmds int64
	var batch []string
	flush := func() {
		var order []int
		of := map[int][]string{}
		for _, k := range batch {
			s := router.Shard([]byte(k))
			if _, ok := of[s]; !ok {
				order = append(order, s)
			}
			of[s] = append(of[s], k)
		}
		for _, s := range order {
			items := of[s]
			key := rbKeyOf(rbApplyTemplate, s)
			fmt.Fprintf(w, "*%d\r\n$9\r\nBF.INSERT\r\n$%d\r\n%s\r\n$8\r\nNOCREATE\r\n$5\r\nITEMS\r\n", 4+len(items), len(key), key)
			for _, k := range items {
				fmt.Fprintf(w, "$%d\r\n%s\r\n", len(k), k)
			}
			cmds++
		}
		batch = batch[:0]
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if batch = append(batch, sc.Text()); len(batch) == rbApplyBatch {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if len(batch) > 0 {
		flush()
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return cmds, f.Close()
}

func countText(n int64) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dM", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// rbReport is what the RedisBloom rows' checks read of reconcile's
// --report.
type rbReport struct {
	RedisBloom struct {
		Missing int64 `json:"missing"`
	} `json:"redisbloom"`
	Rebuild struct {
		Rebuilt int64 `json:"rebuilt"`
	} `json:"rebuild"`
}

func (r rbReport) missing() int64 { return r.RedisBloom.Missing }

func rbVerify(file string, judge func(rbReport) (string, bool)) func(outStats, map[string]any) (string, *bool) {
	return func(outStats, map[string]any) (string, *bool) {
		var r rbReport
		data, err := os.ReadFile(file)
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err != nil {
			return "no report: " + err.Error(), truth(false)
		}
		what, ok := judge(r)
		return what, truth(ok)
	}
}

// rbPrepare starts the server, writes the truth (keys, index) and loads
// the filters, once; the server is stopped when the run ends.
func (b *runner) rbPrepare(ctx context.Context) error {
	rb := b.rb
	if rb.cmd != nil || rb.err != nil {
		return rb.err
	}
	rb.err = b.rbStart(ctx)
	if rb.err == nil {
		rb.err = b.rbLoad(ctx)
	}
	return rb.err
}

// RedisBloomModule is the module the RedisBloom jobs load (rbModule).
func RedisBloomModule() (string, error) { return rbModule() }

// rbModule finds the RedisBloom module as scripts/services/redisbloom-module.sh
// does: $FPDEDUP_REDISBLOOM, else shared/redisbloom/redisbloom.so in the
// nearest directory above the working directory that holds one.
func rbModule() (string, error) {
	if m := os.Getenv("FPDEDUP_REDISBLOOM"); m != "" {
		return m, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		m := filepath.Join(dir, "shared", "redisbloom", "redisbloom.so")
		if _, err := os.Stat(m); err == nil {
			return m, nil
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		return "", errors.New("no RedisBloom module: set FPDEDUP_REDISBLOOM, or run from below a directory holding shared/redisbloom/redisbloom.so")
	}
}

func (b *runner) rbStart(ctx context.Context) error {
	mod, err := rbModule()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(b.rb.addr)
	dir := b.path("redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--loadmodule", mod)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis-server: %w", err)
	}
	b.rb.cmd = cmd
	b.stops = append(b.stops, func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := rbClient(b.rb.addr)
	defer c.Close()
	for range 500 {
		if c.Ping(ctx).Err() == nil {
			// The module's answer for no filter: it is loaded.
			if err := c.Do(ctx, "BF.INFO", "rbbench:none").Err(); err != nil && !strings.Contains(err.Error(), "not found") {
				return fmt.Errorf("redis-server with %s: %w", mod, err)
			}
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer within 5 s (log %s)", b.rb.addr, filepath.Join(dir, "redis.log"))
}

func rbClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DB: rbDB, Protocol: 2, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
}

// rbMAdd adds adds[s] to shard s's filter, BF.MADD of 1000 items a
// command, in one pipeline.
func rbMAdd(ctx context.Context, c *redis.Client, adds [][]any) error {
	p := c.Pipeline()
	for s, items := range adds {
		for len(items) > 0 {
			m := min(len(items), 1000)
			p.Do(ctx, append([]any{"BF.MADD", rbKey(s)}, items[:m]...)...)
			items = items[m:]
		}
	}
	_, err := p.Exec(ctx)
	return err
}

func rbKey(s int) string { return rbKeyOf(rbTemplate, s) }

// rbKeyOf is shard s's filter of the filters template names.
func rbKeyOf(template string, s int) string {
	return strings.Replace(template, "*", strconv.Itoa(s), 1)
}

// rbReserve makes key an empty filter as every filter of the jobs is
// made: error 0.01, capacity (rbCapacity), EXPANSION 2.
func (b *runner) rbReserve(ctx context.Context, c *redis.Client, key string) error {
	return c.Do(ctx, "BF.RESERVE", key, 0.01, b.rbCapacity(), "EXPANSION", 2).Err()
}

func rbKeyText(i int64) string { return fmt.Sprintf("k%09d", i) }

// rbLoad writes the keys and their index and fills the filters.
func (b *runner) rbLoad(ctx context.Context) error {
	rb, n, shards := b.rb, b.o.RBKeys, b.o.RBShards
	b.progress(Step{Phase: "prepare", Msg: fmt.Sprintf("redisbloom: %d truth keys into %d filters", n, shards)})
	if err := b.keyFile(ctx, rb.keys, rb.index, n, rbKeyText); err != nil {
		return err
	}
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: shards})
	if err != nil {
		return err
	}
	c := rbClient(rb.addr)
	defer c.Close()
	extra := b.o.RBExtra
	capacity := b.rbCapacity()
	for s := range shards {
		if err := b.rbReserve(ctx, c, rbKey(s)); err != nil {
			return err
		}
	}
	// In batches of a million keys: BF.MADD of 1000 items a command.
	const batch = 1_000_000
	for from := int64(0); from < n; from += batch {
		adds := make([][]any, shards)
		for i := from; i < min(from+batch, n); i++ {
			if i%100 == 0 {
				continue // never added: what the audit finds missing
			}
			k := rbKeyText(i)
			s := router.Shard([]byte(k))
			adds[s] = append(adds[s], k)
		}
		if err := rbMAdd(ctx, c, adds); err != nil {
			return err
		}
	}
	for from := int64(0); from < extra; from += batch {
		adds := make([][]any, shards)
		for i := from; i < min(from+batch, extra); i++ {
			adds[i%int64(shards)] = append(adds[i%int64(shards)], fmt.Sprintf("x%010d", i))
		}
		if err := rbMAdd(ctx, c, adds); err != nil {
			return err
		}
	}
	rb.filters = -1
	for s := range shards {
		// Answered as [n] in 2.6 (RESP2).
		a, err := c.Do(ctx, "BF.INFO", rbKey(s), "FILTERS").Slice()
		if err != nil {
			return err
		}
		v := -1
		if len(a) > 0 {
			n, _ := a[len(a)-1].(int64)
			v = int(n)
		}
		if rb.filters < 0 || v < rb.filters {
			rb.filters = v
		}
	}
	rb.keysN = n
	if rb.missing, err = MExistsAll(ctx, rb.addr, shards, rb.keys); err != nil {
		return err
	}
	var dumps io.Writer = io.Discard
	if rb.dumpBytes, err = BareScandump(ctx, rb.addr, shards, dumps); err != nil {
		return err
	}
	b.note("redisbloom jobs: %d truth keys and %d items of history, %d filters (mod-md5, BF.RESERVE 0.01 %d EXPANSION 2) of %d sub-filters at least, %s of dumps, %d truth keys not held (BF.MEXISTS); redis-server %s with %s.",
		n, extra, shards, capacity, rb.filters, iunits.FormatBytes(rb.dumpBytes), rb.missing, firstLine(ctx, "redis-server", "--version"), mustModule())
	return nil
}

// rbFindPeer is the server the RedisBloom jobs start: redis-server on
// PATH, and the module (rbModule). Not a peer --peers none skips: the
// jobs measure fpdedup against it.
func rbFindPeer(ctx context.Context) *Peer {
	p := &Peer{Name: rbPeer, Status: "ok"}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		p.Status, p.Why = "missing", "no redis-server on PATH (Debian package redis-server)"
		return p
	}
	mod, err := rbModule()
	if err != nil {
		p.Status, p.Why = "missing", err.Error()
		return p
	}
	p.Path, p.Version = path+" --loadmodule "+mod, firstLine(ctx, path, "--version")
	return p
}

func mustModule() string {
	m, _ := rbModule()
	return m
}

// BareScandump reads every filter's dump with a BF.SCANDUMP loop (one
// chunk a command, as redis-cli would), writing the data to w: the
// audit's floor. It returns the bytes read.
func BareScandump(ctx context.Context, addr string, shards int, w io.Writer) (int64, error) {
	return scandumps(ctx, addr, shards, func(_ int, _ int64, data string) error {
		_, err := io.WriteString(w, data)
		return err
	})
}

// rbSaveDumps keeps every filter's chunks in file, with their iterators:
// what BareLoadchunk writes back.
func rbSaveDumps(ctx context.Context, addr string, shards int, file string) (int64, error) {
	f, err := os.Create(file)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	n, err := scandumps(ctx, addr, shards, func(s int, it int64, data string) error {
		var hdr []byte
		hdr = binary.AppendUvarint(hdr, uint64(s))
		hdr = binary.AppendVarint(hdr, it)
		hdr = binary.AppendUvarint(hdr, uint64(len(data)))
		w.Write(hdr)
		_, err := w.WriteString(data)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		f.Close()
		return n, err
	}
	return n, f.Close()
}

// scandumps reads every filter's dump with a BF.SCANDUMP loop and hands
// each chunk, with its shard and iterator, to chunk. It returns the bytes
// read.
func scandumps(ctx context.Context, addr string, shards int, chunk func(s int, it int64, data string) error) (int64, error) {
	c := rbClient(addr)
	defer c.Close()
	var n int64
	for s := range shards {
		it := int64(0)
		for {
			v, err := c.Do(ctx, "BF.SCANDUMP", rbKey(s), it).Slice()
			if err != nil {
				return n, err
			}
			if len(v) != 2 {
				return n, fmt.Errorf("BF.SCANDUMP answered %d values", len(v))
			}
			if it, _ = v[0].(int64); it == 0 {
				break
			}
			data, _ := v[1].(string)
			n += int64(len(data))
			if err := chunk(s, it, data); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// BareLoadchunk writes the chunks rbSaveDumps kept into KEY:bare, a
// filter's pipelined whole, deleting each after: the rebuild's floor. It
// returns the bytes written.
func BareLoadchunk(ctx context.Context, addr, file string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	c := rbClient(addr)
	defer c.Close()
	var n int64
	p := c.Pipeline()
	last := -1
	flush := func() error {
		if last >= 0 {
			p.Del(ctx, rbKey(last)+":bare")
		}
		_, err := p.Exec(ctx)
		return err
	}
	for {
		s, err := binary.ReadUvarint(r)
		if err == io.EOF {
			break
		}
		it, err2 := binary.ReadVarint(r)
		l, err3 := binary.ReadUvarint(r)
		if err := errors.Join(err, err2, err3); err != nil {
			return n, fmt.Errorf("%s: %w", file, err)
		}
		if int(s) != last {
			if err := flush(); err != nil {
				return n, err
			}
			last = int(s)
			p.Del(ctx, rbKey(last)+":bare")
		}
		data := make([]byte, l)
		if _, err := io.ReadFull(r, data); err != nil {
			return n, fmt.Errorf("%s: %w", file, err)
		}
		p.Do(ctx, "BF.LOADCHUNK", rbKey(last)+":bare", it, data)
		n += int64(l)
	}
	return n, flush()
}

// MExistsAll asks every key of keysFile, in its mod-md5 shard, with
// BF.MEXISTS of 1000 keys a command, 64 commands a pipeline: the other
// way to audit. It returns how many are not held.
func MExistsAll(ctx context.Context, addr string, shards int, keysFile string) (int64, error) {
	return mexistsAll(ctx, addr, rbTemplate, shards, keysFile)
}

// mexistsAll is MExistsAll of the filters template names.
func mexistsAll(ctx context.Context, addr, template string, shards int, keysFile string) (int64, error) {
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: shards})
	if err != nil {
		return 0, err
	}
	f, err := os.Open(keysFile)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c := rbClient(addr)
	defer c.Close()
	var notHeld int64
	p := c.Pipeline()
	var cmds []*redis.IntSliceCmd
	exec := func() error {
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
		for _, c := range cmds {
			for _, v := range c.Val() {
				if v != 1 {
					notHeld++
				}
			}
		}
		cmds = cmds[:0]
		return nil
	}
	batch := make([][]any, shards)
	send := func(s int) error {
		cmd := redis.NewIntSliceCmd(ctx, append([]any{"BF.MEXISTS", rbKeyOf(template, s)}, batch[s]...)...)
		p.Process(ctx, cmd)
		cmds = append(cmds, cmd)
		batch[s] = batch[s][:0]
		if len(cmds) == 64 {
			return exec()
		}
		return nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k := sc.Text()
		s := router.Shard([]byte(k))
		if batch[s] = append(batch[s], k); len(batch[s]) == 1000 {
			if err := send(s); err != nil {
				return notHeld, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return notHeld, err
	}
	for s := range batch {
		if len(batch[s]) > 0 {
			if err := send(s); err != nil {
				return notHeld, err
			}
		}
	}
	if len(cmds) > 0 {
		return notHeld, exec()
	}
	return notHeld, nil
}
