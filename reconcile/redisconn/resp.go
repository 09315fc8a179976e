package redisconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Pool is a minimal RESP2 client for the one hot path of Apply:
// pipelines of SET NX / SADD written as prepared bytes on a plain TCP
// connection, replies counted and checked for errors. Measured here on 1M
// keys, 4 connections, pipelines of 1000 (2 cores, loaded): go-redis
// pipelines reached 235-255k SET NX/s, about 40% of redis-benchmark's
// (605k/s), its per-command objects costing client CPU and latency between
// batches; prepared bytes keep the server the bottleneck. Everything else
// (SCAN, probes, checks) uses go-redis.
type Pool struct {
	addr, user, password string
	db                   int
	timeout              time.Duration
	chk                  respChecker // each connection's guard (respguard.go)
	idle                 chan *respConn
	hang                 *online.Hangup
}

type respConn struct {
	c    net.Conn
	br   *bufio.Reader
	ints []int64 // not nil: the integer replies read, appended (PipelineInts)
}

func newPool(addr, user, password string, db int, timeout time.Duration, size int, chk respChecker, h *online.Hangup) *Pool {
	return &Pool{addr: addr, user: user, password: password, db: db, timeout: timeout, chk: chk, idle: make(chan *respConn, size), hang: h}
}

func (p *Pool) close() {
	for {
		select {
		case c := <-p.idle:
			c.c.Close()
		default:
			return
		}
	}
}

func (p *Pool) get(ctx context.Context) (*respConn, error) {
	for {
		var c *respConn
		select {
		case c = <-p.idle:
		default:
		}
		if c == nil {
			break
		}
		if c.healthy() {
			return c, nil
		}
		c.c.Close()
	}
	d := net.Dialer{Timeout: min(p.timeout, 5*time.Second)}
	tc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	// Guarded, as go-redis's are: reply reads a declared count of replies
	// and recurses into nested arrays, so a header must be bounded before
	// it gets there.
	nc := newGuardConn(p.hang.Track(tc), p.addr, p.chk)
	c := &respConn{c: nc, br: bufio.NewReaderSize(nc, 64<<10)}
	var hello []byte
	n := 0
	if p.password != "" {
		if p.user != "" {
			hello = appendCommand(hello, "AUTH", p.user, p.password)
		} else {
			hello = appendCommand(hello, "AUTH", p.password)
		}
		n++
	}
	if p.db != 0 {
		hello = appendCommand(hello, "SELECT", strconv.Itoa(p.db))
		n++
	}
	if n > 0 {
		if err := c.do(hello, n, p.timeout); err != nil {
			nc.Close()
			var re respError
			if errors.As(err, &re) {
				return nil, online.Permanent{Err: err} // wrong password, no such database
			}
			return nil, err
		}
	}
	return c, nil
}

// healthy reports whether an idle connection is still open: the server
// may have closed it meanwhile (CLIENT KILL, a restart, its idle timeout),
// which a read that would block tells apart from one that ends at once.
// Without this check, a batch retried after every client was killed takes
// the next dead connection from the pool, and the next, and runs out of
// retries (measured: 6 failures in a row with CLIENT KILL every 50 ms).
func (c *respConn) healthy() bool {
	if c.br.Buffered() > 0 {
		return false // bytes nobody asked for: out of step
	}
	if err := c.c.SetReadDeadline(time.Now()); err != nil {
		return false
	}
	_, err := c.br.Peek(1)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (p *Pool) put(c *respConn) {
	select {
	case p.idle <- c:
	default:
		c.c.Close()
	}
}

// Pipeline sends cmds (n commands) and reads their n replies. An error
// reply is returned after all replies are read (the connection stays in
// step); an I/O error closes the connection.
func (p *Pool) Pipeline(ctx context.Context, cmds []byte, n int) error {
	_, err := p.pipeline(ctx, cmds, n, nil)
	return err
}

// PipelineInts is Pipeline for commands that answer integers or arrays of
// them (BF.MEXISTS): it appends every integer of the replies, in order, to
// ints. After an error reply, what it appended is not to be used.
func (p *Pool) PipelineInts(ctx context.Context, cmds []byte, n int, ints []int64) ([]int64, error) {
	if ints == nil {
		ints = []int64{} // not nil: the replies' integers are wanted
	}
	return p.pipeline(ctx, cmds, n, ints)
}

func (p *Pool) pipeline(ctx context.Context, cmds []byte, n int, ints []int64) ([]int64, error) {
	c, err := p.get(ctx)
	if err != nil {
		return ints, err
	}
	c.ints = ints
	err = c.do(cmds, n, p.timeout)
	ints, c.ints = c.ints, nil
	if err != nil {
		var re respError
		if errors.As(err, &re) {
			p.put(c)
		} else {
			c.c.Close()
		}
		return ints, err
	}
	p.put(c)
	return ints, nil
}

// respError is an error reply from the server.
type respError struct{ msg string }

func (e respError) Error() string { return e.msg }

func (c *respConn) do(cmds []byte, n int, timeout time.Duration) error {
	if err := c.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	// A pipeline larger than the socket buffers could stall both sides if
	// written before its replies are read: write those from another
	// goroutine. Usual batches (~55 KiB for 1000 SET NX) go in one write.
	werr := make(chan error, 1)
	if len(cmds) <= 256<<10 {
		if _, err := c.c.Write(cmds); err != nil {
			c.c.Close()
			return err
		}
		werr <- nil
	} else {
		go func() {
			_, err := c.c.Write(cmds)
			werr <- err
		}()
	}
	var first error
	for i := 0; i < n; i++ {
		if err := c.reply(); err != nil {
			var re respError
			if !errors.As(err, &re) {
				c.c.Close() // unblocks the writer
				<-werr
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	if err := <-werr; err != nil {
		return err
	}
	return first
}

// reply reads one reply and returns its error, if it is one.
func (c *respConn) reply() error {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return fmt.Errorf("redis: bad reply %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return nil
	case ':':
		if c.ints != nil {
			v, ok := respInt(body)
			if !ok {
				return fmt.Errorf("redis: bad reply %q", line)
			}
			c.ints = append(c.ints, v)
		}
		return nil
	case '-':
		return respError{"redis: " + string(body)}
	case '$':
		size, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("redis: bad reply %q", line)
		}
		if size < 0 {
			return nil
		}
		_, err = c.br.Discard(size + 2)
		return err
	case '*':
		count, err := strconv.Atoi(string(body))
		if err != nil {
			return fmt.Errorf("redis: bad reply %q", line)
		}
		var first error
		for i := 0; i < count; i++ {
			if err := c.reply(); err != nil {
				var re respError
				if !errors.As(err, &re) {
					return err
				}
				first = err
			}
		}
		return first
	}
	return fmt.Errorf("redis: bad reply %q", line)
}

// respInt parses a RESP integer: an optional minus and digits, within an
// int64 (strconv's would take a string made of the bytes at each of
// millions of replies).
func respInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		v = v*10 + uint64(d-'0') // 19 digits fit a uint64
	}
	switch {
	case neg && v <= 1<<63:
		return int64(-v), true
	case !neg && v < 1<<63:
		return int64(v), true
	}
	return 0, false
}

// appendCommand appends a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = AppendBulk(b, a)
	}
	return b
}

// AppendBulk appends s as a RESP bulk string.
func AppendBulk[T string | []byte](b []byte, s T) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}
