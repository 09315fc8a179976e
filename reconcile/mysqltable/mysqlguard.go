package mysqltable

import (
	"bufio"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/go-sql-driver/mysql"
)

// What a MySQL server can make reconcile do is bounded here, below
// go-sql-driver/mysql, which trusts the server: it allocates a packet's
// announced length before reading it, concatenates a run of 16 MiB
// packets without limit, allocates a field per announced column, reads a
// row whose value is longer than its packet as the end of the rows, and
// indexes past the end of short packets (a panic). Every connection
// reconcile opens goes through a packetConn, which reads the packet
// headers (and the first bytes of each body) as they pass and fails the
// connection before the driver sees a packet it must not act on; the
// panics left (short OK and EOF packets) are recovered where reconcile
// calls the driver, as a *BadServerError. What the guard cannot see, the
// source bounds: the rows of the streamed read by COUNT(*) or the row
// estimate, the other queries by Config.Timeout (mysql.go).

const (
	// maxServerPacket bounds one logical packet from the server (a run of
	// 16 MiB packets and the shorter one ending it). The largest a server
	// that holds a fingerprint column sends reconcile is a column
	// definition (six names of at most 64 characters: under 2 KiB) or the
	// information_schema row of the column's type ("binary(16)"); a row
	// of the column itself is at most 64 hex digits (256 bytes in
	// utf8mb4). 1 MiB leaves a factor of 500 over that and bounds what one
	// connection buffers to its 256 KiB read buffer and one packet.
	maxServerPacket = 1 << 20
	// maxResultColumns bounds the column count a reply to a query
	// announces: reconcile's queries ask for 1 to 3 columns; 4096 is
	// MySQL's own limit of columns in a table.
	maxResultColumns = 4096
	// mysqlMaxPacket is the protocol's largest packet: a packet of this
	// length continues in the next one.
	mysqlMaxPacket = 1<<24 - 1
	// readBufferSize: the driver reads the socket 4 KiB at a time, which
	// for a streamed export of millions of 16-byte rows means a syscall
	// and a deadline reset per ~190 rows.
	readBufferSize = 256 << 10
)

// MySQL protocol bytes the guard reads.
const (
	comQuery       = 0x03 // a command packet's first byte: a query
	comStmtExecute = 0x17 // … a prepared statement's execution
	pktOK          = 0x00
	pktEOF         = 0xfe // the end of the rows (or an OK packet with this header)
	pktLocalInfile = 0xfb
	pktERR         = 0xff
)

// A BadServerError: the MySQL server sent what no MySQL server sends
// reconcile: a packet larger than any a fingerprint read needs, more
// columns or rows than asked for, a reply the driver cannot parse. A
// broken or hostile server, or something else at its address; a retry
// would get the same, so none is made, and the connection is dropped.
type BadServerError struct {
	Target  string        // the online side's redacted URL
	Addr    string        // the server's address
	Problem ServerProblem // what it sent
	Size    int64         // PacketTooLarge: the bytes announced so far; TooManyColumns: the columns; TooManyRows: the rows read
	Max     int64         // the limit Size passed
	Detail  string        // MalformedReply: what failed to parse; TooManyRows: where Max came from
}

// ServerProblem is what a BadServerError's server sent.
type ServerProblem int

// The problems a BadServerError names.
const (
	PacketTooLarge ServerProblem = iota + 1 // one logical packet over maxServerPacket
	TooManyColumns                          // a result of more than maxResultColumns columns
	MalformedReply                          // a packet the driver cannot parse (short, or a value longer than its packet)
	TooManyRows                             // more rows than COUNT(*) or the row estimate allow
	ExtraResults                            // more result sets after the rows of one SELECT
)

func (e *BadServerError) Error() string {
	at := "the MySQL server at " + e.Addr
	switch e.Problem {
	case PacketTooLarge:
		return fmt.Sprintf("%s sent a packet of %d bytes or more, over the %d bytes any reply to reconcile takes: a broken or hostile server (or no MySQL server); not retried", at, e.Size, e.Max)
	case TooManyColumns:
		return fmt.Sprintf("%s announced a result of %d columns, over the %d a reply to reconcile may have: a broken or hostile server; not retried", at, e.Size, e.Max)
	case MalformedReply:
		return fmt.Sprintf("%s sent a reply the MySQL driver cannot parse (%s): a broken or hostile server; not retried", at, e.Detail)
	case TooManyRows:
		return fmt.Sprintf("%s sent more than %d rows (the bound: %s): it does not send the table it describes; not retried", at, e.Max, e.Detail)
	case ExtraResults:
		return fmt.Sprintf("%s announced more result sets after the rows of one SELECT: a broken or hostile server; not retried", at)
	}
	return fmt.Sprintf("%s: ServerProblem(%d)", at, int(e.Problem))
}

// A SlowServerError: the MySQL server did not send a whole packet within
// the timeout (Config.Timeout) of the driver asking for it: silent, or
// sending a byte now and then (a drip the driver's per-read deadline
// alone never ends); or (Reply) it did not end its reply to a command but
// the streamed read within the timeout (rows or result sets without end:
// the driver reads a reply to its end). Retried, as after any timeout.
type SlowServerError struct {
	Addr      string        // the server's address
	Got, Want int           // the packet's bytes received and announced (Want 0: no header yet)
	Reply     bool          // the reply as a whole took longer
	Timeout   time.Duration // the bound
	Err       error         // the deadline's error (os.ErrDeadlineExceeded)
}

func (e *SlowServerError) Error() string {
	if e.Reply {
		return fmt.Sprintf("the MySQL server at %s did not end its reply in %s: more than a query of reconcile's gets, or too slow", e.Addr, e.Timeout)
	}
	if e.Want == 0 && e.Got == 0 {
		return fmt.Sprintf("the MySQL server at %s sent nothing in %s", e.Addr, e.Timeout)
	}
	if e.Want == 0 {
		return fmt.Sprintf("the MySQL server at %s sent %d bytes of a packet header in %s", e.Addr, e.Got, e.Timeout)
	}
	return fmt.Sprintf("the MySQL server at %s sent %d of a %d-byte packet in %s: too slow, or stalled", e.Addr, e.Got, e.Want, e.Timeout)
}

func (e *SlowServerError) Unwrap() error { return e.Err }

// Retryable tells a lost connection or a timeout, worth retrying,
// from an answer of a MySQL server (a syntax error, a missing table,
// wrong credentials) that a retry would only repeat; a BadServerError, a
// server that sent what none sends, is not retried either.
func Retryable(err error) bool {
	if online.IsPermanent(err) {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		// An answer of a live server: only these pass with time.
		switch me.Number {
		case 1040, // too many connections
			1053, // server shutdown in progress
			1205, // lock wait timeout
			1213, // deadlock
			1317, // query execution was interrupted
			1927: // connection was killed
			return true
		}
		return false
	}
	return true
}

// refusal marks a write the server refuses for good as online.Refused:
// the user lacks the INSERT privilege (1142), is denied the database or
// the server (1044, 1045), or the server is read-only (1290, 1836: a
// replica); the failed --apply then says so and advises no rerun.
func refusal(err error) error {
	var me *mysql.MySQLError
	if err != nil && !online.IsPermanent(err) && errors.As(err, &me) {
		switch me.Number {
		case 1142, 1044, 1045, 1290, 1836:
			return online.Refused{Err: err}
		}
	}
	return err
}

// badConn makes database/sql drop the connection an error came from
// (sql.Conn.Raw closes it on driver.ErrBadConn) and keeps the error.
type badConn struct{ error }

func (e badConn) Unwrap() error { return e.error }

func (e badConn) Is(target error) bool { return target == driver.ErrBadConn }

// dropBad makes a BadServerError drop its connection: what the driver
// holds of it is not to be read again (closing rows reads the rest).
func dropBad(err error) error {
	if online.IsPermanent(err) {
		return badConn{err}
	}
	return err
}

// mysqlGuard is what the connections to one server share: the limits,
// the names for messages, and the first BadServerError any of them met.
// Safe for concurrent use.
type mysqlGuard struct {
	target, addr string
	timeout      time.Duration
	maxPacket    int64
	bufSize      int
	bad          atomic.Pointer[BadServerError]
	conns        sync.Map // driver.Conn → *packetConn, for the source's life (a run opens a few)
	hang         *online.Hangup
}

func newMySQLGuard(target, addr string, timeout time.Duration, h *online.Hangup) *mysqlGuard {
	return &mysqlGuard{target: target, addr: addr, timeout: timeout, maxPacket: maxServerPacket, bufSize: readBufferSize, hang: h}
}

type guardSlotKey struct{}

// dial is the driver's DialFunc: a TCP connection read through a
// packetConn. The connector (below) passes a slot in ctx for it.
func (s *mysqlGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{KeepAlive: 30 * time.Second}
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	g := s.wrap(s.hang.Track(c))
	if slot, ok := ctx.Value(guardSlotKey{}).(**packetConn); ok {
		*slot = g
	}
	return g, nil
}

func (s *mysqlGuard) wrap(c net.Conn) *packetConn {
	return &packetConn{Conn: c, br: bufio.NewReaderSize(c, s.bufSize), srv: s}
}

// guardConnector opens the driver's connections, remembering each one's
// packetConn, and turns a panic of the driver in the handshake (which may
// run on database/sql's own goroutine) into an error.
type guardConnector struct {
	driver.Connector
	srv *mysqlGuard
}

func (c *guardConnector) Connect(ctx context.Context) (dc driver.Conn, err error) {
	var g *packetConn
	defer func() {
		if r := recover(); r != nil {
			if g != nil {
				g.Close()
			}
			dc, err = nil, c.srv.recovered(r)
		}
	}()
	dc, err = c.Connector.Connect(context.WithValue(ctx, guardSlotKey{}, &g))
	if err != nil {
		return nil, c.srv.explain(err, g)
	}
	if g != nil {
		c.srv.conns.Store(dc, g)
	}
	return dc, nil
}

// conn is the packetConn under a driver connection (from sql.Conn.Raw).
func (s *mysqlGuard) conn(dc any) *packetConn {
	if g, ok := s.conns.Load(dc); ok {
		return g.(*packetConn)
	}
	return nil
}

// fail records a BadServerError (the first one is kept for the errors of
// calls that cannot tell which connection failed) and returns it.
func (s *mysqlGuard) fail(e *BadServerError) error {
	e.Target, e.Addr = s.target, s.addr
	s.bad.CompareAndSwap(nil, e)
	return online.Permanent{Err: e}
}

// explain is err, from the driver, with what the guard saw: the driver
// says "invalid connection" whatever its read failed with. g is the
// connection's guard, nil when the caller cannot tell (database/sql
// picked the connection); then only a BadServerError, which ends the run
// whichever connection met it, is told.
func (s *mysqlGuard) explain(err error, g *packetConn) error {
	if err == nil {
		return nil
	}
	var cause error
	if g != nil {
		cause = g.err
	}
	if cause == nil {
		if b := s.bad.Load(); b != nil {
			cause = online.Permanent{Err: b}
		}
	}
	var perm online.Permanent
	switch {
	case cause == nil || errors.Is(err, cause):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err // the driver closed the connection on purpose
	case errors.As(cause, &perm):
		return cause
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// recovered is the error for a panic of the driver: its parsing indexes
// past the end of short packets and allocates what a count claims. A
// panic that is no runtime error is not the driver's parsing: it goes on.
func (s *mysqlGuard) recovered(r any) error {
	re, ok := r.(runtime.Error)
	if !ok {
		panic(r)
	}
	return s.fail(&BadServerError{Problem: MalformedReply, Detail: "the driver failed: " + re.Error()})
}

// call runs fn, which calls the driver (through database/sql, or on g's
// connection), with its panics and errors explained.
func (s *mysqlGuard) call(g *packetConn, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.recovered(r)
		}
	}()
	return s.explain(fn(), g)
}

// next is rows.Next with a panic of the driver recovered.
func (s *mysqlGuard) next(rows driver.Rows, dest []driver.Value) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = s.recovered(r)
		}
	}()
	return rows.Next(dest)
}

// A packetConn is a connection to a MySQL server as the driver sees it.
// Reads go through a 256 KiB buffer and are parsed as packets as they
// pass; the driver never gets the header of a packet that is refused:
//   - one logical packet (a run of 16 MiB packets) over maxPacket;
//   - in the first packet of a reply to a query, a column count over
//     maxResultColumns;
//   - in any other packet but the server's greeting, a first
//     length-encoded value longer than the packet (what the driver reads
//     as the end of the rows). Every packet a server sends reconcile
//     passes: rows, column definitions ("def" first), auth data; OK, EOF,
//     ERR and LOCAL INFILE packets (0x00, 0xfe, 0xff, 0xfb) are not
//     checked, nor the first packet of a run, whose value may go on.
//
// Each packet must arrive whole within the read deadline the driver had
// set when it was begun (the driver resets its deadline at every read,
// so a byte now and then would hold it for ever). A Read waits for one
// packet's bytes at most and then gives what is buffered, many packets
// at a time. Writes pass through, noting which command was sent. Errors
// are sticky. Used by one goroutine at a time, as the driver uses a
// connection (Close excepted).
type packetConn struct {
	net.Conn
	br  *bufio.Reader
	srv *mysqlGuard

	rdl     time.Time // the read deadline the driver set last
	pktDL   time.Time // the current packet's: rdl when it was begun
	replyDL time.Time // the reply's to the last command (zero: none)
	sockDL  time.Time // the deadline set on the socket
	stream  bool      // the next query is the streamed read: no replyDL

	left    int   // bytes of the current packet, header included, not yet read; 0 between packets
	got     int   // bytes of the current packet read
	want    int   // the current packet's bytes, header included; 0 before its header is read
	run     int64 // bytes of the current logical packet (a run of 16 MiB packets) so far
	packets int64 // packets begun
	head    bool  // the next packet is the first of a reply to a query
	err     error // why the connection failed
}

// Write notes a command sent (the driver writes one packet per call, a
// command with sequence number 0): its reply must end within the timeout,
// unless it is the streamed read (expectStream), and the first packet of
// a query's reply is a column count.
func (g *packetConn) Write(p []byte) (int, error) {
	if len(p) > 4 && p[3] == 0 {
		g.head = p[4] == comQuery || p[4] == comStmtExecute
		g.replyDL = time.Time{}
		switch {
		case g.stream && p[4] == comQuery:
			g.stream = false
		case g.srv.timeout > 0:
			g.replyDL = time.Now().Add(g.srv.timeout)
		}
	}
	return g.Conn.Write(p)
}

// expectStream says the next query is the streamed read, whose reply has
// no deadline as a whole: each packet has its own, and the rows are
// bounded by what the server said it holds.
func (g *packetConn) expectStream() { g.stream = true }

// SetReadDeadline is applied when the socket is next read, as the
// current packet's deadline allows.
func (g *packetConn) SetReadDeadline(t time.Time) error {
	g.rdl = t
	return nil
}

func (g *packetConn) SetDeadline(t time.Time) error {
	g.rdl = t
	return g.Conn.SetWriteDeadline(t)
}

func (g *packetConn) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n := 0
	for n < len(p) {
		if g.left == 0 {
			// Wait for the next packet only when nothing is read yet.
			ok, err := g.begin(n == 0)
			if err != nil {
				g.err = err
				break
			}
			if !ok {
				break
			}
		}
		k := min(len(p)-n, g.left)
		if n > 0 {
			if k = min(k, g.br.Buffered()); k == 0 {
				break
			}
		} else if g.br.Buffered() == 0 {
			g.arm()
		}
		m, err := g.br.Read(p[n : n+k])
		n, g.left, g.got = n+m, g.left-m, g.got+m
		if err != nil {
			g.err = g.failed(err, g.got)
			break
		}
	}
	if n > 0 {
		return n, nil // (an error comes with the next read)
	}
	return 0, g.err
}

// begin checks the next packet's header and up to 9 bytes of its body
// (without consuming them) and makes it the current packet. Unless block,
// it waits for nothing: false when they are not buffered yet.
func (g *packetConn) begin(block bool) (bool, error) {
	if !block && g.br.Buffered() < 4 {
		return false, nil
	}
	g.pktDL, g.got, g.want = g.rdl, 0, 0
	hdr, err := g.peek(4)
	if err != nil {
		return false, g.failed(err, len(hdr))
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	run := g.run + int64(n)
	if run > g.srv.maxPacket {
		return false, g.srv.fail(&BadServerError{Problem: PacketTooLarge, Size: run, Max: g.srv.maxPacket})
	}
	start := g.run == 0
	if start {
		k := 4 + min(n, 9)
		if !block && g.br.Buffered() < k {
			return false, nil
		}
		g.want = 4 + n
		b, err := g.peek(k)
		if err != nil {
			return false, g.failed(err, len(b))
		}
		if err := g.check(b[4:], n); err != nil {
			return false, err
		}
	}
	if g.run = run; n < mysqlMaxPacket {
		g.run = 0
	}
	g.left, g.want = 4+n, 4+n
	g.packets++
	return true, nil
}

// check checks the start of a logical packet of n bytes (or more, for
// the first of a run): b is up to 9 bytes of its body.
func (g *packetConn) check(b []byte, n int) error {
	switch {
	case g.head:
		g.head = false
		return g.checkHead(b)
	case n == 0, g.packets == 0, n == mysqlMaxPacket:
		// The driver refuses an empty packet; the greeting starts with
		// the protocol version; a run's value may go on.
		return nil
	}
	var k, l int
	switch b[0] {
	case pktOK, pktLocalInfile, pktEOF, pktERR:
		return nil
	case 0xfc:
		k = 3
	case 0xfd:
		k = 4
	default:
		k, l = 1, int(b[0])
	}
	if len(b) < k {
		return g.srv.fail(&BadServerError{Problem: MalformedReply, Detail: fmt.Sprintf("a value's length cut short, in a packet of %d bytes", n)})
	}
	for i := k - 1; i >= 1; i-- {
		l = l<<8 | int(b[i])
	}
	if k+l > n {
		return g.srv.fail(&BadServerError{Problem: MalformedReply, Detail: fmt.Sprintf("a value of %d bytes in a packet of %d", l, n)})
	}
	return nil
}

// checkHead checks the first packet of a reply to a query: OK, ERR, a
// LOCAL INFILE request or a column count (length-encoded), which must be
// small. b is up to 9 bytes of its body.
func (g *packetConn) checkHead(b []byte) error {
	if len(b) == 0 {
		return nil // an empty packet: the driver refuses it
	}
	var need int
	switch b[0] {
	case pktOK, pktERR, pktLocalInfile:
		return nil
	case 0xfc:
		need = 3
	case 0xfd:
		need = 4
	case 0xfe:
		need = 9
	default:
		need = 1
	}
	if len(b) < need {
		return g.srv.fail(&BadServerError{Problem: MalformedReply, Detail: "a column count cut short"})
	}
	var count uint64
	if need == 1 {
		count = uint64(b[0])
	} else {
		for i := need - 1; i >= 1; i-- {
			count = count<<8 | uint64(b[i])
		}
	}
	if count > maxResultColumns {
		return g.srv.fail(&BadServerError{Problem: TooManyColumns, Size: int64(min(count, 1<<62)), Max: maxResultColumns})
	}
	return nil
}

func (g *packetConn) peek(n int) ([]byte, error) {
	if g.br.Buffered() < n {
		g.arm()
	}
	return g.br.Peek(n)
}

// arm sets the deadline on the socket before it is read: the current
// packet's, or the reply's if that is earlier.
func (g *packetConn) arm() {
	dl := g.pktDL
	if !g.replyDL.IsZero() && (dl.IsZero() || g.replyDL.Before(dl)) {
		dl = g.replyDL
	}
	if !dl.Equal(g.sockDL) {
		g.sockDL = dl
		_ = g.Conn.SetReadDeadline(dl) // a failure shows in the read
	}
}

// failed is the error of a read of the socket that failed with got bytes
// of the current packet read: a timeout says how much came in time.
func (g *packetConn) failed(err error, got int) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		whole := !g.replyDL.IsZero() && !time.Now().Before(g.replyDL)
		return &SlowServerError{Addr: g.srv.addr, Got: got, Want: g.want, Reply: whole, Timeout: g.srv.timeout, Err: err}
	}
	if got > 0 {
		return fmt.Errorf("the connection broke %d bytes into a packet: %w", got, err)
	}
	return err
}
