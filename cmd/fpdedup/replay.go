package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/units"
	"github.com/fpdedup/fpdedup/pipeline"
)

type replayOptions struct {
	records    recordFlags
	hash       string
	files0From string
	tmpDir     string
	l1, l2     string
	sweep      string
	timeField  string
	timeUnit   string
	order      string
	lost       string
	json       bool
}

func newReplayCommand(inv *invocation) *cobra.Command {
	o := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay --l1 SIZE,ttl=DUR --l2 shards=N,bits=M,k=K|redisbloom,... [FILE...]",
		Short: "Replay an online dedup's bloom tiers over the day's events, against the exact truth",
		Long: `Replay simulates, offline, what an online dedup of two bloom tiers did with the
day's events in the FILEs (none or "-": stdin; plain, gzip or zstd), and
compares each event's online decision with the exact truth.

The online system, as simulated, takes the events one at a time in time order
and for each:
  1. L1 (--l1 SIZE,ttl=DUR), the per-process bloom of SIZE bits with one hash,
     is emptied whenever the event's time enters a new window [w*DUR, (w+1)*DUR)
     (w = floor(time / DUR), times since the Unix epoch). If the key's bit is
     set, the event is dropped by L1.
  2. Otherwise L2 (--l2 shards=N,bits=M,k=K), N shards of M bits, the key's
     shard holding its K bits, is asked: if all K are set, it is dropped by L2.
  3. Otherwise it is accepted and its key added to both tiers. A dropped event
     sets no bit.
Either tier may be left out.

L2 as RedisBloom filters (--l2 redisbloom,...): one BF.* scalable filter a
shard, as Redis Stack, Redis 8 and managed "Redis with bloom" run it. Step 2
is then BF.ADD of the event's item to its shard's filter, exactly as the
module answers it: 0 (present in some sub-filter: dropped by L2) or 1 (added,
to the last sub-filter, after appending one of EXPANSION times its capacity
and half its error rate when the last is full). Its parameters are
BF.RESERVE's and those of reconcile's RedisBloom URL:
  capacity=C      BF.RESERVE's capacity, each shard's first sub-filter (1000, 10k)
  error=E         BF.RESERVE's error rate (0.01)
  expansion=X     BF.RESERVE's EXPANSION (default 2), or
  nonscaling      NONSCALING: a full filter refuses new items (the module's
                  error; the event passes, its item not added: "refused")
  shards=N        the number of filters (route=ring: the nodes')
  route=R         the online side's router, a function of the key text:
                    mod-md5  int(first 4 bytes of MD5(key), big-endian) mod N;
                             shards named 0..N-1
                    ring     a consistent-hash ring: node A's points are the
                             first 4 bytes of MD5("A#i"), i < V; a key goes
                             to the first point at or after its own, wrapping;
                             a shard is named by its node. With vnodes=V and
                             nodes=A,B,C, which comes last (its commas are
                             its own)
                  route=all (an unknown router, for an audit) cannot be
                  replayed: an add's answer is that of the one filter the
                  item met, which depends on every item routed there before.
  item=I          what BF.ADD is given: key (the key text), sha256 (its
                  lowercase hex SHA-256), fp (the --hash fingerprint as 32 hex)
The router always hashes the key text, whatever the item. The report adds,
per shard, the filter at the end (items, sub-filters, capacity and memory as
BF.INFO shows them; the bits set and the false-positive rate they give now)
and its decisions. The filters take the memory the module's do, and grow as
they fill, within three quarters of what L1 leaves of --mem: the filters
BF.RESERVE makes must fit in it (else a usage error naming the --mem that
does), and a filter that would outgrow it stops the run (exit 2, naming the
--mem its growth so far needs).

The truth is exact: an event is a first occurrence when no earlier event has
its key (dedup's seen-set, within --mem). Per tier: false drops (first
occurrences the tier dropped: its bloom's false positives, events the online
system lost), duplicates passed (duplicates it did not catch; for L1, TTL
expiry), and its false-positive rate measured on the first occurrences that
reached it, next to the bloom formula (1 - e^(-k*n/m))^k averaged over them at
the fill each met (L1: the keys accepted in its window so far; L2: in the shard
so far; RedisBloom: 1 - the product of (1 - the formula) over the shard's
sub-filters). --lost FILE writes the lost events, bytes unchanged, in input
order (a csv/tsv header first): the backfill list.

--sweep bits=A,B,... replays with each L2 size too, in the same pass (each size
a whole system: what L1 holds depends on L2's answers), and prints the table a
team sizes its blooms with: per size, its memory, bits per key, the events lost
in the day and the rates. With RedisBloom filters, --sweep capacity=A,B,...
varies BF.RESERVE's capacity (per capacity: the filters' memory at the end,
their sub-filters, the events lost and the rates).

Hashes (name: fp128-km). Every position of L1 and of L2's bitmaps comes from
the key's 128-bit fingerprint (hi, lo): XXH3-128 of the key bytes (printf %s KEY
| xxh128sum prints hi then lo, 16 hex digits each), or with --hash sha256 the
first 128 bits of SHA-256. The key is the --key fields joined by --key-sep, as
in dedup.
  L1 bit         lo mod SIZE
  L2 shard       hi mod N
  L2 bit j       (lo + j*hi) mod 2^64 mod M, j = 0..K-1, in the shard
(Kirsch-Mitzenmacher double hashing, as Guava's MURMUR128_MITZ_64 with its
own 128-bit hash.) RedisBloom filters hash the item as the module does
(MurmurHash64A; its shard by route=).

Time: the --time-field (a csv/tsv column number or header name, or a jsonl
path), by default the key field named timestamp_ms: an integer or decimal number
of --time-unit since the epoch, or an RFC 3339 time. The events must be in time
order (an event earlier than the one before is an error naming it); with
--order arrival they are taken in input order and the clock is the latest time
seen, so a late event falls in the current window, as online. A copy of an
event that carries its time in the key lands next to it in time order, where L1
always catches it: TTL expiry shows in arrival order, or with a time field of
its own (a receive time). With --l2 alone and no time field, input order.

SIZE and M are bit counts: 1000000, 1M (10^6), 2^20, or bytes with a unit
(128KiB, 64MiB: 8 bits a byte). The blooms take their size in memory, written
once before the first event; --mem must hold them and 64 MiB more: the exact
seen-set spills to --tmpdir beyond a quarter of what they leave.

Exit codes: 0 done; 2 usage, input or I/O error (events out of time order
among them); 130/143 interrupted (nothing published).`,
		Example: `  fpdedup replay --format csv --key 1,2,3 --time-field 3 --order arrival \
      --l1 1M,ttl=1s --l2 shards=16,bits=2^29,k=3 --lost lost.csv events.txt
  fpdedup replay --format csv --header --key user_id,device_id,timestamp_ms \
      --l1 2^20,ttl=1s --l2 shards=16,k=3 --sweep bits=2^24,2^26,2^28,2^30 day.csv.zst
  fpdedup replay --format csv --header --key user_id,device_id,timestamp_ms --mem 24GiB \
      --l1 1M,ttl=1s --l2 redisbloom,capacity=100M,error=0.001,expansion=2,shards=16,route=mod-md5,item=sha256 \
      --lost lost.csv day.csv.zst
  fpdedup replay --format csv --key 1,2,3 --time-field 3 --order arrival \
      --l2 redisbloom,capacity=1M,error=0.01,route=ring,item=key,vnodes=100,nodes=redis-1:6379,redis-2:6379,redis-3:6379 \
      --sweep capacity=100k,10M events.txt`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReplay(cmd, inv, o, args)
		},
	}
	f := cmd.Flags()
	o.records.add(f, "csv, tsv, jsonl, parquet (keyed by --key; parquet found by its magic when not given); lines (whole-record keys) only with --l2 alone")
	f.StringVar(&o.hash, "hash", "xxh3", "fingerprint the tiers' positions come from: xxh3 or sha256")
	f.StringVar(&o.files0From, "files0-from", "", "read NUL-separated input file names from `F` (- for stdin)")
	f.StringVar(&o.tmpDir, "tmpdir", os.TempDir(), "directory for the exact seen-set's runs beyond --mem")
	f.StringVar(&o.l1, "l1", "", "the per-process bloom: `SIZE,ttl=DUR` (SIZE bits, one hash, emptied every DUR)")
	f.StringVar(&o.l2, "l2", "", "the sharded bloom: `shards=N,bits=M,k=K` (bits may come from --sweep), or RedisBloom filters: redisbloom,capacity=C,error=E[,expansion=X|,nonscaling],shards=N,route=mod-md5|ring,item=key|sha256|fp (ring: vnodes=V,nodes=A,B,... last)")
	f.StringVar(&o.sweep, "sweep", "", "replay with each L2 size too, in one pass, and print the sizing table: `bits=A,B,...` (RedisBloom: capacity=A,B,...)")
	f.StringVar(&o.timeField, "time-field", "", "the field holding the event time (default: the key field timestamp_ms)")
	f.StringVar(&o.timeUnit, "time-unit", "ms", "unit of a numeric time: s, ms, us or ns")
	f.StringVar(&o.order, "order", "time", "time (events must be in time order) or arrival (input order, the clock the latest time seen)")
	f.StringVar(&o.lost, "lost", "", "write the first occurrences the online system lost to `FILE`, bytes unchanged (published atomically)")
	f.BoolVar(&o.json, "json", false, "print the report as JSON")
	return cmd
}

func runReplay(cmd *cobra.Command, inv *invocation, o *replayOptions, args []string) error {
	j := inv.job(cmd)
	inputs, err := inputNames(inv, o.files0From, args)
	if err != nil {
		return err
	}
	j.input("FILE", kindRecords, inputs...) // before the recipe: a Parquet file says its format
	opts, err := replayConfig(j, o)
	if err != nil {
		return err
	}
	opts.Inputs = inputs
	j.input("--files0-from", kindOther, o.files0From)
	var lost *stream
	if o.lost != "" {
		lost = j.stream("--lost", o.lost)
	}
	report := j.stream("stdout", "")
	j.progress(opts.Progress)
	j.memory(opts.Plan())
	return j.run(func(ctx context.Context) (map[string]any, error) {
		if lost != nil {
			opts.Lost = lost.w
		}
		st, err := pipeline.Replay(ctx, opts)
		if oe := (*pipeline.ReplayOrderError)(nil); errors.As(err, &oe) {
			return nil, fmt.Errorf("%w\n  hint: %s", err, replayOrderHint(oe, opts.TimeField))
		}
		if me := (*pipeline.ReplayMemError)(nil); errors.As(err, &me) {
			return nil, fmt.Errorf("%w of --mem %s (three quarters of what L1 leaves, and all but 64 MiB at most)\n  hint: give --mem %s or more for what the filters have grown to so far; the rest of the day may need more",
				err, memText(inv), mebibytes(me.Need))
		}
		if err != nil {
			return nil, err
		}
		config := replayJSONConfig(o, opts)
		if o.json {
			b, err := json.MarshalIndent(map[string]any{"config": config, "replay": st}, "", "  ")
			if err != nil {
				return nil, err
			}
			report.w.Write(append(b, '\n'))
		} else {
			st.WriteReport(report.w, opts)
		}
		replaySummary(j, opts, st)
		// "online" is the primary system again, for --metrics (which
		// keeps the scalars: lost, let through, the rates; not the
		// RedisBloom shards, in "replay" already).
		online := st.Systems[0]
		if online.L2 != nil && online.L2.Shards != nil {
			l2 := *online.L2
			l2.Shards, online.L2 = nil, &l2
		}
		return map[string]any{"config": config, "replay": st, "online": online, "threads": inv.threads}, nil
	})
}

func replaySummary(j *job, opts pipeline.ReplayOptions, st pipeline.ReplayStats) {
	truth := units.FormatBytes(st.TruthBytes)
	if st.TruthMode == "lsm" {
		truth += fmt.Sprintf(", spilled: %d runs", st.TruthRuns)
	}
	p := st.Systems[0]
	var blooms int64
	for _, s := range st.Systems {
		blooms += s.BloomBytes
	}
	// Both rates: the set-up (the first touch of the blooms and the
	// seen-set's table, the kernel zeroing them) is paid once a run,
	// however many events follow it.
	j.summary("replay: %s, %d first occurrences, %d duplicates, %d lost, %d let through, %s, %s read, %.2f s, %s events/s, %s events/s after the set-up (%.2f s: the blooms' and the seen-set's first touch; seen-set %s; blooms %s)",
		counted(st.Events, "event"), st.FirstOccurrences, st.Duplicates, p.Lost, p.LetThrough, badSummary(opts.Records.OnBad), units.FormatBytes(st.Bytes), st.Seconds,
		humanRate(float64(st.Events)/max(st.Seconds, 1e-9)), humanRate(float64(st.Events)/max(st.Seconds-st.SetupSeconds, 1e-9)),
		st.SetupSeconds, truth, units.FormatBytes(blooms))
}

// replayConfig checks the flags and makes the pipeline's options (all but
// the inputs and Lost).
func replayConfig(j *job, o *replayOptions) (pipeline.ReplayOptions, error) {
	inv := j.inv
	opts := pipeline.ReplayOptions{Threads: inv.threads, Mem: inv.mem, TmpDir: o.tmpDir, Progress: &ingest.Progress{}}
	var err error
	if o.l1 == "" && o.l2 == "" {
		return opts, usageErrorf("replay needs a tier to simulate: --l1 SIZE,ttl=DUR, --l2 shards=N,bits=M,k=K (or redisbloom,…), or both")
	}
	if o.l1 != "" {
		if opts.L1, err = parseL1(o.l1); err != nil {
			return opts, err
		}
	}
	switch {
	case isRedisBloom(o.l2):
		if opts.RedisBloom, err = parseRedisBloom(o.l2, o.sweep); err != nil {
			return opts, err
		}
	case o.l2 != "":
		if opts.L2, err = parseL2(o.l2, o.sweep); err != nil {
			return opts, err
		}
	case o.sweep != "":
		return opts, usageErrorf("--sweep varies the L2 size: it needs --l2 shards=N,k=K (bits=) or --l2 redisbloom,… (capacity=)")
	}
	switch o.order {
	case "time":
	case "arrival":
		opts.Arrival = true
	default:
		return opts, usageErrorf("--order must be time or arrival, not %q", o.order)
	}
	timeUnits := map[string]time.Duration{"s": time.Second, "ms": time.Millisecond, "us": time.Microsecond, "ns": time.Nanosecond}
	var ok bool
	if opts.TimeUnit, ok = timeUnits[o.timeUnit]; !ok {
		return opts, usageErrorf("--time-unit must be s, ms, us or ns, not %q", o.timeUnit)
	}
	h, err := ingest.ParseHash(o.hash)
	if err != nil {
		return opts, usageErrorf("--hash: %v", err)
	}
	if opts.Records, err = o.records.reading(j, h, nil, false, false); err != nil {
		return opts, err
	}
	if opts.Records.Spec.Format == ingest.FormatLines && (opts.L1 != nil || o.timeField != "") {
		return opts, usageErrorf("replay reads the event time from a field: --format csv, tsv, jsonl or parquet with --key and --time-field (in lines format only --l2 alone, in input order)")
	}
	opts.TimeField = o.timeField
	if opts.TimeField == "" && slices.Contains(opts.Records.Spec.Keys, "timestamp_ms") {
		opts.TimeField = "timestamp_ms"
	}
	if opts.TimeField == "" && opts.L1 != nil {
		return opts, usageErrorf("--l1 windows need the event time: --time-field FIELD (a column number or name, a jsonl path), or a --key field named timestamp_ms")
	}
	if opts.TimeField != "" {
		spec := opts.Records.Spec
		spec.Keys = []string{opts.TimeField}
		if err := spec.Validate(); err != nil {
			if ke := (*ingest.KeyError)(nil); errors.As(err, &ke) {
				ke.TimeField = true
			}
			return opts, usageErrorf("%s", say(err))
		}
	}
	// Beyond the blooms, the exact seen-set and the fixed buffers (chunks,
	// a run being written, the runtime: ~60 MiB) need 64 MiB at least.
	if need := pipeline.ReplayMemNeeded(opts); need > inv.mem {
		if opts.RedisBloom != nil {
			return opts, usageErrorf("the RedisBloom filters BF.RESERVE makes take %s (every shard's first sub-filter and its bookkeeping), and --mem %s must hold them within the three quarters of it they may grow to, leaving 64 MiB for the exact seen-set and the buffers: give --mem %s or more",
				units.FormatBytes(pipeline.ReplayReservedBytes(opts)), memText(inv), mebibytes(need))
		}
		return opts, usageErrorf("the simulated blooms take %s, and --mem %s must hold them and 64 MiB more for the exact seen-set and the buffers: give --mem %s or more",
			units.FormatBytes(pipeline.ReplayBloomBytes(opts)), memText(inv), mebibytes(need))
	}
	return opts, nil
}

// memText is --mem as given, or the default's size.
func memText(inv *invocation) string {
	if inv.memText == "" {
		return units.FormatBytes(inv.mem) + " (the default)"
	}
	return inv.memText
}

// mebibytes writes a --mem of at least n bytes, in whole MiB.
func mebibytes(n int64) string { return strconv.FormatInt((n+1<<20-1)>>20, 10) + "MiB" }

// parseL1 reads --l1 SIZE,ttl=DUR.
func parseL1(s string) (*pipeline.ReplayL1, error) {
	l1 := &pipeline.ReplayL1{}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			k, v = "bits", item
		}
		var err error
		switch k {
		case "bits", "size":
			if l1.Bits, err = l2bloom.ParseBits(v); err != nil {
				return nil, usageErrorf("--l1: %v", err)
			}
		case "ttl":
			if l1.TTL, err = time.ParseDuration(v); err != nil || l1.TTL <= 0 {
				return nil, usageErrorf("--l1: ttl=%s: want a positive duration such as 1s, 500ms, 1m", v)
			}
		default:
			return nil, usageErrorf("--l1: unknown %q: want SIZE,ttl=DUR", item)
		}
	}
	if l1.Bits == 0 || l1.TTL == 0 {
		return nil, usageErrorf("--l1 %s: want SIZE,ttl=DUR (e.g. 1M,ttl=1s)", s)
	}
	return l1, nil
}

// parseL2 reads --l2 shards=N,bits=M,k=K and --sweep bits=A,B,...: the
// primary size first (--l2's bits, else the first of --sweep), then the
// others of --sweep.
func parseL2(s, sweep string) (*pipeline.ReplayL2, error) {
	l2 := &pipeline.ReplayL2{}
	for _, item := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(item, "=")
		switch k {
		case "shards":
			n, err := l2bloom.ParseShards(v)
			if err != nil {
				return nil, usageErrorf("--l2: %v", err)
			}
			l2.Shards = n
		case "bits":
			b, err := l2bloom.ParseBits(v)
			if err != nil {
				return nil, usageErrorf("--l2: %v", err)
			}
			l2.Bits = []uint64{b}
		case "k":
			n, err := l2bloom.ParseK(v)
			if err != nil {
				return nil, usageErrorf("--l2: %v", err)
			}
			l2.K = n
		default:
			return nil, usageErrorf("--l2: unknown %q: want shards=N,bits=M,k=K", item)
		}
	}
	if sweep != "" {
		list, ok := strings.CutPrefix(sweep, "bits=")
		if !ok {
			return nil, usageErrorf("--sweep %s: want bits=A,B,... (L2 bits a shard)", sweep)
		}
		for _, v := range strings.Split(list, ",") {
			b, err := l2bloom.ParseBits(v)
			if err != nil {
				return nil, usageErrorf("--sweep: %v", err)
			}
			if !slices.Contains(l2.Bits, b) {
				l2.Bits = append(l2.Bits, b)
			}
		}
	}
	if l2.Shards == 0 || l2.K == 0 || len(l2.Bits) == 0 {
		return nil, usageErrorf("--l2 %s: want shards=N,bits=M,k=K (bits may come from --sweep)", s)
	}
	return l2, nil
}

func replayJSONConfig(o *replayOptions, opts pipeline.ReplayOptions) map[string]any {
	c := map[string]any{"hash": o.hash, "hash_scheme": pipeline.ReplayHashScheme, "order": o.order, "time_field": opts.TimeField, "time_unit": o.timeUnit}
	if opts.L1 != nil {
		c["l1"] = map[string]any{"bits": opts.L1.Bits, "ttl": opts.L1.TTL.String()}
	}
	if opts.L2 != nil {
		c["l2"] = map[string]any{"shards": opts.L2.Shards, "bits": opts.L2.Bits, "k": opts.L2.K}
	}
	if rb := opts.RedisBloom; rb != nil {
		l2 := map[string]any{"model": redisBloomModel, "spec": o.l2, "capacity": rb.Capacity, "error": rb.Error, "nonscaling": rb.NonScaling,
			"shards": rb.Router.Shards(), "route": rb.Router.Route(), "item": rb.Item.String()}
		if !rb.NonScaling {
			l2["expansion"] = cmp.Or(rb.Expansion, rbloom.DefaultExpansion)
		}
		c["l2"] = l2
	}
	return c
}

// replayOrderHint says how to put the input in time order: a stable sort
// of its lines, or of a Parquet file's rows by its time column (ties kept
// in file order).
func replayOrderHint(oe *pipeline.ReplayOrderError, timeField string) string {
	if oe.RowGroup > 0 {
		return fmt.Sprintf(`sort the rows by their time column first, ties kept in file order (e.g. duckdb -c "COPY (SELECT * EXCLUDE (file_row_number) FROM read_parquet('in.parquet', file_row_number = true) ORDER BY %s, file_row_number) TO 'sorted.parquet'"), or give --order arrival if they are in arrival order`, timeField)
	}
	return "sort the input by its time field first (a stable sort, e.g. sort -s -t, -k3,3n when it is the third csv column, the header kept first), or give --order arrival if it is in arrival order"
}

// redisBloomModel is the first word of --l2 for L2 as RedisBloom filters.
const redisBloomModel = "redisbloom"

func isRedisBloom(l2 string) bool {
	return l2 == redisBloomModel || strings.HasPrefix(l2, redisBloomModel+",")
}

// redisBloomUsage is the spelling of --l2 for RedisBloom, in errors.
const redisBloomUsage = "redisbloom,capacity=C,error=E[,expansion=X|,nonscaling],shards=N,route=mod-md5|ring,item=key|sha256|fp (ring: vnodes=V,nodes=A,B,… last)"

// parseRedisBloom reads --l2 redisbloom,… and --sweep capacity=A,B,…: the
// parameters of BF.RESERVE (capacity, error, expansion, nonscaling) and
// those of reconcile's RedisBloom URL (shards, route, nodes, vnodes, item),
// in any order but nodes=, which takes the rest (its names are separated by
// commas, as in the URL). The primary capacity first (--l2's, else the
// first of --sweep), then the others of --sweep.
func parseRedisBloom(s, sweep string) (*pipeline.ReplayRedisBloom, error) {
	rb := &pipeline.ReplayRedisBloom{}
	var spec rbloom.RouterSpec
	var item string
	seen := map[string]bool{}
	rest := strings.TrimPrefix(strings.TrimPrefix(s, redisBloomModel), ",")
	for rest != "" {
		var param string
		if strings.HasPrefix(rest, "nodes=") {
			param, rest = rest, ""
		} else {
			param, rest, _ = strings.Cut(rest, ",")
		}
		k, v, hasValue := strings.Cut(param, "=")
		if seen[k] {
			return nil, usageErrorf("--l2: %s given twice", k)
		}
		seen[k] = true
		if k == "nonscaling" {
			if hasValue {
				return nil, usageErrorf("--l2: nonscaling takes no value (BF.RESERVE's NONSCALING)")
			}
			rb.NonScaling = true
			continue
		}
		if !hasValue || v == "" {
			return nil, usageErrorf("--l2: %q: want %s", param, redisBloomUsage)
		}
		var err error
		switch k {
		case "capacity":
			var c uint64
			if c, err = parseCapacity(v); err != nil {
				return nil, usageErrorf("--l2: %v", err)
			}
			rb.Capacity = []uint64{c}
		case "error":
			e, perr := strconv.ParseFloat(v, 64)
			if perr != nil || !(e > 0 && e < 1) {
				return nil, usageErrorf("--l2: error=%s: want a false-positive rate between 0 and 1 (0.01)", v)
			}
			rb.Error = e
		case "expansion":
			x, perr := strconv.ParseUint(v, 10, 32)
			if perr != nil || x < 1 {
				return nil, usageErrorf("--l2: expansion=%s: want 1 to %d (BF.RESERVE's EXPANSION; the module's default is %d)", v, uint32(math.MaxUint32), rbloom.DefaultExpansion)
			}
			rb.Expansion = uint32(x)
		case "shards":
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 1 {
				return nil, usageErrorf("--l2: shards=%s: want 1 to %d", v, l2bloom.MaxShards)
			}
			spec.Shards = n
		case "route":
			spec.Route = v
		case "vnodes":
			n, perr := strconv.Atoi(v)
			if perr != nil {
				return nil, usageErrorf("--l2: vnodes=%s: want 1 to %d", v, rbloom.MaxVNodes)
			}
			spec.VNodes = n
		case "nodes":
			spec.Nodes = strings.Split(v, ",")
			for _, n := range spec.Nodes {
				if strings.Contains(n, "=") {
					return nil, usageErrorf("--l2: nodes=%s: %q is a parameter, not a node: nodes= comes last (it takes the rest, commas and all)", v, n)
				}
			}
		case "item":
			if rb.Item, err = rbloom.ParseItem(v); err != nil {
				return nil, usageErrorf("--l2: %v", err)
			}
			item = v
		default:
			return nil, usageErrorf("--l2: unknown %q: want %s", param, redisBloomUsage)
		}
	}
	if sweep != "" {
		list, ok := strings.CutPrefix(sweep, "capacity=")
		if !ok {
			return nil, usageErrorf("--sweep %s: with --l2 redisbloom,… want capacity=A,B,… (BF.RESERVE's capacity a shard)", sweep)
		}
		for _, v := range strings.Split(list, ",") {
			c, err := parseCapacity(v)
			if err != nil {
				return nil, usageErrorf("--sweep: %v", err)
			}
			if !slices.Contains(rb.Capacity, c) {
				rb.Capacity = append(rb.Capacity, c)
			}
		}
	}
	for _, need := range []struct {
		name string
		ok   bool
	}{
		{"capacity=C (or --sweep capacity=A,B,…)", len(rb.Capacity) > 0},
		{"error=E", rb.Error > 0},
		{"route=mod-md5|ring", spec.Route != ""},
		{"shards=N", spec.Shards > 0 || spec.Route == rbloom.RouteRing},
		{"vnodes=V (route=ring)", spec.Route != rbloom.RouteRing || seen["vnodes"]},
		{"nodes=A,B,… (route=ring; last)", spec.Route != rbloom.RouteRing || len(spec.Nodes) > 0},
		{"item=key|sha256|fp", item != ""},
	} {
		if !need.ok {
			return nil, usageErrorf("--l2 %s: missing %s; want %s", s, need.name, redisBloomUsage)
		}
	}
	if rb.NonScaling && rb.Expansion != 0 {
		return nil, usageErrorf("--l2: expansion=%d and nonscaling: a NONSCALING filter never expands (BF.RESERVE refuses both)", rb.Expansion)
	}
	if spec.Route == rbloom.RouteAll {
		return nil, usageErrorf("--l2: route=all cannot be replayed: each BF.ADD's answer is that of the one shard's filter the item met, which depends on every item routed there before; with the router unknown there is no answer to replay, not even a bound. Give the online side's router: route=mod-md5 or route=ring")
	}
	var err error
	if rb.Router, err = rbloom.NewRouter(spec); err != nil {
		return nil, usageErrorf("--l2: %v", err)
	}
	if err := rb.Check(); err != nil {
		return nil, usageErrorf("--l2: %v", err)
	}
	return rb, nil
}

// parseCapacity reads capacity=: a count of items (1000, 10k, 10M).
func parseCapacity(v string) (uint64, error) {
	n, err := units.ParseCount(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("capacity=%s: want a number of items a shard's first sub-filter holds (1000, 10k, 10M)", v)
	}
	return uint64(n), nil
}
