package mysqltable_test

// A hostile or broken MySQL server (issue 27) must not exhaust memory,
// run forever or crash reconcile: each test has the fake server misbehave
// in one way and wants reconcile.Run to end by itself with a clear error,
// no panic, and the heap grown by far less than the server claims.

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// heapLimit is the most the heap may grow in a run against a hostile
// server, which claims gigabytes: a run against a good one grows by a few
// MiB (buffers of the read and the join).
const heapLimit = 256 << 20

// heapWatch samples the heap's growth during a run; once past the limit
// it calls exceeded (which stops the server: the code under test could not).
type heapWatch struct {
	base, peak uint64
	stop, done chan struct{}
}

func watchHeap(limit uint64, exceeded func()) *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapWatch{base: ms.HeapAlloc, peak: ms.HeapAlloc, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		fired := false
		for {
			runtime.ReadMemStats(&ms)
			h.peak = max(h.peak, ms.HeapAlloc)
			if !fired && h.peak-h.base > limit {
				fired = true
				go exceeded()
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// growth stops the watch and says how far the heap grew at most.
func (h *heapWatch) growth() uint64 {
	close(h.stop)
	<-h.done
	return h.peak - h.base
}

// hostileRun runs reconcile against s and wants it to fail, by itself,
// with the heap grown by less than heapLimit; it returns the report and
// the error.
func hostileRun(t *testing.T, d *reconciletest.Dataset, s *fakeMySQL, extra string, tune func(*reconcile.Options)) (*reconcile.Report, error) {
	t.Helper()
	h := watchHeap(heapLimit, s.Close)
	rep, err := fakeRun(t, d, s, extra, tune)
	g := h.growth()
	t.Logf("heap grew by %.1f MiB; the server sent %.1f MiB on %d connections; error: %v", float64(g)/(1<<20), float64(s.Sent.Load())/(1<<20), s.Accepted.Load(), err)
	if g > heapLimit {
		t.Fatalf("the heap grew by %d MiB (the server sent %d MiB): over %d MiB", g>>20, s.Sent.Load()>>20, heapLimit>>20)
	}
	if err == nil {
		t.Fatal("the run succeeded")
	}
	return rep, err
}

// wantBad wants err to be a *reconcile.BadServerError of problem p that
// names the server, after which nothing was retried.
func wantBad(t *testing.T, rep *reconcile.Report, err error, s *fakeMySQL, p reconcile.ServerProblem) *reconcile.BadServerError {
	t.Helper()
	var be *reconcile.BadServerError
	var we *reconcile.WriteError
	if errors.As(err, &we) {
		err = we.Err // (a WriteError does not unwrap)
	}
	if !errors.As(err, &be) || be.Problem != p {
		t.Fatalf("error %v, want a BadServerError, problem %d", err, p)
	}
	if be.Addr != s.Addr || !strings.Contains(err.Error(), "the MySQL server at "+s.Addr+" ") {
		t.Fatalf("the error does not name the server %s: %v", s.Addr, err)
	}
	if rep.Online.Retries != 0 {
		t.Fatalf("retried %d times", rep.Online.Retries)
	}
	return be
}

// wantSlow wants err to say the server was too slow, after the retries.
func wantSlow(t *testing.T, rep *reconcile.Report, err error, s *fakeMySQL, got, want int) {
	t.Helper()
	var se *reconcile.SlowServerError
	if !errors.As(err, &se) || se.Addr != s.Addr || se.Want != want || (got >= 0 && se.Got != got) || se.Timeout != 2*time.Second {
		t.Fatalf("error %v, want a SlowServerError of %d of %d bytes", err, got, want)
	}
	if rep.Online.Retries != 1 {
		t.Fatalf("retried %d times, want 1", rep.Online.Retries)
	}
}

func fakeRows(d *reconciletest.Dataset) [][]byte {
	var rows [][]byte
	for _, k := range d.OnlineKeys() {
		rows = append(rows, reconciletest.Bin16(k).([]byte))
	}
	return rows
}

// zeros16M is the body of a 16 MiB packet (allocated once, before any
// heap is measured).
var zeros16M = make([]byte, 1<<24-1)

// maxPackets writes 16 MiB packets, the first starting with first, until
// total bytes are sent or the client goes; a run of them is one logical
// packet, which the driver concatenates.
func maxPackets(c *fakeConn, first []byte, total int64) {
	for sent := int64(0); sent < total; sent += 1<<24 - 1 {
		c.Header(1<<24 - 1)
		body := zeros16M
		if sent == 0 {
			if c.Raw(first) != nil {
				return
			}
			body = body[len(first):]
		}
		if c.Raw(body) != nil || c.Flush() != nil {
			return
		}
	}
}

// A row whose value claims 8 GiB, sent as it claims: 16 MiB packets, one
// after the other, which the driver concatenates into one buffer.
func TestHostileMySQLValueClaimsGigabytes(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On(" ORDER BY ", func(c *fakeConn, q string) bool {
		c.FPColumn()
		maxPackets(c, binary.LittleEndian.AppendUint64([]byte{0xfe}, 8<<30), 8<<30)
		return false
	})
	rep, err := hostileRun(t, d, s, "", nil)
	if be := wantBad(t, rep, err, s, reconcile.PacketTooLarge); be.Size != 1<<24-1 || be.Max != 1<<20 {
		t.Fatalf("%+v", be)
	}
}

// A handshake of endless 16 MiB packets: one logical packet without end.
func TestHostileMySQLEndlessPacket(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On("greeting", func(c *fakeConn, q string) bool {
		maxPackets(c, []byte{10}, 1<<40)
		return false
	})
	rep, err := hostileRun(t, d, s, "", nil)
	wantBad(t, rep, err, s, reconcile.PacketTooLarge)
	if !strings.HasPrefix(err.Error(), "cannot reach ") {
		t.Fatalf("not refused at the handshake: %v", err)
	}
}

// A row whose value claims 16 MiB in a packet of 20 bytes, amid good
// rows: the driver reads it as the end of the rows (io.EOF), so without a
// count to compare (&count=0) the rest of the table was silently not read.
func TestHostileMySQLValuePastItsRow(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On(" ORDER BY ", func(c *fakeConn, q string) bool {
		c.FPColumn()
		for _, r := range s.Rows[:100] {
			c.Row(r)
		}
		c.Packet(append([]byte{0xfd, 0xff, 0xff, 0xff}, make([]byte, 16)...))
		for _, r := range s.Rows[100:] {
			c.Row(r)
		}
		c.End()
		return true
	})
	rep, err := hostileRun(t, d, s, "&count=0", nil)
	wantBad(t, rep, err, s, reconcile.MalformedReply)
	if rep.Online.Values != 100 {
		t.Fatalf("%d rows read, want the 100 before the bad one", rep.Online.Values)
	}
}

// endlessRows answers the streamed SELECT with the table's rows and then
// rows after them, in order, until the client goes.
func endlessRows(s *fakeMySQL) behaviour {
	return func(c *fakeConn, q string) bool {
		c.FPColumn()
		for _, r := range s.rowsAfter(q) {
			c.Row(r)
		}
		last := s.Rows[len(s.Rows)-1]
		hi, lo := binary.BigEndian.Uint64(last), binary.BigEndian.Uint64(last[8:])
		var v [16]byte
		for i := 0; ; i++ {
			if lo++; lo == 0 {
				hi++
			}
			binary.BigEndian.PutUint64(v[:], hi)
			binary.BigEndian.PutUint64(v[8:], lo)
			c.Row(v[:])
			if i%4096 == 0 && c.Flush() != nil {
				return false
			}
		}
	}
}

// Rows that never end, from a table whose COUNT(*) said 1820: the read
// stops at the 1821st.
func TestHostileMySQLEndlessRowsCounted(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On(" ORDER BY ", endlessRows(s))
	rep, err := hostileRun(t, d, s, "&count=1", nil)
	if be := wantBad(t, rep, err, s, reconcile.TooManyRows); be.Max != 1820 || be.Size != 1821 || rep.Online.Values != 1820 {
		t.Fatalf("%+v; %d rows read", be, rep.Online.Values)
	}
}

// Rows that never end, from a table too large to count (its row estimate
// is over 2M): the read stops at four times the estimate.
func TestHostileMySQLEndlessRowsEstimated(t *testing.T) {
	if testing.Short() {
		// 8M rows through the fake server: 47 s of the -race step, for a
		// limit the plain step checks; the read's goroutines are the same
		// as TestHostileMySQLEndlessRowsCounted's, which runs there.
		t.Skip("8M rows; the plain step runs it")
	}
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.Estimate = 2_000_001
	s.On(" ORDER BY ", endlessRows(s))
	rep, err := hostileRun(t, d, s, "", nil)
	if be := wantBad(t, rep, err, s, reconcile.TooManyRows); be.Max != 8_000_004 || !strings.Contains(err.Error(), "&count=1") {
		t.Fatalf("%+v", be)
	}
}

// A drip: the rows come a byte every 500 ms, inside the driver's 2 s
// read deadline, which it sets anew at every read.
func TestHostileMySQLDrip(t *testing.T) {
	reconciletest.PlainOnly(t, "a server that waits out the timeout; the guard runs under -race in the other hostile tests")
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On(" ORDER BY ", func(c *fakeConn, q string) bool {
		c.FPColumn()
		var rows []byte
		seq := c.seq
		for _, r := range s.Rows {
			rows = append(rows, 17, 0, 0, seq, 16)
			rows = append(rows, r...)
			seq++
		}
		if c.Flush() != nil {
			return false
		}
		for _, b := range rows {
			if c.Raw([]byte{b}) != nil || c.Flush() != nil {
				return false
			}
			time.Sleep(500 * time.Millisecond)
		}
		return false
	})
	rep, err := hostileRun(t, d, s, "", nil)
	wantSlow(t, rep, err, s, -1, 21)
}

// Silence: no answer to the streamed SELECT. (The driver's read deadline
// ended this before too, as "invalid connection"; the error now says so.)
func TestHostileMySQLSilence(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On(" ORDER BY ", func(c *fakeConn, q string) bool {
		c.Flush()
		c.r.ReadByte() // until the client goes
		return false
	})
	rep, err := hostileRun(t, d, s, "", nil)
	wantSlow(t, rep, err, s, 0, 0)
}

// A reset in the middle of a row, every time: retried, then an error
// that says where the connection broke (it said "invalid connection").
func TestHostileMySQLResetMidRow(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	s := newFakeMySQL(t, fakeRows(d))
	s.On(" ORDER BY ", func(c *fakeConn, q string) bool {
		c.FPColumn()
		rows := s.rowsAfter(q)
		for _, r := range rows[:min(10, len(rows))] {
			c.Row(r)
		}
		c.Raw([]byte{17, 0, 0, c.seq, 16, 1, 2, 3})
		c.Reset()
		return false
	})
	rep, err := hostileRun(t, d, s, "", nil)
	if rep.Online.Retries != 1 || !strings.Contains(err.Error(), "the connection broke 8 bytes into a packet") {
		t.Fatalf("%d retries: %v", rep.Online.Retries, err)
	}
}

// Garbage: short packets the driver indexes past the end of (a panic),
// a column count of 50 million (an allocation of 2.4 GB), random bytes,
// in reply to each kind of query reconcile sends.
func TestHostileMySQLGarbage(t *testing.T) {
	d := reconciletest.NewDataset(t, 2000)
	shortOK := func(c *fakeConn, q string) bool { c.Packet([]byte{0x00}); return true }
	shortRow := func(c *fakeConn, q string) bool { c.FPColumn(); c.Packet([]byte{0xfc}); return true }
	shortEOF := func(c *fakeConn, q string) bool { c.FPColumn(); c.Packet([]byte{0xfe}); return true }
	for _, c := range []struct {
		name, match string
		b           behaviour
		tune        func(*reconcile.Options)
		problem     reconcile.ServerProblem
	}{
		{"short OK", "START TRANSACTION", shortOK, nil, reconcile.MalformedReply},
		{"short row", " ORDER BY ", shortRow, nil, reconcile.MalformedReply},
		{"short EOF", " ORDER BY ", shortEOF, nil, reconcile.MalformedReply},
		{"short column count", " ORDER BY ", func(c *fakeConn, q string) bool { c.Packet([]byte{0xfd, 1}); return true }, nil, reconcile.MalformedReply},
		{"50M columns", " ORDER BY ", func(c *fakeConn, q string) bool {
			c.Packet(binary.LittleEndian.AppendUint64([]byte{0xfe}, 50_000_000))
			c.Flush()
			c.r.ReadByte()
			return false
		}, nil, reconcile.TooManyColumns},
		{"more results", " ORDER BY ", func(c *fakeConn, q string) bool {
			c.FPColumn()
			for _, r := range c.srv.Rows {
				c.Row(r)
			}
			c.Packet([]byte{0xfe, 0, 0, 0x0a, 0}) // SERVER_MORE_RESULTS_EXISTS
			return true
		}, nil, reconcile.ExtraResults},
		{"random reply", " ORDER BY ", randomBytes(1), nil, reconcile.PacketTooLarge},
		{"random reply 2", " ORDER BY ", randomBytes(2), nil, reconcile.PacketTooLarge},
		{"random count", "SELECT COUNT(*)", randomBytes(3), nil, reconcile.PacketTooLarge},
		{"random greeting", "greeting", randomBytes(4), nil, reconcile.PacketTooLarge},
		{"probe short row", " IN (", shortRow, func(o *reconcile.Options) { o.Probe = true }, reconcile.MalformedReply},
		{"probe short EOF", " IN (", shortEOF, func(o *reconcile.Options) { o.Probe = true }, reconcile.MalformedReply},
		{"apply short OK", "INSERT IGNORE", shortOK, func(o *reconcile.Options) { o.Apply = true }, reconcile.MalformedReply},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			s := newFakeMySQL(t, fakeRows(d))
			s.On(c.match, c.b)
			rep, err := hostileRun(t, d, s, "&count=1", c.tune)
			wantBad(t, rep, err, s, c.problem)
		})
	}
}

// randomBytes answers with 64 KiB of seeded random bytes, then waits for
// the client to go.
func randomBytes(seed uint64) behaviour {
	return func(c *fakeConn, q string) bool {
		r := rand.New(rand.NewPCG(seed, 27))
		b := make([]byte, 64<<10)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if c.Raw(b) != nil || c.Flush() != nil {
			return false
		}
		c.r.ReadByte()
		return false
	}
}

// endless answers with cols and then row over and over, until the client
// goes.
func endless(row [][]byte, cols ...column) behaviour {
	return func(c *fakeConn, q string) bool {
		c.Columns(cols...)
		for i := 0; ; i++ {
			c.Row(row...)
			if i%4096 == 0 && c.Flush() != nil {
				return false
			}
		}
	}
}

// Endless rows in reply to the queries of a few rows (the column's type,
// COUNT(*)) and to a probe's batch: the driver reads a result to its end
// (in rows.Close, past any context's cancel), so these end only with a
// deadline on the whole reply, Options.Timeout.
func TestHostileMySQLEndlessSmallReplies(t *testing.T) {
	reconciletest.PlainOnly(t, "bounds on replies; the guard runs under -race in the other hostile tests")
	d := reconciletest.NewDataset(t, 2000)
	for _, c := range []struct {
		name, match, extra string
		b                  behaviour
		probe              bool
		want               string
	}{
		{"column type", "SELECT DATA_TYPE", "", endless([][]byte{[]byte("binary"), []byte("16"), []byte("binary(16)")},
			col("DATA_TYPE", typeVarString, utf8Charset), col("CHARACTER_MAXIMUM_LENGTH", typeLongLong, binaryCharset), col("COLUMN_TYPE", typeVarString, utf8Charset)),
			false, "cannot read the column's type: "},
		{"count", "SELECT COUNT(*)", "&count=1", endless([][]byte{[]byte("1820")}, col("COUNT(*)", typeLongLong, binaryCharset)), false, "counting the rows: "},
		{"probe", " IN (", "", endless([][]byte{make([]byte, 16)}, col("fp", typeString, binaryCharset)), true, "probing "},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newFakeMySQL(t, fakeRows(d))
			s.On(c.match, c.b)
			_, err := hostileRun(t, d, s, c.extra, func(o *reconcile.Options) { o.Probe = c.probe })
			var se *reconcile.SlowServerError
			if !strings.HasPrefix(strings.TrimPrefix(err.Error(), "mysql://fp@"+s.Addr+"/fpdedup?table=t&column=fp"+c.extra+": "), c.want) ||
				!errors.As(err, &se) || !se.Reply || !strings.Contains(err.Error(), "did not end its reply in 2s") {
				t.Fatalf("error %v, want one starting %q, a SlowServerError of the whole reply", err, c.want)
			}
		})
	}
}
