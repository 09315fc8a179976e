package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/fpdedup/fpdedup/ingest"
)

// refTier and refSystem are what the reference counts, field by field as
// ReplayTier and ReplaySystem.
type refTier struct {
	reached, dropped, falseDrops, dupsPassed, firstsReached int64
	expected                                                float64
}

type refSystem struct {
	accepted, dropped, lost, letThrough int64
	l1, l2                              refTier
	lostRecs                            bytes.Buffer
}

type refEvent struct {
	key  string
	t    int64 // ms
	line string
}

// refReplay is the straightforward reference: a Go map of the keys seen,
// plain []bool bit arrays made anew at each window, the positions written
// out from the documented derivation, each event decided as the doc
// comment of Replay says.
func refReplay(evs []refEvent, l1Bits uint64, ttlMs int64, shards, bits uint64, k int, arrival bool) (firsts, dups, late int64, sys refSystem) {
	seen := map[string]bool{}
	var l1 []bool
	l2 := make([][]bool, shards)
	l2n := make([]float64, shards)
	for s := range l2 {
		l2[s] = make([]bool, bits)
	}
	var l1n float64
	window, clock := int64(0), int64(0)
	for i, e := range evs {
		t := e.t
		if i > 0 && t < clock {
			if !arrival {
				panic("unsorted")
			}
			late++
			t = clock
		}
		clock = t
		if l1Bits > 0 {
			w := int64(math.Floor(float64(t) / float64(ttlMs)))
			if i == 0 || w != window {
				window, l1, l1n = w, make([]bool, l1Bits), 0
			}
		}
		first := !seen[e.key]
		seen[e.key] = true
		if first {
			firsts++
		} else {
			dups++
		}
		u := xxh3.Hash128([]byte(e.key))
		hi, lo := u.Hi, u.Lo
		drop := func(tier *refTier) {
			tier.dropped++
			sys.dropped++
			if first {
				tier.falseDrops++
				sys.lost++
				sys.lostRecs.WriteString(e.line)
			}
		}
		var b1 uint64
		if l1Bits > 0 {
			sys.l1.reached++
			b1 = lo % l1Bits
			if first {
				sys.l1.firstsReached++
				sys.l1.expected += 1 - math.Exp(-l1n/float64(l1Bits))
			}
			if l1[b1] {
				drop(&sys.l1)
				continue
			}
			if !first {
				sys.l1.dupsPassed++
			}
		}
		if shards > 0 {
			sys.l2.reached++
			s := hi % shards
			var pos []uint64
			all := true
			for j := 0; j < k; j++ {
				p := (lo + uint64(j)*hi) % bits
				pos = append(pos, p)
				all = all && l2[s][p]
			}
			if first {
				sys.l2.firstsReached++
				sys.l2.expected += math.Pow(1-math.Exp(-float64(k)*l2n[s]/float64(bits)), float64(k))
			}
			if all {
				drop(&sys.l2)
				continue
			}
			for _, p := range pos {
				l2[s][p] = true
			}
			l2n[s]++
			if !first {
				sys.l2.dupsPassed++
			}
		}
		sys.accepted++
		if !first {
			sys.letThrough++
		}
		if l1Bits > 0 {
			l1[b1] = true
			l1n++
		}
	}
	return firsts, dups, late, sys
}

// replayEvents makes n csv records "key,time_ms,payload" in time order:
// times advance by 0-299 ms (many 1 s windows, several events a window),
// a third of the keys repeat one of the last 20 (mostly the same window),
// a sixth repeat any earlier key (across windows: TTL expiry).
func replayEvents(n int, seed uint64) []refEvent {
	r := rand.New(rand.NewPCG(seed, 99))
	var evs []refEvent
	t := int64(1764633600000)
	for i := 0; i < n; i++ {
		t += int64(r.IntN(300))
		key := fmt.Sprintf("k%d", i)
		switch x := r.IntN(6); {
		case i > 0 && x < 2:
			key = evs[max(0, len(evs)-1-r.IntN(20))].key
		case i > 0 && x == 2:
			key = evs[r.IntN(len(evs))].key
		}
		evs = append(evs, refEvent{key: key, t: t, line: fmt.Sprintf("%s,%d,p%d\n", key, t, i)})
	}
	return evs
}

func writeEvents(t *testing.T, evs []refEvent, header string) string {
	var b strings.Builder
	b.WriteString(header)
	for _, e := range evs {
		b.WriteString(e.line)
	}
	path := filepath.Join(t.TempDir(), "events.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func csvRecords(t testing.TB, header bool, keys ...string) ingest.RecordOptions {
	t.Helper()
	bad, err := ingest.ParseOnBad("fail")
	if err != nil {
		t.Fatal(err)
	}
	return ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatCSV, Keys: keys, Sep: ":", Header: header, Term: '\n'}, OnBad: bad, MaxRecord: 1 << 20}
}

func checkTier(t *testing.T, what string, got *ReplayTier, want refTier) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: missing", what)
	}
	g := [...]int64{got.Reached, got.Dropped, got.FalseDrops, got.DupsPassed, got.FirstsReached}
	w := [...]int64{want.reached, want.dropped, want.falseDrops, want.dupsPassed, want.firstsReached}
	if g != w {
		t.Errorf("%s: reached, dropped, false drops, duplicates passed, firsts reached = %v, reference %v", what, g, w)
	}
	if want.firstsReached > 0 {
		wantRate := want.expected / float64(want.firstsReached)
		if math.Abs(got.FPRFormula-wantRate) > 1e-3*wantRate+1e-12 {
			t.Errorf("%s: formula rate %g, reference %g", what, got.FPRFormula, wantRate)
		}
		if m := float64(want.falseDrops) / float64(want.firstsReached); got.FPRMeasured != m {
			t.Errorf("%s: measured rate %g, want %g", what, got.FPRMeasured, m)
		}
	}
}

func checkSystem(t *testing.T, what string, got ReplaySystem, want refSystem, l1, l2 bool) {
	t.Helper()
	g := [...]int64{got.Accepted, got.Dropped, got.Lost, got.LetThrough}
	w := [...]int64{want.accepted, want.dropped, want.lost, want.letThrough}
	if g != w {
		t.Errorf("%s: accepted, dropped, lost, let through = %v, reference %v", what, g, w)
	}
	if l1 {
		checkTier(t, what+" L1", got.L1, want.l1)
	} else if got.L1 != nil {
		t.Errorf("%s: an L1 that was not asked for", what)
	}
	if l2 {
		checkTier(t, what+" L2", got.L2, want.l2)
	} else if got.L2 != nil {
		t.Errorf("%s: an L2 that was not asked for", what)
	}
}

// TestReplayMatchesReference: blooms so small that they collide all the
// time, windows crossed every few events, a sweep of three L2 sizes (one a
// power of two, the masked path), on one thread and two: every count and
// the lost records, byte for byte, are the reference's.
func TestReplayMatchesReference(t *testing.T) {
	evs := replayEvents(6000, 1)
	path := writeEvents(t, evs, "")
	sizes := []uint64{50, 64, 509}
	for _, threads := range []int{1, 2} {
		var lost bytes.Buffer
		st, err := Replay(context.Background(), ReplayOptions{
			Inputs: []string{path}, Records: csvRecords(t, false, "1"), TimeField: "2",
			L1: &ReplayL1{Bits: 97, TTL: time.Second}, L2: &ReplayL2{Shards: 3, Bits: sizes, K: 3},
			Lost: &lost, Threads: threads, Mem: 64 << 20, TmpDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Systems) != len(sizes) {
			t.Fatalf("%d systems, want %d", len(st.Systems), len(sizes))
		}
		for i, bits := range sizes {
			firsts, dups, _, want := refReplay(evs, 97, 1000, 3, bits, 3, false)
			if st.Events != int64(len(evs)) || st.FirstOccurrences != firsts || st.Duplicates != dups {
				t.Fatalf("events %d, firsts %d, dups %d; reference %d, %d, %d", st.Events, st.FirstOccurrences, st.Duplicates, len(evs), firsts, dups)
			}
			what := fmt.Sprintf("threads %d, L2 bits %d", threads, bits)
			checkSystem(t, what, st.Systems[i], want, true, true)
			if want.lost == 0 || want.letThrough == 0 || want.l1.dupsPassed == 0 || want.l2.falseDrops == 0 {
				t.Errorf("%s: the data do not exercise every count: %+v", what, want)
			}
			if i == 0 && lost.String() != want.lostRecs.String() {
				t.Errorf("%s: lost records differ: %d bytes, reference %d", what, lost.Len(), want.lostRecs.Len())
			}
		}
		if st.Windows < 500 {
			t.Errorf("only %d windows", st.Windows)
		}
	}
}

// TestReplayTiersAlone: an L1 alone lets the duplicates across windows
// through; an L2 alone needs no time (input order).
func TestReplayTiersAlone(t *testing.T) {
	evs := replayEvents(4000, 2)
	path := writeEvents(t, evs, "")
	st, err := Replay(context.Background(), ReplayOptions{
		Inputs: []string{path}, Records: csvRecords(t, false, "1"), TimeField: "2",
		L1: &ReplayL1{Bits: 1 << 7, TTL: 700 * time.Millisecond}, Threads: 2, Mem: 64 << 20, TmpDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, want := refReplay(evs, 128, 700, 0, 0, 0, false)
	checkSystem(t, "L1 alone", st.Systems[0], want, true, false)
	if want.letThrough == 0 {
		t.Error("no duplicate let through across windows")
	}

	st, err = Replay(context.Background(), ReplayOptions{
		Inputs: []string{path}, Records: csvRecords(t, false, "1"),
		L2: &ReplayL2{Shards: 2, Bits: []uint64{300}, K: 2}, Threads: 2, Mem: 64 << 20, TmpDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, want = refReplay(evs, 0, 0, 2, 300, 2, false)
	checkSystem(t, "L2 alone", st.Systems[0], want, false, true)
}

// TestReplayArrival: events out of time order are an error naming the
// record, unless --order arrival, where a late event falls in the current
// window (the clock is the latest time seen).
func TestReplayArrival(t *testing.T) {
	evs := replayEvents(3000, 3)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range evs {
		if r.IntN(10) == 0 { // late by up to 5 s
			evs[i].t -= int64(r.IntN(5000))
			parts := strings.SplitN(evs[i].line, ",", 3)
			evs[i].line = parts[0] + "," + strconv.FormatInt(evs[i].t, 10) + "," + parts[2]
		}
	}
	path := writeEvents(t, evs, "id,at,payload\n")
	opts := ReplayOptions{
		Inputs: []string{path}, Records: csvRecords(t, true, "id"), TimeField: "at",
		L1: &ReplayL1{Bits: 200, TTL: time.Second}, L2: &ReplayL2{Shards: 4, Bits: []uint64{128}, K: 4},
		Threads: 2, Mem: 64 << 20, TmpDir: t.TempDir(),
	}
	_, err := Replay(context.Background(), opts)
	var oe *ReplayOrderError
	if !errors.As(err, &oe) {
		t.Fatalf("unsorted input: %v, want a *ReplayOrderError", err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].t < evs[i-1].t {
			if oe.Line != int64(i+2) || oe.Record != int64(i+1) || oe.PrevLine != int64(i+1) || oe.Time != evs[i].t*1e6 {
				t.Errorf("%v: want line %d", oe, i+2)
			}
			break
		}
	}
	var lost bytes.Buffer
	opts.Arrival, opts.Lost = true, &lost
	st, err := Replay(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	_, _, late, want := refReplay(evs, 200, 1000, 4, 128, 4, true)
	if st.Late != late || late == 0 {
		t.Errorf("late %d, reference %d", st.Late, late)
	}
	checkSystem(t, "arrival", st.Systems[0], want, true, true)
	if lost.String() != "id,at,payload\n"+want.lostRecs.String() {
		t.Errorf("lost records differ from the reference's (header first)")
	}
}

// TestReplaySpilledTruth: the exact seen-set spilled to runs (a small
// --mem) gives the same answers.
func TestReplaySpilledTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("needs 400k distinct keys")
	}
	var evs []refEvent
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 600_000; i++ {
		k := i
		if i%3 == 0 {
			k = r.IntN(i + 1)
		}
		key := "k" + strconv.Itoa(k)
		evs = append(evs, refEvent{key: key, t: int64(i), line: key + "," + strconv.Itoa(i) + "\n"})
	}
	path := writeEvents(t, evs, "")
	st, err := Replay(context.Background(), ReplayOptions{
		Inputs: []string{path}, Records: csvRecords(t, false, "1"), TimeField: "2",
		L1: &ReplayL1{Bits: 4096, TTL: time.Second}, L2: &ReplayL2{Shards: 4, Bits: []uint64{1 << 20}, K: 3},
		Threads: 2, Mem: 1, TmpDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.TruthMode != "lsm" {
		t.Fatalf("the seen-set did not spill (%s, %d bytes)", st.TruthMode, st.TruthBytes)
	}
	_, _, _, want := refReplay(evs, 4096, 1000, 4, 1<<20, 3, false)
	checkSystem(t, "spilled", st.Systems[0], want, true, true)
}

func TestParseEventTime(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		in   string
		unit int64
		want int64
	}{
		{"1764633600007", ms, 1764633600007 * ms},
		{"-1500", ms, -1500 * ms},
		{"1764633600.25", int64(time.Second), 1764633600250 * ms},
		{"1.5e3", ms, 1500 * ms},
		{"2025-12-02T00:00:00.007Z", ms, 1764633600007 * ms},
		{"2025-12-02T01:00:00+01:00", ms, 1764633600000 * ms},
		{"7", 1, 7},
	} {
		got, err := parseEventTime([]byte(c.in), c.unit)
		if err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "abc", "12:30", "99999999999999999999", "1e300"} {
		if _, err := parseEventTime([]byte(in), ms); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	for _, c := range [][3]int64{{0, 10, 0}, {9, 10, 0}, {10, 10, 1}, {-1, 10, -1}, {-10, 10, -1}, {-11, 10, -2}} {
		if got := floorDiv(c[0], c[1]); got != c[2] {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}

// TestReplayKeyTime: one Keyer's output and item give the key and the time
// field two separate Keyers give, wherever the time field is (a key field
// or not, first, middle or last) and whatever the fields hold (the
// separator inside a field, a multi-byte separator, quotes, jsonl paths),
// with the splitter's word on the record and without it.
func TestReplayKeyTime(t *testing.T) {
	csvRecs := []string{"a,b,17,x\n", "a:b,c,18,y\n", "\"a,\"\"q\",b:,19,z\r\n", ":,:,20,:\n", "a,b,:21,c\n", "a,b,,d\n", "u1918327,d7029f77dd,1764633600002,order\n"}
	tsvRecs := []string{"a\tb\t17\tx\n", "a:b\tc\t18\ty\r\n", "\"a\tb\"\t\t19\n"}
	jsonRecs := []string{`{"u":"a","t":17,"d":{"x":"b"}}` + "\n", `{"u":"a:b","t":"18","d":{"x":":"}}` + "\n"}
	cases := []struct {
		format ingest.Format
		keys   []string
		sep    string
		time   string
		recs   []string
	}{
		{ingest.FormatCSV, []string{"1", "2", "3"}, ":", "3", csvRecs},
		{ingest.FormatCSV, []string{"3", "1"}, ":", "3", csvRecs},
		{ingest.FormatCSV, []string{"1", "3", "2"}, ":", "3", csvRecs},
		{ingest.FormatCSV, []string{"1", "2"}, ":", "3", csvRecs},
		{ingest.FormatCSV, []string{"3"}, ":", "3", csvRecs},
		{ingest.FormatCSV, []string{"1", "2"}, "::", "3", csvRecs},
		{ingest.FormatCSV, []string{"4", "1"}, "", "3", csvRecs},
		{ingest.FormatCSV, []string{"1", "2"}, ",", "3", csvRecs}, // the key aliases the record
		{ingest.FormatTSV, []string{"1", "2"}, "\t", "3", tsvRecs},
		{ingest.FormatTSV, []string{"2", "3"}, ":", "3", tsvRecs},
		{ingest.FormatJSONL, []string{"u", "d.x"}, ":", "t", jsonRecs},
		{ingest.FormatJSONL, []string{"t", "u"}, ":", "t", jsonRecs},
	}
	for _, c := range cases {
		rec := ingest.RecordOptions{Spec: ingest.KeySpec{Format: c.format, Keys: c.keys, Sep: c.sep, Term: '\n'}}
		p := newReplayParser(&ReplayOptions{Records: rec, TimeField: c.time}, newHeaders())
		if err := p.init("test"); err != nil {
			t.Fatal(err)
		}
		keyOnly, err := ingest.NewKeyer(rec.Spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		one := rec.Spec
		one.Keys = []string{c.time}
		timeOnly, err := ingest.NewKeyer(one, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range c.recs {
			var simple bool
			ingest.SplitShaped([]byte(r), c.format, '\n', func(_ []byte, s bool) bool { simple = s; return false })
			for _, shaped := range []bool{false, simple} {
				rec := []byte(r)
				key, tf, err := p.keyTime(rec, false, shaped)
				if err != nil {
					t.Fatalf("%v %q: %v", c.keys, r, err)
				}
				key, tf = bytes.Clone(key), bytes.Clone(tf)
				if k, _, _ := p.keyTime(rec, false, shaped); string(append(k, '#')) != string(key)+"#" || string(rec) != r {
					t.Errorf("keys %v sep %q, %q: an append to the key wrote into the record: %q", c.keys, c.sep, r, rec)
				}
				wantKey, _ := keyOnly.Key([]byte(r), false)
				wantTime, _ := timeOnly.Key([]byte(r), false)
				if string(key) != string(wantKey) || string(tf) != string(wantTime) {
					t.Errorf("keys %v sep %q time %s, %q (simple %v): key %q time %q, want %q %q", c.keys, c.sep, c.time, r, shaped, key, tf, wantKey, wantTime)
				}
				fp, tf2, err := p.fingerprintTime(rec, false, shaped)
				if want := ingest.XXH3.Sum(wantKey); err != nil || fp != want || string(tf2) != string(wantTime) {
					t.Errorf("keys %v sep %q time %s, %q (simple %v): fingerprint %v time %q, %v; want %v %q", c.keys, c.sep, c.time, r, shaped, fp, tf2, err, want, wantTime)
				}
			}
		}
	}
}

// TestReplayOrderLines: the order error names the record's first line and
// its number, counted as dedup counts them (a header, a quoted field over
// two lines, a second input).
func TestReplayOrderLines(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	if err := os.WriteFile(a, []byte("id,at\nx,10\n\"y\nz\",20\nw,30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("id,at\n\"v\nu\",40\nq,35\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Replay(context.Background(), ReplayOptions{
		Inputs: []string{a, b}, Records: csvRecords(t, true, "id"), TimeField: "at",
		L1: &ReplayL1{Bits: 64, TTL: time.Second}, Threads: 2, Mem: 64 << 20, TmpDir: dir,
	})
	var oe *ReplayOrderError
	if !errors.As(err, &oe) {
		t.Fatalf("%v, want a *ReplayOrderError", err)
	}
	want := ReplayOrderError{Name: b, Line: 4, Record: 2, Time: 35e6, PrevName: b, PrevLine: 2, PrevTime: 40e6}
	if *oe != want {
		t.Errorf("%+v, want %+v", *oe, want)
	}
	if msg := oe.Error(); !strings.Contains(msg, "b.csv:4: record 2: event time 1970-01-01T00:00:00.035Z is earlier than 1970-01-01T00:00:00.04Z, the time of "+b+":2") {
		t.Errorf("message %q", msg)
	}
}

// TestTimeParserDigits: the eight-digit reduction agrees with strconv on
// every length and on non-digits in any position.
func TestTimeParserDigits(t *testing.T) {
	tp := newTimeParser(int64(time.Millisecond))
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 100_000; i++ {
		n := 1 + r.IntN(18)
		b := make([]byte, n)
		for j := range b {
			b[j] = byte('0' + r.IntN(10))
		}
		if r.IntN(4) == 0 {
			b[r.IntN(n)] = "/:a. -+e"[r.IntN(8)]
		}
		got, gerr := tp.parse(b)
		want, werr := parseEventTime(b, int64(time.Millisecond))
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: %d, %v; parseEventTime %d, %v", b, got, gerr, want, werr)
		}
		if v, err := strconv.ParseInt(string(b), 10, 64); err == nil && v <= math.MaxInt64/1_000_000 && v >= -math.MaxInt64/1_000_000 && (gerr != nil || got != v*1e6) {
			t.Fatalf("%q: %d, %v; want %d", b, got, gerr, v*1e6)
		}
	}
}
