package mysqltable_test

// fakeMySQL is a MySQL server in a few hundred lines: the protocol v10
// handshake (mysql_native_password, or caching_sha2_password's fast
// path), COM_QUERY, COM_PING, COM_QUIT and text result sets, enough for
// go-sql-driver/mysql and the queries reconcile sends. It serves one
// table of fingerprints and misbehaves on command: a test replaces its
// answer to the queries it names (the streamed SELECT … ORDER BY, the
// COUNT(*), the handshake) with its own bytes. The tests that drive
// reconcile.Run against it need no real server.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// Capability flags (https://dev.mysql.com/doc/dev/mysql-server/latest/group__group__cs__capabilities__flags.html).
const (
	capLongPassword  = 1 << 0 // also: a MySQL, not a MariaDB, server
	capLongFlag      = 1 << 2
	capConnectWithDB = 1 << 3
	capProtocol41    = 1 << 9
	capTransactions  = 1 << 13
	capSecureConn    = 1 << 15
	capMultiResults  = 1 << 17
	capPluginAuth    = 1 << 19
	capConnectAttrs  = 1 << 20
	capAuthLenenc    = 1 << 21
	capDeprecateEOF  = 1 << 24
)

// Column types and the binary collation.
const (
	typeLongLong  = 0x08
	typeVarString = 0xfd
	typeString    = 0xfe
	binaryCharset = 63
	utf8Charset   = 33
)

// fakeConn is one client connection, as a behaviour sees it: packets out
// with the next sequence number, raw bytes out, the socket.
type fakeConn struct {
	srv *fakeMySQL
	c   net.Conn
	w   *bufio.Writer
	r   *bufio.Reader
	seq byte
}

// A behaviour answers a query (or the handshake) on c: it writes what it
// likes and returns whether the connection goes on (false: it is closed).
type behaviour func(c *fakeConn, query string) bool

type fakeMySQL struct {
	t            *testing.T
	ln           net.Listener
	Addr         string
	Rows         [][]byte // the table's fp column, sorted
	Count        int64    // COUNT(*)'s answer (-1: len(Rows))
	Estimate     int64    // TABLE_ROWS's answer (-1: NULL)
	DataType     string   // information_schema's DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, COLUMN_TYPE
	MaxLength    int64
	ColumnType   string
	CachingSHA2  bool // authenticate with caching_sha2_password's fast path
	DeprecateEOF bool // offer CLIENT_DEPRECATE_EOF: rows end with an OK packet

	once     sync.Once
	mu       sync.Mutex
	on       map[string]behaviour // by a substring of the query; "greeting": before the handshake
	queries  []string
	conns    map[net.Conn]bool
	closed   bool
	wg       sync.WaitGroup
	Streams  atomic.Int64 // streamed SELECTs answered
	Sent     atomic.Int64 // bytes written to clients
	Accepted atomic.Int64
}

// newFakeMySQL makes a server on 127.0.0.1:0 holding rows (sorted here)
// in a BINARY(16) column; fakeRun starts it; it stops at the end of the
// test.
func newFakeMySQL(t *testing.T, rows [][]byte) *fakeMySQL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, bytes.Compare)
	s := &fakeMySQL{t: t, ln: ln, Addr: ln.Addr().String(), Rows: rows, Count: -1, Estimate: int64(len(rows)),
		DataType: "binary", MaxLength: 16, ColumnType: "binary(16)",
		on: map[string]behaviour{}, conns: map[net.Conn]bool{}}
	t.Cleanup(s.Close)
	return s
}

// start starts serving, once: after the test has set the fields, which
// the connections read.
func (s *fakeMySQL) start() {
	s.once.Do(func() {
		s.wg.Add(1)
		go s.accept()
	})
}

// On makes b answer the queries holding match ("greeting": the handshake).
func (s *fakeMySQL) On(match string, b behaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on[match] = b
}

// Queries are the queries received so far.
func (s *fakeMySQL) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// Close stops listening, closes every connection and waits for them.
func (s *fakeMySQL) Close() {
	s.mu.Lock()
	s.closed = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// CloseConns closes the connections open now (the server listens on).
func (s *fakeMySQL) CloseConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

func (s *fakeMySQL) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		s.Accepted.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
			fc := &fakeConn{srv: s, c: c, w: bufio.NewWriterSize(countWriter{c, &s.Sent}, 64<<10), r: bufio.NewReader(c)}
			fc.serve()
		}()
	}
}

type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (s *fakeMySQL) behaviour(query string) behaviour {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m, b := range s.on {
		if m != "greeting" && strings.Contains(query, m) {
			return b
		}
	}
	if query == "greeting" {
		return s.on["greeting"]
	}
	return nil
}

func (c *fakeConn) serve() {
	c.seq = 0
	if b := c.srv.behaviour("greeting"); b != nil {
		if !b(c, "greeting") || c.Flush() != nil {
			return
		}
	} else {
		c.greet()
		if c.Flush() != nil {
			return
		}
	}
	if _, err := c.readPacket(); err != nil { // the handshake response: any user, any password
		return
	}
	if c.srv.CachingSHA2 {
		c.Packet([]byte{0x01, 0x03}) // AuthMoreData: fast authentication succeeded
	}
	c.OK()
	if c.Flush() != nil {
		return
	}
	for {
		p, err := c.readPacket()
		if err != nil || len(p) == 0 {
			return
		}
		switch p[0] {
		case 0x01: // COM_QUIT
			return
		case 0x02, 0x0e: // COM_INIT_DB, COM_PING
			c.OK()
		case 0x03: // COM_QUERY
			q := string(p[1:])
			c.srv.mu.Lock()
			c.srv.queries = append(c.srv.queries, q)
			c.srv.mu.Unlock()
			if strings.Contains(q, " ORDER BY ") {
				c.srv.Streams.Add(1)
			}
			if b := c.srv.behaviour(q); b != nil {
				if !b(c, q) {
					c.Flush()
					return
				}
			} else {
				c.answer(q)
			}
		default:
			c.Err(1047, "unknown command")
		}
		if c.Flush() != nil {
			return
		}
	}
}

func (c *fakeConn) greet() {
	caps := uint32(capLongPassword | capLongFlag | capConnectWithDB | capProtocol41 | capTransactions |
		capSecureConn | capMultiResults | capPluginAuth | capConnectAttrs | capAuthLenenc)
	if c.srv.DeprecateEOF {
		caps |= capDeprecateEOF
	}
	plugin := "mysql_native_password"
	if c.srv.CachingSHA2 {
		plugin = "caching_sha2_password"
	}
	p := []byte{10}
	p = append(p, "8.0.99-fake\x00"...)
	p = binary.LittleEndian.AppendUint32(p, 7) // connection id
	p = append(p, "abcdefgh"...)               // auth-plugin-data, part 1
	p = append(p, 0)                           // filler
	p = binary.LittleEndian.AppendUint16(p, uint16(caps))
	p = append(p, utf8Charset)
	p = binary.LittleEndian.AppendUint16(p, 2) // status: autocommit
	p = binary.LittleEndian.AppendUint16(p, uint16(caps>>16))
	p = append(p, 21)                    // auth-plugin-data length
	p = append(p, make([]byte, 10)...)   // reserved
	p = append(p, "ijklmnopqrst\x00"...) // auth-plugin-data, part 2
	p = append(p, plugin+"\x00"...)
	c.Packet(p)
}

// answer is the server's answer to q, as a well-behaved server gives it.
func (c *fakeConn) answer(q string) {
	s := c.srv
	switch {
	case strings.HasPrefix(q, "SELECT DATA_TYPE"):
		c.Columns(col("DATA_TYPE", typeVarString, utf8Charset), col("CHARACTER_MAXIMUM_LENGTH", typeLongLong, binaryCharset), col("COLUMN_TYPE", typeVarString, utf8Charset))
		c.Row([]byte(s.DataType), fmt.Append(nil, s.MaxLength), []byte(s.ColumnType))
		c.End()
	case strings.HasPrefix(q, "SELECT TABLE_ROWS"):
		c.Columns(col("TABLE_ROWS", typeLongLong, binaryCharset))
		if s.Estimate < 0 {
			c.Row(nil)
		} else {
			c.Row(fmt.Append(nil, s.Estimate))
		}
		c.End()
	case strings.HasPrefix(q, "SELECT COUNT(*)"):
		n := s.Count
		if n < 0 {
			n = int64(len(s.Rows))
		}
		c.Columns(col("COUNT(*)", typeLongLong, binaryCharset))
		c.Row(fmt.Append(nil, n))
		c.End()
	case strings.Contains(q, " ORDER BY "):
		c.FPColumn()
		for _, r := range c.srv.rowsAfter(q) {
			c.Row(r)
		}
		c.End()
	case strings.HasPrefix(q, "START TRANSACTION"), strings.HasPrefix(q, "COMMIT"),
		strings.HasPrefix(q, "SET "), strings.HasPrefix(q, "ROLLBACK"):
		c.OK()
	default:
		c.Err(1064, "the fake server does not know this query: "+q)
	}
}

// rowsAfter are the rows a streamed SELECT gives: all, or those after the
// x'…' value of a resumed read's WHERE fp > x'…'.
func (s *fakeMySQL) rowsAfter(q string) [][]byte {
	_, rest, ok := strings.Cut(q, " > x'")
	if !ok {
		return s.Rows
	}
	var last []byte
	if _, err := fmt.Sscanf(rest[:strings.IndexByte(rest, '\'')], "%x", &last); err != nil {
		return nil
	}
	i, _ := slices.BinarySearchFunc(s.Rows, last, bytes.Compare)
	for i < len(s.Rows) && bytes.Equal(s.Rows[i], last) {
		i++
	}
	return s.Rows[i:]
}

// Packet writes one packet (under 16 MiB) with the next sequence number.
func (c *fakeConn) Packet(p []byte) {
	var h [4]byte
	h[0], h[1], h[2], h[3] = byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), c.seq
	c.seq++
	c.w.Write(h[:])
	c.w.Write(p)
}

// Header writes a packet header announcing n bytes (the body is the
// caller's), with the next sequence number.
func (c *fakeConn) Header(n int) {
	c.w.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), c.seq})
	c.seq++
}

// Raw writes bytes as they are.
func (c *fakeConn) Raw(b []byte) error {
	_, err := c.w.Write(b)
	return err
}

func (c *fakeConn) Flush() error { return c.w.Flush() }

func (c *fakeConn) OK() { c.Packet([]byte{0x00, 0, 0, 2, 0, 0, 0}) }

func (c *fakeConn) Err(code uint16, msg string) {
	p := []byte{0xff}
	p = binary.LittleEndian.AppendUint16(p, code)
	p = append(p, "#HY000"...)
	c.Packet(append(p, msg...))
}

type column struct {
	name    string
	typ     byte
	charset uint16
}

func col(name string, typ byte, charset uint16) column { return column{name, typ, charset} }

// Columns writes a result set's column count and definitions (and the
// EOF after them, without CLIENT_DEPRECATE_EOF).
func (c *fakeConn) Columns(cols ...column) {
	c.Packet(appendLenenc(nil, uint64(len(cols))))
	for _, k := range cols {
		var p []byte
		for _, s := range []string{"def", "fpdedup", "t", "t", k.name, k.name} {
			p = appendLenencString(p, []byte(s))
		}
		p = append(p, 0x0c)
		p = binary.LittleEndian.AppendUint16(p, k.charset)
		p = binary.LittleEndian.AppendUint32(p, 64)
		p = append(p, k.typ)
		p = binary.LittleEndian.AppendUint16(p, 0x80) // BINARY_FLAG
		p = append(p, 0, 0, 0)                        // decimals, filler
		c.Packet(p)
	}
	if !c.srv.DeprecateEOF {
		c.Packet([]byte{0xfe, 0, 0, 2, 0})
	}
}

// FPColumn starts the result of the streamed SELECT: one BINARY column.
func (c *fakeConn) FPColumn() { c.Columns(col("fp", typeString, binaryCharset)) }

// Row writes a text row; a nil value is NULL.
func (c *fakeConn) Row(vals ...[]byte) {
	var p []byte
	for _, v := range vals {
		if v == nil {
			p = append(p, 0xfb)
			continue
		}
		p = appendLenencString(p, v)
	}
	c.Packet(p)
}

// End ends the rows: an EOF packet, or with CLIENT_DEPRECATE_EOF an OK
// packet with the 0xfe header.
func (c *fakeConn) End() {
	if c.srv.DeprecateEOF {
		c.Packet([]byte{0xfe, 0, 0, 2, 0, 0, 0})
		return
	}
	c.Packet([]byte{0xfe, 0, 0, 2, 0})
}

// Reset closes the connection with a TCP reset (what the client has not
// read is lost).
func (c *fakeConn) Reset() {
	c.Flush()
	if tc, ok := c.c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.c.Close()
}

func (c *fakeConn) readPacket() ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return nil, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	c.seq = h[3] + 1
	p := make([]byte, n)
	_, err := io.ReadFull(c.r, p)
	return p, err
}

func appendLenenc(b []byte, n uint64) []byte {
	switch {
	case n < 251:
		return append(b, byte(n))
	case n < 1<<16:
		return append(b, 0xfc, byte(n), byte(n>>8))
	case n < 1<<24:
		return append(b, 0xfd, byte(n), byte(n>>8), byte(n>>16))
	}
	return binary.LittleEndian.AppendUint64(append(b, 0xfe), n)
}

func appendLenencString(b, s []byte) []byte { return append(appendLenenc(b, uint64(len(s))), s...) }

// fakeRun runs reconcile against s (URL parameters extra) with short
// timeouts and one retry; a run that has not ended after two minutes is
// cancelled and fails the test.
func fakeRun(t *testing.T, d *reconciletest.Dataset, s *fakeMySQL, extra string, tune func(*reconcile.Options)) (*reconcile.Report, error) {
	t.Helper()
	s.start()
	tg, err := reconcile.ParseURL("mysql://fp@" + s.Addr + "/fpdedup?table=t&column=fp" + extra)
	if err != nil {
		t.Fatal(err)
	}
	o := reconcile.Options{Index: d.Index, Target: tg, Retries: 1, Backoff: 10 * time.Millisecond, Timeout: 2 * time.Second, TmpDir: d.Dir}
	if tune != nil {
		tune(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := reconcile.Run(ctx, o)
	if ctx.Err() != nil {
		t.Fatalf("the run did not end by itself in 2 minutes (%d bytes sent, %d connections): %v", s.Sent.Load(), s.Accepted.Load(), err)
	}
	return rep, err
}

// The fake server is a faithful enough MySQL: a BINARY(16) table read
// through it gives the counts the real one gives, checked against
// COUNT(*), with either authentication, with or without
// CLIENT_DEPRECATE_EOF, and after a connection reset in the middle of the
// stream (the read resumes after the last value).
func TestFakeMySQLServes(t *testing.T) {
	d := reconciletest.NewDataset(t, 20_000)
	var rows [][]byte
	for _, k := range d.OnlineKeys() {
		rows = append(rows, reconciletest.Bin16(k).([]byte))
	}
	for _, c := range []struct {
		name             string
		sha2, noEOF, cut bool
	}{{"native", false, false, false}, {"caching_sha2", true, false, false}, {"deprecate_eof", false, true, false}, {"resumed", true, true, true}} {
		t.Run(c.name, func(t *testing.T) {
			s := newFakeMySQL(t, rows)
			s.CachingSHA2, s.DeprecateEOF = c.sha2, c.noEOF
			if c.cut {
				s.On(" ORDER BY ", func(fc *fakeConn, q string) bool {
					if s.Streams.Load() > 1 {
						fc.answer(q)
						return true
					}
					fc.FPColumn()
					for _, r := range s.Rows[:5000] {
						fc.Row(r)
					}
					fc.Reset()
					return false
				})
			}
			rep, err := fakeRun(t, d, s, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
			if c.cut {
				if rep.Online.Retries != 1 || rep.Online.CountChecked {
					t.Fatalf("after a reset: %+v", rep.Online)
				}
				return
			}
			if !rep.Online.CountChecked || rep.Online.Expected != 18_200 {
				t.Fatalf("online: %+v", rep.Online)
			}
		})
	}
}
