package pipeline

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// replayParser keys, hashes and times the records of chunks for Replay;
// one per goroutine. It reads each record once for its key and its time:
// one Keyer over the key fields and, unless it is one of them, the time
// field after them; the time is that Keyer's item, and the key its output
// less the time item when that was added. Records are numbered as
// recordWorker.eachAt numbers them.
type replayParser struct {
	opts    *ReplayOptions
	headers *Headers
	time    timeParser

	keyer   *ingest.Keyer // the key fields [and the time field]
	timeAt  int           // the time field's index among them; -1: no time
	appends bool          // the time field is keyer's last, after the key's
	sepLen  int           // the key separator's length
	item    []byte        // RedisBloom: the item being hashed
}

func newReplayParser(opts *ReplayOptions, headers *Headers) *replayParser {
	return &replayParser{opts: opts, headers: headers, timeAt: -1, time: newTimeParser(int64(opts.TimeUnit)), sepLen: len(opts.Records.Spec.Sep)}
}

// init makes the Keyer, once the header (if any) is known.
func (p *replayParser) init(name string) error {
	spec := p.opts.Records.Spec
	var hdr []byte
	if spec.Header {
		hdr = p.headers.First()
	}
	tf := p.opts.TimeField
	joined := spec
	if tf != "" {
		p.timeAt = slices.Index(spec.Keys, tf)
		if p.timeAt < 0 {
			joined.Keys = append(slices.Clip(spec.Keys), tf)
			p.timeAt, p.appends = len(spec.Keys), true
		}
	}
	var err error
	if p.keyer, err = ingest.NewKeyer(joined, hdr); err != nil {
		if tf != "" {
			// Which of the two: the key's errors are the usual ones.
			var ke *ingest.KeyError
			if _, kerr := ingest.NewKeyer(spec, hdr); kerr == nil && errors.As(err, &ke) {
				ke.TimeField = true
			}
		}
		return ingest.InInput(err, name)
	}
	return nil
}

// keyTime returns rec's key and its time field's bytes (nil without a time
// field); both may alias rec or the Keyer's scratch space until the next
// call.
func (p *replayParser) keyTime(rec []byte, first, simple bool) (key, tf []byte, err error) {
	out, err := p.keyer.KeyShaped(rec, first, simple)
	if err != nil || p.timeAt < 0 {
		return out, nil, err
	}
	tf = p.keyer.Item(p.timeAt)
	if p.appends {
		// The key's items, then the separator and the time item: the key
		// is what is before them (capped: an append to it must not write
		// over a record it aliases).
		n := len(out) - p.sepLen - len(tf)
		return out[:n:n], tf, nil
	}
	return out, tf, nil
}

// fingerprintTime is keyTime with the key hashed: when the time field is
// one of the key's, by Keyer.Fingerprint (no copy of the key where it can
// do without).
func (p *replayParser) fingerprintTime(rec []byte, first, simple bool) (fp fpstore.Fingerprint, tf []byte, err error) {
	if p.appends {
		var key []byte
		if key, tf, err = p.keyTime(rec, first, simple); err == nil {
			fp = p.opts.Records.Hash.Sum(key)
		}
		return fp, tf, err
	}
	if fp, err = p.keyer.Fingerprint(rec, first, simple, p.opts.Records.Hash); err == nil && p.timeAt >= 0 {
		tf = p.keyer.Item(p.timeAt)
	}
	return fp, tf, err
}

// redisBloom is fingerprintTime for the RedisBloom model, which needs the
// key text itself: the router hashes it, and the item is made from it
// (or from the fingerprint).
func (p *replayParser) redisBloom(rec []byte, first, simple bool) (fp fpstore.Fingerprint, tf []byte, h rbloom.Hash, shard int, err error) {
	key, tf, err := p.keyTime(rec, first, simple)
	if err != nil {
		return fp, tf, h, 0, err
	}
	rb := p.opts.RedisBloom
	fp = p.opts.Records.Hash.Sum(key)
	if rb.Item == rbloom.ItemFP {
		p.item = rbloom.AppendFP(p.item[:0], fp.Hi, fp.Lo)
	} else {
		p.item = rb.Item.AppendKeyItem(p.item[:0], key)
	}
	// Every filter BF.RESERVE makes hashes with MurmurHash64A
	// (OptForce64); TestReplayRedisBloomModule checks it against the
	// module's answers.
	return fp, tf, rbloom.HashItem(rbloom.OptForce64, p.item), rb.Router.Shard(key), nil
}

// parse appends the chunk's events to buf: the input's name and its
// row group + 1 (0 in a text format), then each event (replayEventBytes
// and, with Lost, the record's bytes).
func (p *replayParser) parse(job chunkJob, buf []byte) ([]byte, error) {
	if p.keyer == nil {
		if err := p.init(job.name); err != nil {
			return buf, err
		}
	}
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(job.name)))
	buf = append(buf, job.name...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(job.chunk.RowGroup))
	opts := p.opts
	spec := opts.Records.Spec
	keepRec := opts.Lost != nil
	rb := opts.RedisBloom != nil
	c := job.chunk
	data, line, recNo := job.records()
	var n int64
	var err error
	c.Split(data, spec.Format, spec.Term, func(rec []byte, simple bool) bool {
		first := c.FirstRecord == 1 && recNo == 1 && !job.header
		var fp fpstore.Fingerprint
		var tf []byte
		var kerr error
		var h rbloom.Hash
		var shard int
		if rb {
			fp, tf, h, shard, kerr = p.redisBloom(rec, first, simple)
		} else {
			fp, tf, kerr = p.fingerprintTime(rec, first, simple)
		}
		var t int64
		if kerr == nil {
			if p.timeAt >= 0 {
				if t, kerr = p.time.parse(tf); kerr != nil {
					kerr = &ingest.BadRecord{Reason: "time field " + opts.TimeField + ": " + kerr.Error()}
				}
			}
			if kerr == nil {
				at := len(buf)
				buf = append(buf, make([]byte, replayEventBytes)...)
				e := buf[at:]
				binary.LittleEndian.PutUint64(e, fp.Hi)
				binary.LittleEndian.PutUint64(e[8:], fp.Lo)
				binary.LittleEndian.PutUint64(e[16:], uint64(t))
				binary.LittleEndian.PutUint64(e[24:], uint64(line))
				binary.LittleEndian.PutUint64(e[32:], uint64(recNo))
				if keepRec {
					binary.LittleEndian.PutUint32(e[40:], uint32(len(rec)))
				}
				if rb {
					buf = binary.LittleEndian.AppendUint64(buf, h.A)
					buf = binary.LittleEndian.AppendUint64(buf, h.B)
					buf = binary.LittleEndian.AppendUint32(buf, uint32(shard))
				}
				if keepRec {
					buf = append(buf, rec...)
				}
				n++
			}
		}
		if kerr != nil {
			re := &ingest.RecordError{Name: job.name, Line: line, Record: recNo, RowGroup: job.chunk.RowGroup, Input: job.in, Err: kerr}
			if err = opts.Records.OnBad.Handle(re, rec); err != nil {
				return false
			}
		}
		if simple {
			line++
		} else {
			line += int64(ingest.CountLines(rec))
		}
		recNo++
		return true
	})
	opts.Progress.Records.Add(n)
	return buf, err
}

// timeParser reads time fields of one --time-unit (parseEventTime).
type timeParser struct{ unit, limit int64 }

func newTimeParser(unit int64) timeParser {
	return timeParser{unit: max(unit, 1), limit: math.MaxInt64 / max(unit, 1)}
}

// parse is parseEventTime, the integer case first, eight digits at a time.
func (tp timeParser) parse(b []byte) (int64, error) {
	if len(b) > 0 && len(b) <= 18 {
		var v uint64
		i := 0
		if len(b) >= 8 {
			if x, ok := eightDigits(b); ok {
				v, i = x, 8
			}
		}
		for ; i < len(b) && b[i]-'0' <= 9; i++ {
			v = v*10 + uint64(b[i]-'0')
		}
		if i == len(b) && v <= uint64(tp.limit) {
			return int64(v) * tp.unit, nil
		}
	}
	return parseEventTime(b, tp.unit)
}

// eightDigits reads b[:8] as a decimal number when they are all digits
// (the SWAR test and reduction of simdjson's parse_eight_digits_unrolled).
func eightDigits(b []byte) (uint64, bool) {
	v := binary.LittleEndian.Uint64(b)
	if (v&0xF0F0F0F0F0F0F0F0)|((v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0)>>4 != 0x3333333333333333 {
		return 0, false
	}
	v -= 0x3030303030303030
	v = (v*10 + v>>8) & 0x00FF00FF00FF00FF
	v = (v*100 + v>>16) & 0x0000FFFF0000FFFF
	return (v*10000 + v>>32) & 0xFFFFFFFF, true
}
