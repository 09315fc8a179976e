package redisbloom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// The writes of the missing items: BF.INSERT KEY NOCREATE ITEMS …, which
// is BF.MADD but for a filter that does not exist: BF.MADD (and BF.ADD)
// would make one of the module's defaults (capacity 100, error 0.01),
// another filter than the shard's, without a word; NOCREATE answers
// "ERR not found" instead. Adding an item present changes nothing, so a
// retried batch is harmless.

// itemOf appends the filter's item of it: its fingerprint's hex
// (item=fp), else made of its key text; or its Key as it is, when the
// items came from the audit (MissingItems).
func (b *Source) itemOf(dst []byte, it *online.Item) []byte {
	if b.keyIsItem {
		return append(dst, it.Key...)
	}
	if b.spec.Item == rbloom.ItemFP {
		return rbloom.AppendFP(dst, it.FP.Hi, it.FP.Lo)
	}
	return b.spec.Item.AppendKeyItem(dst, it.Key)
}

// byShard groups items by the shard the router sends their key texts to,
// each shard's items in order; shards lists those with any, in the order
// first met.
func (b *Source) byShard(items []online.Item) (shards []int, of map[int][]int, err error) {
	if b.spec.Router.All() {
		return nil, nil, online.Permanent{Err: errors.New("route=all does not say which shard an item goes to: the filters cannot be written")}
	}
	of = map[int][]int{}
	for i := range items {
		if items[i].Key == nil {
			return nil, nil, errors.New("BUG: a RedisBloom item to write without its key text")
		}
		s := b.shardOf(&items[i])
		if _, ok := of[s]; !ok {
			shards = append(shards, s)
		}
		of[s] = append(of[s], i)
	}
	return shards, of, nil
}

// Write adds each item to its shard's filter: one BF.INSERT … NOCREATE a
// shard a batch, pipelined; to one server written as RESP by hand
// (redisconn.Pool), to a Cluster through go-redis's routing by slot.
func (b *Source) Write(ctx context.Context, items []online.Item) error {
	shards, of, err := b.byShard(items)
	if err != nil {
		return err
	}
	var item []byte
	if b.CC == nil {
		// About each item's text and its bulk's header, that the buffer
		// seldom grows as it is filled.
		buf := make([]byte, 0, len(items)*48+64*len(shards))
		for _, s := range shards {
			idx := of[s]
			buf = append(buf, '*')
			buf = strconv.AppendInt(buf, int64(4+len(idx)), 10)
			buf = append(buf, "\r\n$9\r\nBF.INSERT\r\n"...)
			buf = redisconn.AppendBulk(buf, b.keys[s])
			buf = append(buf, "$8\r\nNOCREATE\r\n$5\r\nITEMS\r\n"...)
			for _, i := range idx {
				item = b.itemOf(item[:0], &items[i])
				buf = redisconn.AppendBulk(buf, item)
			}
		}
		return b.writeErr(b.Raw.Pipeline(ctx, buf, len(shards)), shards)
	}
	pipe := b.C.Pipeline()
	for _, s := range shards {
		args := []any{"BF.INSERT", b.keys[s], "NOCREATE", "ITEMS"}
		for _, i := range of[s] {
			args = append(args, string(b.itemOf(nil, &items[i])))
		}
		pipe.Do(ctx, args...)
	}
	cmds, err := pipe.Exec(ctx)
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil {
			return b.writeErr(cerr, shards)
		}
	}
	return b.writeErr(err, shards)
}

// writeErr says which filter an answer that no retry changes is about.
func (b *Source) writeErr(err error, shards []int) error {
	switch {
	case err == nil:
		return nil
	case online.IsRefused(redisconn.Refusal(err)):
		return redisconn.Refusal(err)
	case isNotFound(err):
		var names []string
		for _, s := range shards {
			names = append(names, fmt.Sprintf("%s (%s)", b.spec.Router.Name(s), b.keys[s]))
		}
		return online.Permanent{Err: fmt.Errorf("a filter written to does not exist (deleted or flushed since the audit?), one of shards %s: rebuild it rather than let BF.ADD make a default one", strings.Join(names, ", "))}
	case strings.Contains(err.Error(), "non scaling filter is full"):
		return online.Permanent{Err: fmt.Errorf("a NONSCALING filter is full and refuses the missing items: rebuild it with a larger capacity: %w", err)}
	}
	return err
}

// Held asks BF.MEXISTS of each item in its shard's filter: a batch's
// items a shard in one command, pipelined.
func (b *Source) Held(ctx context.Context, items []online.Item, present []bool) error {
	shards, of, err := b.byShard(items)
	if err != nil {
		return err
	}
	asks := make([]mexistsAsk, len(shards))
	var item []byte
	for k, s := range shards {
		asks[k].key = b.keys[s]
		for _, i := range of[s] {
			n := len(item)
			item = b.itemOf(item, &items[i])
			asks[k].items = append(asks[k].items, item[n:len(item):len(item)])
		}
	}
	held, err := b.mexists(ctx, asks)
	if err != nil {
		return err
	}
	for k, s := range shards {
		for n, i := range of[s] {
			present[i] = held[k][n]
		}
	}
	return nil
}

// mexistsAsk is one BF.MEXISTS: a filter's key and the items asked.
type mexistsAsk struct {
	key   string
	items [][]byte
}

// mexists sends the BF.MEXISTS of asks, pipelined, and returns their
// answers, each ask's in its items' order: to one server as prepared
// bytes (redisconn.Pool, as Write's BF.INSERT), to a Cluster through
// go-redis's routing by slot. An answer of another length than its ask
// is a permanent error.
func (b *Source) mexists(ctx context.Context, asks []mexistsAsk) ([][]bool, error) {
	held := make([][]bool, len(asks))
	if b.CC == nil && b.Raw != nil {
		var buf []byte
		want := 0
		for _, a := range asks {
			buf = append(buf, '*')
			buf = strconv.AppendInt(buf, int64(2+len(a.items)), 10)
			buf = append(buf, "\r\n$10\r\nBF.MEXISTS\r\n"...)
			buf = redisconn.AppendBulk(buf, a.key)
			for _, it := range a.items {
				buf = redisconn.AppendBulk(buf, it)
			}
			want += len(a.items)
		}
		ints, err := b.Raw.PipelineInts(ctx, buf, len(asks), make([]int64, 0, want))
		if err != nil {
			return nil, err
		}
		if len(ints) != want {
			return nil, online.Permanent{Err: fmt.Errorf("BF.MEXISTS answered %d of %d items", len(ints), want)}
		}
		for k, a := range asks {
			held[k] = make([]bool, len(a.items))
			for n := range a.items {
				held[k][n] = ints[n] == 1
			}
			ints = ints[len(a.items):]
		}
		return held, nil
	}
	pipe := b.C.Pipeline()
	cmds := make([]*redis.IntSliceCmd, len(asks))
	for k, a := range asks {
		args := make([]any, 0, 2+len(a.items))
		args = append(args, "BF.MEXISTS", a.key)
		for _, it := range a.items {
			args = append(args, string(it))
		}
		cmds[k] = redis.NewIntSliceCmd(ctx, args...)
		pipe.Process(ctx, cmds[k])
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	for k, a := range asks {
		v := cmds[k].Val()
		if len(v) != len(a.items) {
			return nil, online.Permanent{Err: fmt.Errorf("BF.MEXISTS %s answered %d of %d items", a.key, len(v), len(a.items))}
		}
		held[k] = make([]bool, len(v))
		for n, x := range v {
			held[k][n] = x == 1
		}
	}
	return held, nil
}

// Plan prints the commands Write would send, one a line, each item as
// redis-cli reads it (quoted where it is not plain).
func (b *Source) Plan(w io.Writer, items []online.Item) error {
	shards, of, err := b.byShard(items)
	if err != nil {
		return err
	}
	var line, item []byte
	for _, s := range shards {
		line = append(line, "BF.INSERT "...)
		line = appendArg(line, []byte(b.keys[s]))
		line = append(line, " NOCREATE ITEMS"...)
		for _, i := range of[s] {
			item = b.itemOf(item[:0], &items[i])
			line = append(line, ' ')
			line = appendArg(line, item)
		}
		line = append(line, '\n')
	}
	_, err = w.Write(line)
	return err
}

// appendArg appends a as redis-cli reads an argument: as it is when it
// is plain, else in double quotes with \" \\ \n \r \t and \xHH escapes.
func appendArg(dst, a []byte) []byte {
	plain := len(a) > 0
	for _, c := range a {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return append(dst, a...)
	}
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range a {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < ' ' || c >= 0x7f:
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// ShardOf is the shard the router sends the item's key text to.
func (b *Source) ShardOf(it online.Item) uint64 {
	return uint64(max(b.shardOf(&it), 0))
}

// Route is the shard the router sends key to (online.Router), -1 for
// route=all.
func (b *Source) Route(key []byte) int {
	if b.spec.Router.All() {
		return -1
	}
	return b.spec.Router.Shard(key)
}

// shardOf is the item's shard: its Route when RouteItems set it, else
// the router's.
func (b *Source) shardOf(it *online.Item) int {
	if it.Route > 0 {
		return int(it.Route) - 1
	}
	return b.spec.Router.Shard(it.Key)
}

// ReadBackShards reads back the filters written (touched): each must
// still be a filter whose header extends the one the audit read (its
// sub-filters as they were, grown), holding at least the items it
// counted then; less is items lost since (the filter deleted, flushed,
// replaced, or its server restarted).
func (b *Source) ReadBackShards(ctx context.Context, touched []bool, rep *report.Report) error {
	rb := rep.ReadBack
	rb.BytesRead += b.readBackBytes
	rb.Passes += b.readBackPasses
	for s, t := range touched {
		if !t {
			continue
		}
		sh := report.ShardReadBack{Shard: uint64(s), Key: b.keys[s], WantFrom: "audit", Type: ModuleType, DumpRead: b.readWhole != nil && b.readWhole[s]}
		was := b.audited(s)
		if was != nil {
			sh.WantItems, sh.WantBytes = was.Size, int64(was.Bytes())
		}
		h, _, err := b.readHeader(ctx, s)
		var fk *FilterKeyError
		switch {
		case errors.As(err, &fk):
			sh.Type = fk.Type
			if fk.Err != nil {
				sh.Type = ModuleType + " (a header the module would not load)"
			}
		case err != nil:
			return err
		default:
			sh.Items, sh.Bytes = h.Size, int64(h.Bytes())
		}
		sh.Short = sh.Type != ModuleType || h == nil || was != nil && !h.Extends(was)
		if sh.Short {
			rb.Short++
		}
		rb.Shards = append(rb.Shards, sh)
	}
	return nil
}

// audited is shard s's header as the audit read it; nil if not audited.
func (b *Source) audited(s int) *rbloom.Header {
	if b.read == nil {
		return nil
	}
	return b.read[s]
}
