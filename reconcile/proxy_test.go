package reconcile_test

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy stands between fpdedup and a server, so a test can take the
// server away from one client only, at a chosen point, without touching
// the shared server: when a client has sent a request containing trigger
// and then received after bytes of its answer, the proxy shuts down (its
// listener and every connection, both sides), so the client's next dial
// is refused. With reopen > 0 it listens again, on the same address, that
// long after shutting down.
type tcpProxy struct {
	t       *testing.T
	target  string
	addr    string
	trigger []byte
	after   int64
	reopen  time.Duration

	// hold: once fired, the proxy stops passing requests on instead of
	// shutting down (a server gone silent), until release.
	hold     bool
	held     chan struct{} // closed when it starts holding
	released chan struct{} // closed by release

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	fired  bool
	shut   chan struct{} // closed when the proxy shuts down
	opened chan struct{} // closed when it listens again (reopen > 0)
	wg     sync.WaitGroup
}

// newHoldProxy is a proxy that, when a client has sent a request
// containing trigger and received after bytes of its answer, passes no
// more requests on (answers to those already passed still come back)
// until release: the test acts on the server meanwhile, at a point of
// the run it knows. With after < 0 it holds the request that holds
// trigger, before the server sees it.
func newHoldProxy(t *testing.T, target string, trigger string, after int64) *tcpProxy {
	t.Helper()
	p := startProxy(t, target, trigger, after, 0, true)
	t.Cleanup(p.release)
	return p
}

// release lets the held requests and all later ones through, once.
func (p *tcpProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.released:
	default:
		close(p.released)
	}
}

func newTCPProxy(t *testing.T, target string, trigger string, after int64, reopen time.Duration) *tcpProxy {
	t.Helper()
	return startProxy(t, target, trigger, after, reopen, false)
}

func startProxy(t *testing.T, target string, trigger string, after int64, reopen time.Duration, hold bool) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, target: target, addr: ln.Addr().String(), trigger: []byte(trigger), after: after, reopen: reopen,
		ln: ln, conns: map[net.Conn]struct{}{}, shut: make(chan struct{}), opened: make(chan struct{}),
		hold: hold, held: make(chan struct{}), released: make(chan struct{})}
	p.wg.Add(1)
	go p.serve(ln)
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
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

func (p *tcpProxy) hasFired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

// startHold makes the proxy hold every request from now on, once.
func (p *tcpProxy) startHold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.fired {
		p.fired = true
		close(p.held)
	}
}

// shutdown closes the listener and every connection, once.
func (p *tcpProxy) shutdown() {
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
	close(p.shut)
	if p.reopen > 0 {
		time.AfterFunc(p.reopen, p.listenAgain)
	}
}

func (p *tcpProxy) listenAgain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return // closed by the test's cleanup
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Errorf("proxy: listening again on %s: %v", p.addr, err)
		return
	}
	p.ln = ln
	p.wg.Add(1)
	go p.serve(ln)
	close(p.opened)
}

// close ends the proxy for good (at the end of the test).
func (p *tcpProxy) close() {
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

// wasShut reports whether the proxy shut down (the trigger fired).
func (p *tcpProxy) wasShut() bool {
	select {
	case <-p.shut:
		return true
	default:
		return false
	}
}
