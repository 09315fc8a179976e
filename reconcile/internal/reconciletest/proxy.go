package reconciletest

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// TCPProxy stands between fpdedup and a server, so a test can take the
// server away from one client only, at a chosen point, without touching
// the shared server: when a client has sent a request containing trigger
// and then received after bytes of its answer, the proxy shuts down (its
// listener and every connection, both sides), so the client's next dial
// is refused. With reopen > 0 it listens again, on the same address, that
// long after shutting down.
type TCPProxy struct {
	t       *testing.T
	target  string
	Addr    string // where clients dial it
	trigger []byte
	after   int64
	reopen  time.Duration

	// hold: once fired, the proxy stops passing requests on instead of
	// shutting down (a server gone silent), until release.
	hold bool
	// swallow: the answer to the request holding trigger, and all later
	// ones on its connection, never reach the client; the server has run
	// the request (a reply lost on its way). Other connections pass.
	swallow  bool
	Held     chan struct{} // closed when it starts holding
	released chan struct{} // closed by release

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	fired  bool
	Shut   chan struct{} // closed when the proxy shuts down
	Opened chan struct{} // closed when it listens again (reopen > 0)
	wg     sync.WaitGroup
}

// NewHoldProxy is a proxy that, when a client has sent a request
// containing trigger and received after bytes of its answer, passes no
// more requests on (answers to those already passed still come back)
// until release: the test acts on the server meanwhile, at a point of
// the run it knows. With after < 0 it holds the request that holds
// trigger, before the server sees it.
func NewHoldProxy(t *testing.T, target string, trigger string, after int64) *TCPProxy {
	t.Helper()
	p := startProxy(t, target, trigger, after, 0, true, false)
	t.Cleanup(p.Release)
	return p
}

// NewSwallowProxy is a proxy that passes the request holding trigger to
// the server and drops its answer, and every later one on that
// connection, keeping the connection open and silent: the client waits
// for a reply to what the server has done. Held is closed when the
// answer has come from the server.
func NewSwallowProxy(t *testing.T, target string, trigger string) *TCPProxy {
	t.Helper()
	return startProxy(t, target, trigger, 0, 0, false, true)
}

// Release lets the held requests and all later ones through, once.
func (p *TCPProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.released:
	default:
		close(p.released)
	}
}

// NewTCPProxy is a proxy that shuts down when a client has sent a request
// containing trigger and received after bytes of its answer; with reopen
// > 0 it listens again that long after.
func NewTCPProxy(t *testing.T, target string, trigger string, after int64, reopen time.Duration) *TCPProxy {
	t.Helper()
	return startProxy(t, target, trigger, after, reopen, false, false)
}

func startProxy(t *testing.T, target string, trigger string, after int64, reopen time.Duration, hold, swallow bool) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{t: t, target: target, Addr: ln.Addr().String(), trigger: []byte(trigger), after: after, reopen: reopen,
		ln: ln, conns: map[net.Conn]struct{}{}, Shut: make(chan struct{}), Opened: make(chan struct{}),
		hold: hold, swallow: swallow, Held: make(chan struct{}), released: make(chan struct{})}
	p.wg.Add(1)
	go p.serve(ln)
	t.Cleanup(p.close)
	return p
}

func (p *TCPProxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln {
			// Shut down meanwhile.
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		armed := make(chan struct{}) // closed when the client sent the trigger
		var once sync.Once
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			defer s.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if !p.hasFired() && bytes.Contains(buf[:n], p.trigger) {
						once.Do(func() { close(armed) })
						if p.hold && p.after < 0 {
							p.startHold() // this request is held too
						}
					}
					if p.hold && p.hasFired() {
						<-p.released
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 32<<10)
			var sent int64
			for {
				n, err := s.Read(buf)
				if n > 0 {
					select {
					case <-armed:
						if p.swallow {
							p.swallowed()
							continue
						}
						if sent+int64(n) >= p.after && p.hold {
							p.startHold()
						} else if sent+int64(n) >= p.after {
							c.Write(buf[:p.after-sent])
							p.shutdown()
							return
						}
						sent += int64(n)
					default:
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *TCPProxy) hasFired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

// swallowed says that an answer was dropped, once.
func (p *TCPProxy) swallowed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.Held:
	default:
		close(p.Held)
	}
}

// startHold makes the proxy hold every request from now on, once.
func (p *TCPProxy) startHold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fired {
		p.fired = true
		close(p.Held)
	}
}

// shutdown closes the listener and every connection, once.
func (p *TCPProxy) shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fired {
		return
	}
	p.fired = true
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as from a dead server
		}
		c.Close()
	}
	clear(p.conns)
	close(p.Shut)
	if p.reopen > 0 {
		time.AfterFunc(p.reopen, p.ListenAgain)
	}
}

// ListenAgain listens again, on the same address, after a shut down.
func (p *TCPProxy) ListenAgain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return // closed by the test's cleanup
	}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		p.t.Errorf("proxy: listening again on %s: %v", p.Addr, err)
		return
	}
	p.ln = ln
	p.wg.Add(1)
	go p.serve(ln)
	close(p.Opened)
}

// close ends the proxy for good (at the end of the test).
func (p *TCPProxy) close() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// WasShut reports whether the proxy shut down (the trigger fired).
func (p *TCPProxy) WasShut() bool {
	select {
	case <-p.Shut:
		return true
	default:
		return false
	}
}
