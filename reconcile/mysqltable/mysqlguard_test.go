package mysqltable

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// scriptConn is a net.Conn whose reads give src in chunks of the sizes
// chunks cycles through (at least 1); writes are dropped; deadlines are
// ignored.
type scriptConn struct {
	src    io.Reader
	chunks []int
	i      int
}

func (c *scriptConn) Read(p []byte) (int, error) {
	n := 1
	if len(c.chunks) > 0 {
		n = max(1, c.chunks[c.i%len(c.chunks)])
		c.i++
	}
	return c.src.Read(p[:min(n, len(p))])
}

func (c *scriptConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return nil }
func (c *scriptConn) RemoteAddr() net.Addr             { return nil }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

func testGuard(maxPacket int64, bufSize int) *mysqlGuard {
	return &mysqlGuard{target: "mysql://u@h:1/d?table=t&column=c", addr: "h:1", timeout: time.Second, maxPacket: maxPacket, bufSize: bufSize}
}

// guardModel is what the guard must make of a server's bytes b, read
// whole: how many it delivers and the problem it stops at (0: none; the
// bytes ran out). A packet it refuses is not delivered, not even in part.
func guardModel(b []byte, maxPacket int64, query bool) (delivered int, problem ServerProblem) {
	pos, run, head, packets := 0, int64(0), query, 0
	for pos+4 <= len(b) {
		n := int(b[pos]) | int(b[pos+1])<<8 | int(b[pos+2])<<16
		if run+int64(n) > maxPacket {
			return pos, PacketTooLarge
		}
		if run == 0 {
			// The guard peeks at up to 9 bytes of the body first.
			k := min(n, 9)
			if len(b)-pos-4 < k {
				return pos, 0
			}
			body := b[pos+4 : pos+4+k]
			var p ServerProblem
			switch {
			case head:
				head = false
				p = headProblem(body)
			case n == 0, packets == 0, n == mysqlMaxPacket:
			default:
				p = fitProblem(body, n)
			}
			if p != 0 {
				return pos, p
			}
		}
		if run += int64(n); n < mysqlMaxPacket {
			run = 0
		}
		packets++
		if pos+4+n > len(b) {
			return len(b), 0
		}
		pos += 4 + n
	}
	return pos, 0
}

// fitProblem is whether a packet's first length-encoded value (body holds
// its first 9 bytes at most) runs past the packet's n bytes.
func fitProblem(body []byte, n int) ServerProblem {
	var size int
	switch body[0] {
	case 0x00, 0xfb, 0xfe, 0xff:
		return 0
	case 0xfc:
		size = 2
	case 0xfd:
		size = 3
	default:
		if 1+int(body[0]) > n {
			return MalformedReply
		}
		return 0
	}
	if len(body) < 1+size {
		return MalformedReply
	}
	var v [4]byte
	copy(v[:], body[1:1+size])
	if 1+size+int(binary.LittleEndian.Uint32(v[:])) > n {
		return MalformedReply
	}
	return 0
}

// headProblem is what checkHead finds in a reply's first packet, written
// out the long way: a length-encoded column count of at most 4096.
func headProblem(body []byte) ServerProblem {
	if len(body) == 0 {
		return 0
	}
	var size int
	switch body[0] {
	case 0x00, 0xff, 0xfb:
		return 0
	case 0xfc:
		size = 2
	case 0xfd:
		size = 3
	case 0xfe:
		size = 8
	default:
		return 0 // one byte: at most 250 columns
	}
	if len(body) < 1+size {
		return MalformedReply
	}
	var v [8]byte
	copy(v[:], body[1:1+size])
	count := uint64(0)
	for i := 7; i >= 0; i-- {
		count = count<<8 | uint64(v[i])
	}
	if count > maxResultColumns {
		return TooManyColumns
	}
	return 0
}

// FuzzPacketGuard: whatever a server sends, in whatever pieces, the
// guard delivers exactly the bytes the model says (the packets before the
// first one it refuses, and a last one cut short by the end of the
// bytes), refuses for the model's reason, and then fails for good. The
// first input byte sets the read and chunk sizes and whether a query was
// sent (its reply's first packet is a column count; otherwise the first
// packet is the greeting); the rest is the server's. The bound is 300
// bytes here, to be reached by short inputs; TestPacketGuardRuns covers
// 16 MiB packets.
//
//	go test -run XXX -fuzz FuzzPacketGuard -fuzztime 60s ./reconcile
func FuzzPacketGuard(f *testing.F) {
	row := []byte{17, 0, 0, 4, 16, 0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	eof := []byte{5, 0, 0, 5, 0xfe, 0, 0, 2, 0}
	f.Add(append(append([]byte{0x01, 1, 0, 0, 1, 1}, row...), eof...))
	f.Add([]byte{0x00, 0xff, 0xff, 0xff, 0, 0})                            // a 16 MiB header
	f.Add([]byte{0x01, 9, 0, 0, 1, 0xfe, 0x80, 0xf0, 0xfa, 2, 0, 0, 0, 0}) // 50M columns
	f.Add([]byte{0x01, 1, 0, 0, 1, 0xfc})                                  // a column count cut short
	f.Add([]byte{0x06, 200, 0, 0, 0, 1, 2, 3})                             // a body cut short
	f.Add([]byte{0x0f, 44, 1, 0, 0})                                       // 300 bytes announced, none sent
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		flags, b := data[0], data[1:]
		query := flags&1 != 0
		readSize := 1 + int(flags>>1&7)*9 // 1 to 64
		chunks := []int{1 + int(flags>>4), 3, 1 + int(flags>>5)*13}
		srv := testGuard(300, 16)
		g := srv.wrap(&scriptConn{src: bytes.NewReader(b), chunks: chunks})
		if query {
			g.Write([]byte{5, 0, 0, 0, comQuery, 'S', 'E', 'L', 'x'})
		}
		wantN, wantProblem := guardModel(b, 300, query)

		var got []byte
		var err error
		p := make([]byte, readSize)
		for range len(b) + 2 {
			var n int
			n, err = g.Read(p)
			if n == 0 && err == nil {
				t.Fatal("a read of nothing and no error")
			}
			got = append(got, p[:n]...)
			if err != nil {
				break
			}
		}
		if err == nil {
			t.Fatalf("no error after %d reads of %d bytes", len(b)+2, len(b))
		}
		if !bytes.Equal(got, b[:wantN]) {
			t.Fatalf("delivered %d bytes, want %d", len(got), wantN)
		}
		var be *BadServerError
		switch {
		case wantProblem == 0 && errors.As(err, &be):
			t.Fatalf("refused: %v", err)
		case wantProblem != 0 && (!errors.As(err, &be) || be.Problem != wantProblem):
			t.Fatalf("error %v, want problem %d", err, wantProblem)
		case wantProblem != 0 && (srv.bad.Load() != be || !online.IsPermanent(err)):
			t.Fatalf("the refusal was not recorded as permanent: %v", err)
		}
		if _, again := g.Read(p); again != err {
			t.Fatalf("not sticky: %v, then %v", err, again)
		}
	})
}

// runSource gives k 16 MiB packets (zeros) and a packet of tail bytes,
// without holding them.
type runSource struct {
	k, tail int
	pkt     int // packets begun
	left    int // bytes of the current packet left
}

func (r *runSource) Read(p []byte) (int, error) {
	if r.left == 0 {
		if r.pkt > r.k {
			return 0, io.EOF
		}
		n := mysqlMaxPacket
		if r.pkt == r.k {
			n = r.tail
		}
		r.pkt++
		r.left = 4 + n
		hdr := []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(r.pkt - 1)}
		c := copy(p, hdr)
		r.left -= c
		if c < 4 {
			panic("reads under 4 bytes are not supported")
		}
		return c, nil
	}
	n := min(len(p), r.left)
	clear(p[:n])
	r.left -= n
	return n, nil
}

// A run of 16 MiB packets is one logical packet: with a 40 MiB bound, two
// and a short one pass; three do not, refused at the third's header.
func TestPacketGuardRuns(t *testing.T) {
	for _, c := range []struct {
		k        int
		refused  bool
		wantSize int64
	}{{2, false, 0}, {3, true, 3 * mysqlMaxPacket}} {
		srv := testGuard(40<<20, 256<<10)
		g := srv.wrap(&scriptConn{src: &runSource{k: c.k, tail: 10}, chunks: []int{64 << 10}})
		var total int64
		p := make([]byte, 1<<20)
		var err error
		for err == nil {
			var n int
			n, err = g.Read(p)
			total += int64(n)
		}
		var be *BadServerError
		switch {
		case !c.refused && (errors.As(err, &be) || total != int64(c.k)*(4+mysqlMaxPacket)+14):
			t.Fatalf("%d packets: %d bytes, %v", c.k, total, err)
		case c.refused && (!errors.As(err, &be) || be.Problem != PacketTooLarge || be.Size != c.wantSize || total != 2*(4+mysqlMaxPacket)):
			t.Fatalf("%d packets: %d bytes, %v", c.k, total, err)
		}
	}
}

// A drip: a byte every 20 ms, each read with a new 200 ms deadline (as the
// driver sets them): the packet's deadline, set when it was begun, ends
// it. Without it each byte would hold the read for ever.
func TestPacketGuardDrip(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pkt := append([]byte{200, 0, 0, 1}, make([]byte, 200)...)
		for _, b := range pkt {
			if _, err := server.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		server.Close()
	}()
	srv := testGuard(1<<20, 4096)
	g := srv.wrap(client)
	p := make([]byte, 4096)
	var err error
	total := 0
	for err == nil {
		g.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		var n int
		n, err = g.Read(p)
		total += n
	}
	var se *SlowServerError
	if !errors.As(err, &se) || se.Want != 204 || se.Got < total || se.Got >= 204 {
		t.Fatalf("after %d bytes: %v", total, err)
	}
	client.Close()
	<-done
}

// BenchmarkPacketGuard: a streamed read's rows (16-byte values, 21 bytes
// with the header) through the guard as the driver reads them, 4 KiB at a
// time; the unguarded read of the same buffer is the baseline.
func BenchmarkPacketGuard(b *testing.B) {
	const rows = 1 << 16
	var stream []byte
	for i := range rows {
		stream = append(stream, 17, 0, 0, byte(i), 16)
		stream = append(stream, make([]byte, 16)...)
	}
	p := make([]byte, 4096)
	for _, guarded := range []bool{false, true} {
		name := "bufio"
		if guarded {
			name = "guard"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				src := &scriptConn{src: bytes.NewReader(stream), chunks: []int{64 << 10}}
				var r io.Reader = bufio.NewReaderSize(src, readBufferSize)
				if guarded {
					r = testGuard(maxServerPacket, readBufferSize).wrap(src)
				}
				for {
					if _, err := r.Read(p); err != nil {
						break
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
		})
	}
}
