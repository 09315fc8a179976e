package online

import (
	"context"
	"net"
	"sync"
	"syscall"
)

// Hangup closes every connection a run opened once the run's context is
// done. go-redis and the MySQL driver look at a context between commands,
// and the Redis adapters' own pipelines (redisconn.Pool) not at all, so a read blocked on a server that stays silent
// (a paused or frozen Redis, a listener that accepts and never answers)
// ended only at the timeout: a signal took up to (1+Retries)×Timeout to
// act. Closed under it, the read fails at once and the run stops as it
// does for any interruption (the checkpoint saved, the interrupted error).
// A connection dialed after that (a clean-up under
// context.WithoutCancel) is left to its own timeout.
type Hangup struct {
	mu    sync.Mutex
	conns map[*hangConn]struct{}
	done  bool
	stop  func() bool
}

// NewHangup closes the connections it tracks once ctx is done, until Stop.
func NewHangup(ctx context.Context) *Hangup {
	h := &Hangup{conns: map[*hangConn]struct{}{}}
	h.stop = context.AfterFunc(ctx, h.closeAll)
	return h
}

// Stop ends the watch of the context: what is tracked is left open.
func (h *Hangup) Stop() bool { return h.stop() }

func (h *Hangup) closeAll() {
	h.mu.Lock()
	h.done = true
	conns := h.conns
	h.conns = map[*hangConn]struct{}{}
	h.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
}

// Track returns c, to be closed with the others when the run's context is
// done; a nil Hangup (Options not from Run) tracks nothing.
func (h *Hangup) Track(c net.Conn) net.Conn {
	if h == nil {
		return c
	}
	hc := &hangConn{Conn: c, h: h}
	h.mu.Lock()
	if !h.done {
		h.conns[hc] = struct{}{}
	}
	h.mu.Unlock()
	return hc
}

// hangConn is a connection a Hangup tracks.
type hangConn struct {
	net.Conn
	h *Hangup
}

func (c *hangConn) Close() error {
	c.h.mu.Lock()
	delete(c.h.conns, c)
	c.h.mu.Unlock()
	return c.Conn.Close()
}

// SyscallConn lets the clients look at the socket of an idle connection
// (a peer that closed it), as they do on a plain one.
func (c *hangConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, syscall.EINVAL
}
