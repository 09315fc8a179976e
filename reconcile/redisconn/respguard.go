package redisconn

import (
	"context"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Every byte a Redis server sends this package passes through a guardConn
// before a client reads it: go-redis's connections (its Dialer) and the
// apply pipelines' (Pool). The guard follows the RESP2 grammar as the
// bytes arrive and refuses a reply that declares more than the bounds
// below, before the bytes that complete the declaration reach the reader:
// go-redis allocates what a header declares at once (a []string of n for
// "*n", a []byte of n for "$n"), so "*2000000000" was a fatal 32 GB
// allocation and "$4000000000" 4 GB filled at the server's pace. What the
// guard refuses is a *ReplyError naming the server and the command.

const (
	// MaxBulk bounds a bulk string. The names Run accepts are a prefix and
	// 32 or 64 hex digits; a longer key is a bad value, counted and
	// sampled. Redis allows keys of 512 MB: above 1 MiB (no key name we
	// could read, no INFO section, CLUSTER INFO or node field is near it)
	// a string is refused rather than allocated.
	MaxBulk = 1 << 20
	// MaxLine bounds a status, error or integer line. go-redis reads one
	// into a buffer that grows until the line's \n: unbounded, a server
	// that never sends one fills memory.
	MaxLine = 64 << 10
	// MaxDepth bounds the nesting of arrays. COMMAND, the deepest reply a
	// client here reads (go-redis's cluster client asks it for its routing
	// table), nests 9 deep on Redis 7.0; readers recurse once a level.
	MaxDepth = 32
	// slotBytes is what an array element costs a reader before it is
	// read: go-redis makes a []interface{} or a []string of the declared
	// count.
	slotBytes = 16
	// respHeaderDigits bounds the digits of a length: 18 cannot overflow
	// an int64, and a length Redis sends has at most 10.
	respHeaderDigits = 18
)

// dialGuarded is a go-redis Dialer: TCP, with go-redis's own keep-alive
// policy, every connection guarded with chk's bounds, and closed by h when
// the run is interrupted.
func dialGuarded(timeout time.Duration, chk respChecker, h *online.Hangup) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: timeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newGuardConn(h.Track(c), addr, chk), nil
	}
}

// guardConn checks what a server sends (respChecker) and names the
// commands it answers (from what is written, cmdNames). One goroutine
// reads; another may write meanwhile (respConn.do writes large pipelines
// from a second goroutine).
type guardConn struct {
	net.Conn
	server string
	chk    respChecker // the read side's
	err    error       // the read side's: once refused, every read fails

	mu    sync.Mutex
	names cmdNames // the commands written and not yet answered
	w     cmdParser
}

// newGuardConn guards c with chk's bounds (a checker not yet fed: each
// connection has its own copy).
func newGuardConn(c net.Conn, server string, chk respChecker) *guardConn {
	return &guardConn{Conn: c, server: server, chk: chk}
}

// Read reads from the connection and passes on what the checker accepts.
// A chunk with a refused byte is withheld whole: the reader never sees the
// end of the header that declared too much.
func (g *guardConn) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		done := g.chk.replies
		if e := g.chk.feed(p[:n]); e != nil {
			g.mu.Lock()
			e.Server, e.Command = g.server, g.names.at(g.chk.replies-done)
			g.mu.Unlock()
			g.err = e
			g.Conn.Close()
			return 0, e
		}
		if answered := g.chk.replies - done; answered > 0 {
			g.mu.Lock()
			g.names.drop(answered)
			g.mu.Unlock()
		}
	}
	return n, err
}

// Write notes the names of the commands in p, then writes it: a reply
// cannot come before its command is noted.
func (g *guardConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.w.feed(p, &g.names)
	g.mu.Unlock()
	return g.Conn.Write(p)
}

// SyscallConn lets go-redis's pool look at the socket of an idle
// connection (a peer that closed it) as it does without a Dialer.
func (g *guardConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := g.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, syscall.EINVAL
}

// respChecker follows RESP2 replies byte by byte (the types + - : $ *) and
// refuses one that breaks a bound: a bulk string over MaxBulk, a line over
// MaxLine, arrays deeper than MaxDepth, or one top-level reply declaring
// more than maxReply in all (16 bytes an array element, strings and lines
// at their length), each checked when its header ends, before the header's
// \n is passed on. A null ($-1, *-1) is an element. Stricter than the
// readers behind it (no + sign, no "-0", the \r\n after a string checked),
// never looser: a reply it accepts whole is one reply for go-redis and for
// respConn.reply.
type respChecker struct {
	maxReply, maxBulk int64 // the bounds (tests and fuzzing use small ones)
	maxLine, maxDepth int
	replies           int64 // top-level replies complete

	state   uint8
	typ     byte    // of the header or line being read
	neg     bool    // the header's number began with '-'
	num     int64   // the header's number, as far as read
	digits  int     // its digits
	lineLen int     // bytes of the line being read
	payload int64   // bytes of the bulk string still to come
	stack   []int64 // elements still to come in each open array, innermost last
	charged int64   // what the reply in progress has declared
}

func newRespChecker(maxReply int64) respChecker {
	return respChecker{maxReply: maxReply, maxBulk: MaxBulk, maxLine: MaxLine, maxDepth: MaxDepth}
}

// bulkFraming is what a reply carrying one string of Bounds.Bulk bytes
// declares besides it: BF.SCANDUMP's array of its iterator and its chunk.
const bulkFraming = 64

// Bounds widen the guard of a client whose replies carry strings larger
// than MaxBulk: BF.SCANDUMP answers chunks of up to 16 MiB, whatever the
// caller asks. Bulk bounds one string (0: MaxBulk), and a reply may then
// declare Bulk and its framing even where the memory budget's share is
// less: the caller counts Bulk in its budget for each reply it reads at
// once.
type Bounds struct{ Bulk int64 }

// checker is the guard of a client opened within mem with these bounds.
func (b Bounds) checker(maxReply int64) respChecker {
	chk := newRespChecker(maxReply)
	if b.Bulk > chk.maxBulk {
		chk.maxBulk = b.Bulk
		chk.maxReply = max(chk.maxReply, b.Bulk+bulkFraming)
	}
	return chk
}

const (
	rsType      uint8 = iota // a type byte is next
	rsHeader                 // the digits of a $ or * header
	rsLine                   // the text of a + - : line
	rsLF                     // the \n after a header's or line's \r
	rsPayload                // a bulk string's bytes
	rsPayloadCR              // the \r after them
	rsPayloadLF              // the \n after them
)

// feed checks b, the next bytes from the server.
func (c *respChecker) feed(b []byte) *ReplyError {
	for i := 0; i < len(b); i++ {
		x := b[i]
		switch c.state {
		case rsType:
			if len(c.stack) == 0 {
				c.charged = 0
			}
			switch x {
			case '$', '*':
				c.state, c.typ, c.neg, c.num, c.digits = rsHeader, x, false, 0, 0
			case '+', '-', ':':
				c.state, c.typ, c.lineLen = rsLine, x, 0
			default:
				return notRESP(b, i)
			}
		case rsHeader:
			switch {
			case x >= '0' && x <= '9':
				if c.digits == respHeaderDigits || c.neg && (x != '1' || c.digits > 0) {
					return notRESP(b, i)
				}
				c.num = c.num*10 + int64(x-'0')
				c.digits++
			case x == '-' && c.digits == 0 && !c.neg:
				c.neg = true
			case x == '\r' && c.digits > 0:
				if e := c.header(); e != nil {
					return e
				}
				c.state = rsLF
			default:
				return notRESP(b, i)
			}
		case rsLine:
			switch x {
			case '\r':
				c.state = rsLF
			case '\n':
				return notRESP(b, i)
			default:
				if c.lineLen++; c.lineLen > c.maxLine {
					return &ReplyError{Problem: LineTooLong, Declared: int64(c.lineLen), Limit: int64(c.maxLine)}
				}
			}
		case rsLF:
			if x != '\n' {
				return notRESP(b, i)
			}
			if e := c.endLine(); e != nil {
				return e
			}
		case rsPayload:
			n := min(int64(len(b)-i), c.payload)
			c.payload -= n
			i += int(n) - 1
			if c.payload == 0 {
				c.state = rsPayloadCR
			}
		case rsPayloadCR:
			if x != '\r' {
				return notRESP(b, i)
			}
			c.state = rsPayloadLF
		case rsPayloadLF:
			if x != '\n' {
				return notRESP(b, i)
			}
			c.state = rsType
			c.element()
		}
	}
	return nil
}

// header checks a $ or * header whose digits are read (at its \r).
func (c *respChecker) header() *ReplyError {
	if c.neg {
		return nil // -1: a null, nothing declared
	}
	n := c.num
	if c.typ == '$' {
		if n > c.maxBulk {
			return &ReplyError{Problem: BulkTooLong, Declared: n, Limit: c.maxBulk}
		}
		return c.charge(n)
	}
	if len(c.stack) == c.maxDepth {
		return &ReplyError{Problem: ReplyTooDeep, Declared: int64(c.maxDepth) + 1, Limit: int64(c.maxDepth)}
	}
	if n > c.maxReply/slotBytes {
		return &ReplyError{Problem: ReplyTooLarge, Declared: c.charged + min(n, 1<<40)*slotBytes, Limit: c.maxReply}
	}
	return c.charge(n * slotBytes)
}

func (c *respChecker) charge(n int64) *ReplyError {
	if c.charged += n; c.charged > c.maxReply {
		return &ReplyError{Problem: ReplyTooLarge, Declared: c.charged, Limit: c.maxReply}
	}
	return nil
}

// endLine acts on a header or line whose \r\n is read.
func (c *respChecker) endLine() *ReplyError {
	c.state = rsType
	switch {
	case c.typ != '$' && c.typ != '*':
		if e := c.charge(int64(c.lineLen)); e != nil {
			return e
		}
		c.element()
	case c.neg || c.num == 0 && c.typ == '*':
		c.element()
	case c.typ == '$':
		c.payload = c.num
		c.state = rsPayload
		if c.payload == 0 {
			c.state = rsPayloadCR
		}
	default:
		c.stack = append(c.stack, c.num)
	}
	return nil
}

// element ends an element: it may end the arrays it closes, and the reply.
func (c *respChecker) element() {
	for {
		top := len(c.stack) - 1
		if top < 0 {
			c.replies++
			return
		}
		if c.stack[top]--; c.stack[top] > 0 {
			return
		}
		c.stack = c.stack[:top]
	}
}

// notRESP is the error of b[i], quoted with what follows it (cut).
func notRESP(b []byte, i int) *ReplyError {
	end := min(len(b), i+32)
	q := strconv.Quote(string(b[i:end]))
	if end < len(b) {
		q += "…"
	}
	return &ReplyError{Problem: NotRESP, Bytes: q}
}

// cmdNames are the names of the commands written and not yet answered,
// oldest first, as runs of one name (a pipeline of 1000 SET is one run).
type cmdNames struct {
	runs []cmdRun
}

type cmdRun struct {
	name string
	n    int64
}

func (q *cmdNames) push(name string) {
	if k := len(q.runs); k > 0 && q.runs[k-1].name == name {
		q.runs[k-1].n++
		return
	}
	q.runs = append(q.runs, cmdRun{name, 1})
}

// at is the name of the i-th command not yet answered ("" when unknown).
func (q *cmdNames) at(i int64) string {
	for _, r := range q.runs {
		if i < r.n {
			return r.name
		}
		i -= r.n
	}
	return ""
}

// drop forgets the n oldest commands: answered.
func (q *cmdNames) drop(n int64) {
	k := 0
	for k < len(q.runs) && n >= q.runs[k].n {
		n -= q.runs[k].n
		k++
	}
	q.runs = q.runs[k:]
	if len(q.runs) > 0 {
		q.runs[0].n -= n
	}
	if len(q.runs) == 0 {
		q.runs = nil // let the array go
	}
}

// cmdParser reads the commands a client writes, arrays of bulk strings
// (go-redis and Pool write nothing else), for their names: the first
// argument, with the second for CLUSTER and CLIENT ("CLUSTER SLOTS").
// Anything else stops the naming, never the writing: names are for
// messages.
type cmdParser struct {
	state  uint8
	broken bool
	num    int64  // the header's number, as far as read
	args   int64  // arguments of the command still to come
	arg    int    // the argument being read (0: the name)
	left   int64  // its bytes still to come
	name   []byte // the name as far as read (cut at 32 bytes)
	second []byte // the second argument of CLUSTER and CLIENT
}

const (
	cpStart   uint8 = iota // '*' next
	cpCount                // the digits of *N, up to \r
	cpCountLF              // its \n
	cpBulk                 // '$' next
	cpLen                  // the digits of $N, up to \r
	cpLenLF                // its \n
	cpArg                  // the argument's bytes
	cpArgCR                // the \r after them
	cpArgLF                // the \n
)

func (p *cmdParser) feed(b []byte, q *cmdNames) {
	for i := 0; i < len(b) && !p.broken; i++ {
		x := b[i]
		switch p.state {
		case cpStart:
			p.expect(x == '*', cpCount)
			p.num, p.arg, p.name, p.second = 0, 0, p.name[:0], p.second[:0]
		case cpCount, cpLen:
			switch {
			case x >= '0' && x <= '9' && p.num < 1<<40:
				p.num = p.num*10 + int64(x-'0')
			case x == '\r':
				p.state++
			default:
				p.broken = true
			}
		case cpCountLF:
			p.args = p.num
			p.expect(x == '\n' && p.args > 0, cpBulk)
		case cpBulk:
			p.num = 0
			p.expect(x == '$', cpLen)
		case cpLenLF:
			p.left = p.num
			p.expect(x == '\n', cpArg)
			if p.left == 0 {
				p.state = cpArgCR
			}
		case cpArg:
			n := min(int64(len(b)-i), p.left)
			switch {
			case p.arg == 0:
				p.name = appendCut(p.name, b[i:i+int(n)])
			case p.arg == 1 && p.isGroup():
				p.second = appendCut(p.second, b[i:i+int(n)])
			}
			p.left -= n
			i += int(n) - 1
			if p.left == 0 {
				p.state = cpArgCR
			}
		case cpArgCR:
			p.expect(x == '\r', cpArgLF)
		case cpArgLF:
			p.expect(x == '\n', cpBulk)
			p.arg++
			if p.args--; p.args == 0 {
				p.state = cpStart
				q.push(p.commandName())
			}
		}
	}
}

func (p *cmdParser) expect(ok bool, next uint8) {
	if !ok {
		p.broken = true
	}
	p.state = next
}

func appendCut(dst, b []byte) []byte {
	return append(dst, b[:min(len(b), max(0, 32-len(dst)))]...)
}

func (p *cmdParser) isGroup() bool {
	return string(upper(p.name)) == "CLUSTER" || string(upper(p.name)) == "CLIENT"
}

// commandName is the command's name in upper case, without allocating for
// the commands this package sends.
func (p *cmdParser) commandName() string {
	name := upper(p.name)
	if len(p.second) > 0 && p.isGroup() {
		return string(name) + " " + string(upper(p.second))
	}
	switch string(name) {
	case "SCAN":
		return "SCAN"
	case "SSCAN":
		return "SSCAN"
	case "SET":
		return "SET"
	case "SADD":
		return "SADD"
	case "EXISTS":
		return "EXISTS"
	case "SMISMEMBER":
		return "SMISMEMBER"
	case "PING":
		return "PING"
	}
	return string(name)
}

// upper upper-cases ASCII letters in place.
func upper(b []byte) []byte {
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return b
}
