package redisconn

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// The names of the commands a client writes, in any pieces: what a
// refused reply is said to answer.
func TestCommandNames(t *testing.T) {
	var b []byte
	b = appendCommand(b, "hello", "2")
	b = appendCommand(b, "cluster", "slots")
	for range 3 {
		b = appendCommand(b, "SET", "fp:0123", "1", "NX")
	}
	b = appendCommand(b, "scan", "0", "MATCH", "fp:*", "COUNT", "1000")
	b = appendCommand(b, "client", "setinfo", "lib-name", "x")
	b = appendCommand(b, strings.Repeat("x", 40), "")
	want := []string{"HELLO", "CLUSTER SLOTS", "SET", "SET", "SET", "SCAN", "CLIENT SETINFO", strings.Repeat("X", 32)}
	for _, size := range []int{1, 2, 3, 7, len(b)} {
		var q cmdNames
		var p cmdParser
		for rest := b; len(rest) > 0; {
			n := min(size, len(rest))
			p.feed(rest[:n], &q)
			rest = rest[n:]
		}
		var got []string
		for i := range int64(len(want)) + 1 {
			got = append(got, q.at(i))
		}
		if strings.Join(got, ",") != strings.Join(append(want, ""), ",") || len(q.runs) != 6 {
			t.Fatalf("pieces of %d: %q (%d runs)", size, got, len(q.runs))
		}
		q.drop(3)
		if q.at(0) != "SET" || q.at(1) != "SET" || q.at(2) != "SCAN" || q.runs[0].n != 2 {
			t.Fatalf("after 3 answered: %q %q %+v", q.at(0), q.at(1), q.runs)
		}
		q.drop(5)
		if q.runs != nil || q.at(0) != "" {
			t.Fatalf("all answered: %+v", q.runs)
		}
	}
	// Not an array of bulk strings: the names stop, nothing else does.
	var q cmdNames
	var p cmdParser
	p.feed([]byte("PING\r\n"), &q)
	p.feed(appendCommand(nil, "SCAN", "0"), &q)
	if !p.broken || q.at(0) != "" {
		t.Fatalf("an inline command: broken %v, %q", p.broken, q.at(0))
	}
}

// The guard on Apply's hot path: a pipeline of 1000 SET NX written, its
// 1000 replies read (the commands named, the replies checked), and a SCAN
// page of 1000 keys read.
func BenchmarkRESPGuard(b *testing.B) {
	var cmds, replies []byte
	for i := range 1000 {
		cmds = appendCommand(cmds, "SET", "dd:0123456789abcdef0123456789abcdef", "1", "NX")
		if i%3 == 0 {
			replies = append(replies, "$-1\r\n"...)
		} else {
			replies = append(replies, "+OK\r\n"...)
		}
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "dd:0123456789abcdef0123456789abcdef"
	}
	scanPage := []byte(reconciletest.Page(17, keys))
	b.Run("pipeline", func(b *testing.B) {
		b.SetBytes(int64(len(cmds) + len(replies)))
		b.ReportAllocs()
		for b.Loop() {
			g := &guardConn{chk: newRespChecker(2 << 20)}
			g.w.feed(cmds, &g.names)
			if e := g.chk.feed(replies); e != nil || g.chk.replies != 1000 {
				b.Fatal(e)
			}
			g.names.drop(g.chk.replies)
		}
	})
	b.Run("scan-page", func(b *testing.B) {
		b.SetBytes(int64(len(scanPage)))
		b.ReportAllocs()
		c := newRespChecker(2 << 20)
		for b.Loop() {
			if e := c.feed(scanPage); e != nil {
				b.Fatal(e)
			}
		}
		if !bytes.HasPrefix(scanPage, []byte("*2\r\n")) || c.replies == 0 {
			b.Fatal("no reply read")
		}
	})
}
