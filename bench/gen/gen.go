package gen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
)

// Defaults for the zero values of Options. DefaultRepeat is the repeat
// rate the users report (~38% of events are repeats); with it 10M records
// hold 6.2M distinct ones, like the reference file the README's Performance
// section measures.
const (
	DefaultRepeat = 0.38
	DefaultFar    = 0.5
	DefaultFormat = "lines"
)

// NearWindow is how many of the most recent new records a near repeat picks
// from: about what an online bloom with a 1 s TTL would still remember.
const NearWindow = 1000

// CSVHeader is the header line of the csv format, terminator included.
const CSVHeader = "user_id,device_id,timestamp_ms,event_type,amount\n"

// BaseTimestampMs is the timestamp_ms of the first record: 2025-12-02T00:00Z.
const BaseTimestampMs = 1764633600000

// Options says what Generate writes. The zero value of Repeat, Far and
// Format means their default, so Options{Records: n} is the reference
// mix; ask for no repeats (or no far repeats) with a negative value.
type Options struct {
	Records int64   // total records (csv header excluded)
	Repeat  float64 // fraction of records that repeat an earlier one: 0 = DefaultRepeat, <0 = none
	Seed    uint64
	Format  string  // "lines" (the CSV row is the line, no header), "csv" (with CSVHeader), "jsonl"; "" = lines
	Far     float64 // fraction of repeats that copy any earlier record rather than a recent one: 0 = DefaultFar, <0 = none
}

// Stats is what Generate wrote. Distinct is exact: it is the number of
// distinct records, and also of distinct keys user_id:device_id:timestamp_ms.
type Stats struct {
	Records, Distinct int64
	Bytes             int64 // bytes written, csv header included
}

type format uint8

const (
	fmtLines format = iota
	fmtCSV
	fmtJSONL
)

// resolve applies the defaults and checks the ranges, so that the hot loop
// trusts its inputs.
func (o Options) resolve() (f format, repeat, far float64, err error) {
	switch o.Format {
	case "", "lines":
		f = fmtLines
	case "csv":
		f = fmtCSV
	case "jsonl":
		f = fmtJSONL
	default:
		return 0, 0, 0, fmt.Errorf("bench: unknown format %q (want lines, csv or jsonl)", o.Format)
	}
	if o.Records < 0 {
		return 0, 0, 0, fmt.Errorf("bench: negative record count %d", o.Records)
	}
	frac := func(name string, v, def float64) (float64, error) {
		switch {
		case math.IsNaN(v) || v > 1:
			return 0, fmt.Errorf("bench: %s %v is not a fraction in [0, 1]", name, v)
		case v == 0:
			return def, nil
		case v < 0:
			return 0, nil
		}
		return v, nil
	}
	if repeat, err = frac("repeat", o.Repeat, DefaultRepeat); err != nil {
		return 0, 0, 0, err
	}
	if far, err = frac("far", o.Far, DefaultFar); err != nil {
		return 0, 0, 0, err
	}
	return f, repeat, far, nil
}

// Repeats is the exact number of repeated records Generate writes for o: the
// first record is always new, so at most Records-1.
func (o Options) Repeats() (int64, error) {
	_, repeat, _, err := o.resolve()
	if err != nil {
		return 0, err
	}
	return repeatCount(o.Records, repeat), nil
}

func repeatCount(records int64, repeat float64) int64 {
	if records <= 0 {
		return 0
	}
	q := int64(math.Round(repeat * float64(records)))
	return min(max(q, 0), records-1)
}

// mix is the splitmix64 finaliser: a bijection on 64 bits whose outputs for
// consecutive inputs look independent, so record n's fields can be computed
// from n alone (no state, no table).
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a value in [0, n) from the random word u (Lemire's
// multiply-high; the bias, n/2^64, is far below anything measurable here).
func below(u, n uint64) uint64 {
	hi, _ := bits.Mul64(u, n)
	return hi
}

// The event mix: cumulative weights out of 100, and whether the event has an
// amount. Names are of realistic lengths, so the line length (and so the
// bytes per record the benchmarks see) is near the reference file's.
var events = [...]struct {
	name  string
	upTo  uint64
	money bool
}{
	{"login_success", 35, false},
	{"login_failed", 43, false},
	{"logout", 55, false},
	{"payment", 75, true},
	{"refund", 78, true},
	{"order_create", 88, true},
	{"password_reset", 90, false},
	{"device_bind", 95, false},
	{"session_refresh", 100, false},
}

// eventOf maps a draw in [0, 100) to its event (a table so the hot loop does
// not scan the list).
var eventOf = func() (t [100]uint8) {
	e := 0
	for i := range t {
		for uint64(i) >= events[e].upTo {
			e++
		}
		t[i] = uint8(e)
	}
	return t
}()

// renderer turns a new-record index into its bytes. The fields of record n
// depend only on (seed, n); its uniqueness comes from the timestamp alone.
type renderer struct {
	f       format
	recSalt uint64 // keys the per-record hash
	devSalt uint64 // keys the per-(user, slot) device id
}

const hexDigits = "0123456789abcdef"

func (r *renderer) append(b []byte, n uint64) []byte {
	// Independent draws: h1 for the user (low byte: hot or not, high bits:
	// which), h2 for slot (bits 0-3), timestamp jitter (4-5) and event (high
	// bits), h3 for the amount.
	h1 := mix(r.recSalt ^ mix(n))
	h2 := mix(h1 ^ 0x6a09e667f3bcc909)

	// A fifth of the events come from 50k hot accounts (scattered over
	// the id space), the rest from all 9M: skewed like real traffic, with
	// seven-digit ids like the example in the brief.
	var user uint64
	if h1&0xff < 51 {
		user = 1_000_000 + below(mix(r.devSalt^below(h1, 50_000)), 9_000_000)
	} else {
		user = 1_000_000 + below(h1, 9_000_000)
	}
	// Most users have one device, some two or three: the device id is a
	// function of (user, slot), so a user's devices recur across records.
	slot := uint64(0)
	switch d := h2 & 15; {
	case d >= 14:
		slot = 2
	case d >= 11:
		slot = 1
	}
	dev := mix(r.devSalt^mix(user<<2|slot)) >> 28 // 36 bits: 9 hex digits
	// Record n's timestamp is in [base+4n, base+4n+3]: strictly increasing
	// in n, hence unique, which is what makes Distinct exact.
	ts := BaseTimestampMs + 4*n + ((h2 >> 4) & 3)
	ev := &events[eventOf[below(h2, 100)]]
	cents := uint64(0)
	if ev.money {
		// Mostly small amounts, one in sixteen up to 100k.
		h3 := mix(h2)
		if h3&15 == 0 {
			cents = below(h3, 10_000_000)
		} else {
			cents = below(h3, 50_000)
		}
	}

	switch r.f {
	case fmtJSONL:
		b = append(b, `{"user_id":"u`...)
		b = strconv.AppendUint(b, user, 10)
		b = append(b, `","device_id":"d`...)
		b = appendHex36(b, dev)
		b = append(b, `","timestamp_ms":`...)
		b = strconv.AppendUint(b, ts, 10)
		b = append(b, `,"event_type":"`...)
		b = append(b, ev.name...)
		b = append(b, `","amount":`...)
		b = appendCents(b, cents)
		b = append(b, "}\n"...)
	default:
		b = append(b, 'u')
		b = strconv.AppendUint(b, user, 10)
		b = append(b, ",d"...)
		b = appendHex36(b, dev)
		b = append(b, ',')
		b = strconv.AppendUint(b, ts, 10)
		b = append(b, ',')
		b = append(b, ev.name...)
		b = append(b, ',')
		b = appendCents(b, cents)
		b = append(b, '\n')
	}
	return b
}

// appendHex36 writes the low 36 bits of v as exactly 9 lowercase hex digits
// (fixed width, unlike strconv, so ids look like ids).
func appendHex36(b []byte, v uint64) []byte {
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = hexDigits[v&15]
		v >>= 4
	}
	return append(b, d[:]...)
}

// appendCents writes c/100 with exactly two decimals ("0.00", "1234.05"),
// valid as a CSV field and as a JSON number.
func appendCents(b []byte, c uint64) []byte {
	b = strconv.AppendUint(b, c/100, 10)
	c %= 100
	return append(b, '.', byte('0'+c/10), byte('0'+c%10))
}

// genBuf is the output buffer size: big enough that write syscalls cost
// nothing next to rendering, small enough to stay in L2.
const genBuf = 256 << 10

// Generate writes o.Records records to w and reports what it wrote. The bytes
// are a function of o alone. Memory is constant whatever o.Records is.
func Generate(w io.Writer, o Options) (Stats, error) {
	f, repeat, far, err := o.resolve()
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	seed := mix(o.Seed ^ 0x243f6a8885a308d3)
	r := renderer{f: f, recSalt: mix(seed ^ 1), devSalt: mix(seed ^ 2)}
	// The stream's decisions (repeat or not, which record) come from their
	// own sequence, so the records' fields do not depend on them.
	state := mix(seed ^ 3)
	farCut := uint64(far * (1 << 53))
	if far >= 1 {
		farCut = 1 << 53
	}

	buf := make([]byte, 0, genBuf+1024)
	flush := func() error {
		n, err := w.Write(buf)
		st.Bytes += int64(n)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
		buf = buf[:0]
		return err
	}
	if f == fmtCSV {
		buf = append(buf, CSVHeader...)
	}

	remaining := uint64(o.Records)
	repeatsLeft := uint64(repeatCount(o.Records, repeat))
	var fresh uint64 // new records so far: the next new record's index
	for ; remaining > 0; remaining-- {
		// Each position is a repeat with probability repeatsLeft/remaining:
		// exactly repeatsLeft repeats land, at random positions. The first
		// record is new since repeatCount keeps one record back.
		state += 0x9e3779b97f4a7c15
		u := mix(state)
		if fresh > 0 && below(u, remaining) < repeatsLeft {
			repeatsLeft--
			state += 0x9e3779b97f4a7c15
			v := mix(state)
			var j uint64
			if v>>11 < farCut {
				j = below(v, fresh)
			} else {
				lo := fresh - min(fresh, NearWindow)
				j = lo + below(v, fresh-lo)
			}
			buf = r.append(buf, j)
		} else {
			buf = r.append(buf, fresh)
			fresh++
		}
		st.Records++
		if len(buf) >= genBuf {
			if err := flush(); err != nil {
				return st, fmt.Errorf("bench: writing records: %w", err)
			}
		}
	}
	if len(buf) > 0 {
		if err := flush(); err != nil {
			return st, fmt.Errorf("bench: writing records: %w", err)
		}
	}
	st.Distinct = int64(fresh)
	if st.Distinct != o.Records-repeatCount(o.Records, repeat) {
		// Cannot happen: the loop places every planned repeat. Checked
		// because every benchmark's correctness check rests on it.
		return st, errors.New("bench: internal error: distinct count off plan")
	}
	return st, nil
}
