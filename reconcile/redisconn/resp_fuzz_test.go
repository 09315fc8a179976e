package redisconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The RESP reply readers, fuzzed (respguard.go): the guard's streaming
// checker against a recursive reading of the same grammar, fed in any
// pieces; Pool's reader (respConn.reply) behind the guard; go-redis
// behind the guard, which must not allocate past the bounds whatever it is
// sent. The bounds are the fuzzer's, small, so that it reaches them.
//
//	go test -run XXX -fuzz FuzzRESPChecker -fuzztime 60s ./reconcile/redisconn

// refResult is what a reading of a byte stream of replies found: the
// replies complete, and the problem that stopped it (0: none; the stream
// may end inside a reply).
type refResult struct {
	replies int64
	problem ReplyProblem
}

// refRESP reads replies as the checker's doc says, by recursive descent
// over the whole stream: each check where its byte is read.
type refRESP struct {
	b       []byte
	i       int
	lim     respChecker // only its bounds
	charged int64
}

const refIncomplete ReplyProblem = -1

func refRead(b []byte, lim respChecker) refResult {
	r := &refRESP{b: b, lim: lim}
	var res refResult
	for r.i < len(b) {
		r.charged = 0
		switch p := r.reply(0); p {
		case 0:
			res.replies++
		case refIncomplete:
			return res
		default:
			res.problem = p
			return res
		}
	}
	return res
}

func (r *refRESP) next() (byte, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	r.i++
	return r.b[r.i-1], true
}

// expect reads x.
func (r *refRESP) expect(x byte) ReplyProblem {
	c, ok := r.next()
	switch {
	case !ok:
		return refIncomplete
	case c != x:
		return NotRESP
	}
	return 0
}

func (r *refRESP) charge(n int64) ReplyProblem {
	if r.charged += n; r.charged > r.lim.maxReply {
		return ReplyTooLarge
	}
	return 0
}

// reply reads one reply inside depth open arrays.
func (r *refRESP) reply(depth int) ReplyProblem {
	t, ok := r.next()
	if !ok {
		return refIncomplete
	}
	switch t {
	case '+', '-', ':':
		n := 0
		for {
			c, ok := r.next()
			switch {
			case !ok:
				return refIncomplete
			case c == '\n':
				return NotRESP
			case c != '\r':
				if n++; n > r.lim.maxLine {
					return LineTooLong
				}
				continue
			}
			break
		}
		if p := r.expect('\n'); p != 0 {
			return p
		}
		return r.charge(int64(n))
	case '$', '*':
		var num int64
		digits, neg := 0, false
		for {
			c, ok := r.next()
			switch {
			case !ok:
				return refIncomplete
			case c >= '0' && c <= '9':
				if digits == respHeaderDigits || neg && (c != '1' || digits > 0) {
					return NotRESP
				}
				num = num*10 + int64(c-'0')
				digits++
				continue
			case c == '-' && digits == 0 && !neg:
				neg = true
				continue
			case c == '\r' && digits > 0:
			default:
				return NotRESP
			}
			break
		}
		if !neg {
			switch {
			case t == '$' && num > r.lim.maxBulk:
				return BulkTooLong
			case t == '$':
				if p := r.charge(num); p != 0 {
					return p
				}
			case depth == r.lim.maxDepth:
				return ReplyTooDeep
			case num > r.lim.maxReply/slotBytes:
				return ReplyTooLarge
			default:
				if p := r.charge(num * slotBytes); p != 0 {
					return p
				}
			}
		}
		if p := r.expect('\n'); p != 0 || neg {
			return p
		}
		if t == '$' {
			if int64(len(r.b)-r.i) < num {
				return refIncomplete
			}
			r.i += int(num)
			if p := r.expect('\r'); p != 0 {
				return p
			}
			return r.expect('\n')
		}
		for k := int64(0); k < num; k++ {
			if p := r.reply(depth + 1); p != 0 {
				return p
			}
		}
		return 0
	}
	return NotRESP
}

// fuzzLimits are small bounds from the fuzzer's numbers.
func fuzzLimits(maxReply, maxBulk uint16, maxLine, maxDepth uint8) respChecker {
	return respChecker{maxReply: int64(maxReply), maxBulk: int64(maxBulk), maxLine: int(maxLine), maxDepth: int(maxDepth % 40)}
}

// pieces cuts b at places the seed picks (at most 64 of them).
func pieces(b []byte, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	var out [][]byte
	for len(b) > 0 && len(out) < 64 {
		n := 1 + rng.IntN(len(b))
		if rng.IntN(3) == 0 {
			n = 1
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	if len(b) > 0 {
		out = append(out, b)
	}
	return out
}

// respSeeds are replies of every type, nested, with lengths at the
// fuzzers' bounds (maxReply 256, maxBulk 16, maxLine 16, maxDepth 4 in
// the seeds), and some that break them.
var respSeeds = []string{
	"+OK\r\n", "-ERR unknown command 'HELLO'\r\n", ":0\r\n", ":-9223372036854775808\r\n",
	"$-1\r\n", "*-1\r\n", "$0\r\n\r\n", "*0\r\n",
	"$16\r\n0123456789abcdef\r\n", "$17\r\n0123456789abcdefg\r\n", // maxBulk, one over
	"+0123456789abcdef\r\n", "+0123456789abcdefg\r\n", // maxLine, one over
	"*1\r\n*1\r\n*1\r\n*0\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*0\r\n", // maxDepth, one over
	"*2\r\n$1\r\n0\r\n*3\r\n$3\r\nfp:\r\n$-1\r\n:7\r\n", // a SCAN page
	"*16\r\n", "*17\r\n", // 16·16 = maxReply, one over
	"*2000000000\r\n", "$4000000000\r\n", "$999999999999999999\r\n", "$9999999999999999999\r\n",
	"$-0\r\n", "$-2\r\n", "$+1\r\nx\r\n", "*1\r\n?\r\n", "%1\r\n+a\r\n+b\r\n", "+a\rb\r\n", "+a\n", "$3\r\nabcXY",
	"*3\r\n:1\r\n-ERR x\r\n$2\r\nok\r\n+PONG\r\n", "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$4\r\nnode\r\n",
}

// FuzzRESPChecker: the checker, fed the stream in any pieces, finds what
// the recursive reading finds: as many replies complete, and the same
// first problem (a bound or a byte that is not RESP2) or none.
func FuzzRESPChecker(f *testing.F) {
	for i, s := range respSeeds {
		f.Add([]byte(s), uint16(256), uint16(16), uint8(16), uint8(4), uint64(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxReply, maxBulk uint16, maxLine, maxDepth uint8, seed uint64) {
		lim := fuzzLimits(maxReply, maxBulk, maxLine, maxDepth)
		want := refRead(data, lim)
		for _, whole := range []bool{true, false} {
			c := lim
			var got refResult
			parts := [][]byte{data}
			if !whole {
				parts = pieces(data, seed)
			}
			for _, p := range parts {
				if e := c.feed(p); e != nil {
					got.problem = e.Problem
					if e.Problem != NotRESP && e.Declared <= e.Limit {
						t.Fatalf("%q: %v declares %d within its limit %d", data, e, e.Declared, e.Limit)
					}
					break
				}
			}
			got.replies = c.replies
			if got != want {
				t.Fatalf("%q in %d pieces (limits %d %d %d %d): checker %+v, reading %+v", data, len(parts), lim.maxReply, lim.maxBulk, lim.maxLine, lim.maxDepth, got, want)
			}
			if len(c.stack) > lim.maxDepth {
				t.Fatalf("%q: %d arrays open, bound %d", data, len(c.stack), lim.maxDepth)
			}
		}
	})
}

// bytesConn is a net.Conn that reads b, in the pieces given, then EOF,
// and takes every write.
type bytesConn struct {
	parts [][]byte
	net.Conn
}

func (c *bytesConn) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if c.parts[0] = c.parts[0][n:]; len(c.parts[0]) == 0 {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func (c *bytesConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *bytesConn) Close() error                       { return nil }
func (c *bytesConn) SetDeadline(time.Time) error        { return nil }
func (c *bytesConn) SetReadDeadline(time.Time) error    { return nil }
func (c *bytesConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c *bytesConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c *bytesConn) SetWriteDeadline(t time.Time) error { return nil }

// FuzzRESPReply: Pool's reader (respConn.reply) behind a guard with
// the fuzzer's bounds reads the replies the checker accepts, one call
// each, error replies included, and stops at what it refuses with that
// *ReplyError; it never panics, and never recurses or loops past the
// bounds (it used to follow "*1\r\n" to any depth).
func FuzzRESPReply(f *testing.F) {
	for i, s := range respSeeds {
		f.Add([]byte(s), uint16(256), uint16(16), uint8(16), uint8(4), uint64(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxReply, maxBulk uint16, maxLine, maxDepth uint8, seed uint64) {
		lim := fuzzLimits(maxReply, maxBulk, maxLine, maxDepth)
		want := refRead(data, lim)
		g := &guardConn{Conn: &bytesConn{parts: pieces(bytes.Clone(data), seed)}, server: "fuzz:1", chk: lim}
		c := &respConn{c: g, br: bufio.NewReaderSize(g, 4096)}
		var read int64
		for {
			err := c.reply()
			var re respError
			if err == nil || errors.As(err, &re) {
				if read++; read > want.replies {
					t.Fatalf("%q: %d replies read, the checker accepts %d", data, read, want.replies)
				}
				continue
			}
			var ge *ReplyError
			switch {
			case errors.As(err, &ge):
				if ge.Problem != want.problem || ge.Server != "fuzz:1" {
					t.Fatalf("%q: %v, want problem %d", data, err, want.problem)
				}
			case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
				if want.problem != 0 {
					t.Fatalf("%q: %v, want problem %d", data, err, want.problem)
				}
				if read != want.replies {
					t.Fatalf("%q: %d replies read, %d complete", data, read, want.replies)
				}
			default:
				// respConn.reply's own refusals ("bad reply") are stricter
				// still; never of what the checker refuses first.
				if want.problem != 0 {
					t.Fatalf("%q: %v before the guard's problem %d", data, err, want.problem)
				}
			}
			return
		}
	})
}

// goRedisConn is a connection go-redis dials: it answers HELLO as Redis 5
// does and the first other command with the fuzzer's bytes, then EOF.
type goRedisConn struct {
	bytesConn
	names cmdNames
	w     cmdParser
	reply [][]byte
}

func (c *goRedisConn) Write(p []byte) (int, error) {
	c.w.feed(p, &c.names)
	for len(c.names.runs) > 0 {
		name := c.names.at(0)
		c.names.drop(1)
		if name == "HELLO" {
			c.parts = append(c.parts, []byte("-ERR unknown command 'HELLO'\r\n"))
			continue
		}
		c.parts = append(c.parts, c.reply...)
		c.reply = nil
	}
	return len(p), nil
}

// goRedisCalls are the commands Run sends through go-redis.
var goRedisCalls = []func(ctx context.Context, c *redis.Client) error{
	func(ctx context.Context, c *redis.Client) error { return c.Scan(ctx, 0, "fp:*", 1000).Err() },
	func(ctx context.Context, c *redis.Client) error { return c.SScan(ctx, "s", 0, "", 1000).Err() },
	func(ctx context.Context, c *redis.Client) error { return c.Info(ctx, "cluster").Err() },
	func(ctx context.Context, c *redis.Client) error { return c.DBSize(ctx).Err() },
	func(ctx context.Context, c *redis.Client) error { return c.Type(ctx, "s").Err() },
	func(ctx context.Context, c *redis.Client) error {
		//lint:ignore SA1019 Run reads CLUSTER SLOTS (redis.go, slotMap).
		return c.ClusterSlots(ctx).Err()
	},
	func(ctx context.Context, c *redis.Client) error { return c.SMIsMember(ctx, "s", "a", "b").Err() },
	func(ctx context.Context, c *redis.Client) error { return c.SRandMemberN(ctx, "s", 16).Err() },
	func(ctx context.Context, c *redis.Client) error { return c.Command(ctx).Err() },
}

// goRedisMu: one go-redis run at a time, so that TotalAlloc is its own.
var goRedisMu sync.Mutex

// FuzzGuardedGoRedis: go-redis, reading any bytes as the answer to a
// command Run sends, through a guard with a reply budget of maxReply,
// allocates less than a fixed floor (a client, its buffers) and a few
// times maxReply: the declared lengths never reach it. A *ReplyError it
// returns is the problem the checker finds; none where there is none.
func FuzzGuardedGoRedis(f *testing.F) {
	for i, s := range respSeeds {
		f.Add([]byte(s), uint8(i), uint64(i))
	}
	f.Add([]byte(strings.Repeat("*1\r\n", 100)), uint8(0), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, call uint8, seed uint64) {
		const maxReply = 64 << 10
		lim := newRespChecker(maxReply)
		want := refRead(data, lim)
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			c := &goRedisConn{reply: pieces(bytes.Clone(data), seed)}
			return newGuardConn(c, addr, lim), nil
		}
		goRedisMu.Lock()
		defer goRedisMu.Unlock()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := redis.NewClient(&redis.Options{Addr: "fuzz:1", Protocol: 2, DisableIdentity: true, Dialer: dial, MaxRetries: -1,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
		err := goRedisCalls[int(call)%len(goRedisCalls)](context.Background(), c)
		c.Close()
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20+8*maxReply {
			t.Fatalf("%q: go-redis allocated %d bytes through a guard of %d", data, got, maxReply)
		}
		var re *ReplyError
		if errors.As(err, &re) && (re.Problem != want.problem || re.Server != "fuzz:1") {
			t.Fatalf("%q: %v, want problem %d", data, err, want.problem)
		}
		if want.problem == 0 && re != nil {
			t.Fatalf("%q: %v, where the checker finds none", data, err)
		}
	})
}

// TestRespInt: RESP integers as the server writes them, and refusals of
// what no server writes (or what would overflow).
func TestRespInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1": 1, "-1": -1, "42": 42, "999999999999999999": 999999999999999999, "-123456789012345678": -123456789012345678,
		"9223372036854775807": math.MaxInt64, "-9223372036854775808": math.MinInt64} {
		if v, ok := respInt([]byte(in)); !ok || v != want {
			t.Errorf("respInt(%q) = %d, %v; want %d", in, v, ok, want)
		}
	}
	for _, in := range []string{"", "-", "+1", "1a", " 1", "--1", "9223372036854775808", "-9223372036854775809", "99999999999999999999"} {
		if v, ok := respInt([]byte(in)); ok {
			t.Errorf("respInt(%q) = %d, accepted", in, v)
		}
	}
}
