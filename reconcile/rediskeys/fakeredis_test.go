package rediskeys_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// fakeRedis is a small RESP2 server on 127.0.0.1:0 that answers enough
// of the protocol for Run to reach its reads (HELLO is refused as Redis 5
// does; AUTH, SELECT, PING, CLIENT, INFO, DBSIZE, TYPE, SCARD, SCAN,
// SSCAN, SRANDMEMBER, EXISTS, SMISMEMBER, SET, SADD; CLUSTER INFO and
// CLUSTER SLOTS as a one-master cluster when cluster is set), and
// misbehaves on command: a hook set with on replaces the answer to a
// command with whatever bytes it writes, or none, or a reset.
type fakeRedis struct {
	t       *testing.T
	ln      net.Listener
	addr    string
	cluster bool
	slots   string // the answer to CLUSTER SLOTS; "": this server holds every slot

	mu    sync.Mutex
	keys  []string // the key space SCAN walks (whatever the MATCH)
	set   []string // the members SSCAN walks
	hooks map[string]func(c *fakeConn, args []string) bool
	conns map[net.Conn]bool
	calls map[string]int
	done  chan struct{}
	wg    sync.WaitGroup
}

func newFakeRedis(t *testing.T) *fakeRedis {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{t: t, ln: ln, addr: ln.Addr().String(), hooks: map[string]func(*fakeConn, []string) bool{},
		conns: map[net.Conn]bool{}, calls: map[string]int{}, done: make(chan struct{})}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.close)
	return f
}

// on sets what the server does on cmd (its name, upper case; "CLUSTER
// SLOTS" for a subcommand): hook writes its answer, or none, and returns
// false to have the usual answer written after all.
func (f *fakeRedis) on(cmd string, hook func(c *fakeConn, args []string) bool) {
	f.mu.Lock()
	f.hooks[cmd] = hook
	f.mu.Unlock()
}

// callsOf is how many times cmd was received.
func (f *fakeRedis) callsOf(cmd string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[cmd]
}

func (f *fakeRedis) close() {
	close(f.done)
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeRedis) serve() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[nc] = true
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer func() {
				f.mu.Lock()
				delete(f.conns, nc)
				f.mu.Unlock()
				nc.Close()
			}()
			c := &fakeConn{Conn: nc, f: f, br: bufio.NewReader(nc), seen: map[string]int{}}
			for {
				args, err := c.command()
				if err != nil {
					return
				}
				if !f.answer(c, args) {
					return
				}
			}
		}()
	}
}

// fakeConn is one client's connection to the fake server.
type fakeConn struct {
	net.Conn
	f    *fakeRedis
	br   *bufio.Reader
	seen map[string]int // the commands received on this connection (go-redis's begin with HELLO)
}

// command reads one command: an array of bulk strings.
func (c *fakeConn) command() ([]string, error) {
	line, err := c.br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("fake redis: not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		line, err := c.br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(c.br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// raw writes s as it is; false once the client is gone.
func (c *fakeConn) raw(s string) bool {
	_, err := c.Write([]byte(s))
	return err == nil
}

// drip writes b one byte at a time, every, until the client or the
// server goes away; it never returns true (the connection is done).
func (c *fakeConn) drip(b byte, every time.Duration) bool {
	for {
		select {
		case <-c.f.done:
			return false
		case <-time.After(every):
		}
		if !c.raw(string(b)) {
			return false
		}
	}
}

// reset ends the connection with a TCP RST (no FIN): a reply cut short.
func (c *fakeConn) reset() bool {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
	return false
}

func (f *fakeRedis) answer(c *fakeConn, args []string) bool {
	if len(args) == 0 {
		return c.raw("-ERR empty command\r\n")
	}
	name := strings.ToUpper(args[0])
	if (name == "CLUSTER" || name == "CLIENT") && len(args) > 1 {
		name += " " + strings.ToUpper(args[1])
	}
	c.seen[name]++
	f.mu.Lock()
	f.calls[name]++
	hook := f.hooks[name]
	keys, set := f.keys, f.set
	f.mu.Unlock()
	if hook != nil && hook(c, args) {
		return true
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch name {
	case "HELLO":
		return c.raw("-ERR unknown command 'HELLO'\r\n")
	case "AUTH", "SELECT", "CLIENT SETINFO", "CLIENT SETNAME", "READONLY":
		return c.raw("+OK\r\n")
	case "PING":
		return c.raw("+PONG\r\n")
	case "INFO":
		enabled := 0
		if f.cluster {
			enabled = 1
		}
		return c.raw(reconciletest.Bulk(fmt.Sprintf("# Cluster\r\ncluster_enabled:%d\r\n", enabled)))
	case "CLUSTER INFO":
		return c.raw(reconciletest.Bulk("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"))
	case "CLUSTER SLOTS":
		if f.slots != "" {
			return c.raw(f.slots)
		}
		host, port, _ := net.SplitHostPort(f.addr)
		return c.raw(fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n%s:%s\r\n%s", reconciletest.Bulk(host), port, reconciletest.Bulk("fakenode0000000000000000000000000000000")))
	case "DBSIZE":
		return c.raw(fmt.Sprintf(":%d\r\n", len(keys)))
	case "SCARD":
		return c.raw(fmt.Sprintf(":%d\r\n", len(set)))
	case "TYPE":
		return c.raw("+set\r\n")
	case "SCAN":
		return c.raw(walk(keys, arg(1), args))
	case "SSCAN":
		return c.raw(walk(set, arg(2), args))
	case "SRANDMEMBER":
		n, _ := strconv.Atoi(arg(2))
		return c.raw(reconciletest.Bulks(set[:min(n, len(set))]))
	case "EXISTS":
		return c.raw(":0\r\n")
	case "SMISMEMBER":
		return c.raw("*" + strconv.Itoa(len(args)-2) + "\r\n" + strings.Repeat(":0\r\n", len(args)-2))
	case "SET":
		return c.raw("+OK\r\n")
	case "SADD":
		return c.raw(fmt.Sprintf(":%d\r\n", len(args)-2))
	}
	return c.raw(fmt.Sprintf("-ERR unknown command '%s'\r\n", args[0]))
}

// fakeCluster is n fake servers, each a master of an equal share of the
// slots and of the keys.
func fakeCluster(t *testing.T, n int, keys []string) []*fakeRedis {
	masters := make([]*fakeRedis, n)
	for i := range masters {
		masters[i] = newFakeRedis(t)
		masters[i].cluster = true
	}
	var slots strings.Builder
	fmt.Fprintf(&slots, "*%d\r\n", n)
	for i, m := range masters {
		host, port, _ := net.SplitHostPort(m.addr)
		fmt.Fprintf(&slots, "*3\r\n:%d\r\n:%d\r\n*3\r\n%s:%s\r\n%s", i*16384/n, (i+1)*16384/n-1, reconciletest.Bulk(host), port, reconciletest.Bulk(fmt.Sprintf("node%036d", i)))
	}
	for i, m := range masters {
		m.slots = slots.String()
		for k := i; k < len(keys); k += n {
			m.keys = append(m.keys, keys[k])
		}
	}
	return masters
}

// walk is the page of values at cursor (an index into them), COUNT of
// them at a time.
func walk(values []string, cursor string, args []string) string {
	at, _ := strconv.Atoi(cursor)
	count := 10
	for i := range args {
		if strings.EqualFold(args[i], "COUNT") && i+1 < len(args) {
			count, _ = strconv.Atoi(args[i+1])
		}
	}
	at = min(at, len(values))
	end := min(at+count, len(values))
	next := end
	if end == len(values) {
		next = 0
	}
	return reconciletest.Page(next, values[at:end])
}

// A fakeRedis that answers a command's first call (or calls) badly and
// then well needs a counter: once is true the first time only.
type once struct{ n atomic.Int64 }

func (o *once) first() bool { return o.n.Add(1) == 1 }

// errAs is errors.As for a test's want.
func errAs[T error](err error) (T, bool) {
	var e T
	ok := errors.As(err, &e)
	return e, ok
}
