package redisbloom_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// fakeFilter is a RESP2 server of one RedisBloom filter (every key is
// it) whose dump a test makes lie: it answers PING, INFO, SELECT, TYPE
// (MBbloom--), BF.SCANDUMP key 0 with head, and BF.SCANDUMP key I with
// chunk(I), the raw bytes of its answer; BF.MEXISTS finds nothing.
type fakeFilter struct {
	addr  string
	head  []byte
	chunk func(iter int64) string
	ln    net.Listener
	wg    sync.WaitGroup
}

func newFakeFilter(t *testing.T, head []byte, chunk func(int64) string) *fakeFilter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFilter{addr: ln.Addr().String(), head: head, chunk: chunk, ln: ln}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() { ln.Close(); f.wg.Wait() })
	return f
}

func (f *fakeFilter) serve() {
	defer f.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		conns = append(conns, c)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			br := bufio.NewReader(c)
			for {
				args, err := readCommand(br)
				if err != nil {
					return
				}
				if _, err := io.WriteString(c, f.answer(args)); err != nil {
					return
				}
			}
		}()
	}
}

func (f *fakeFilter) answer(args []string) string {
	switch strings.ToUpper(args[0]) {
	case "PING":
		return "+PONG\r\n"
	case "INFO":
		return reconciletest.Bulk("# Cluster\r\ncluster_enabled:0\r\n")
	case "SELECT":
		return "+OK\r\n"
	case "TYPE":
		return "+MBbloom--\r\n"
	case "BF.SCANDUMP":
		it, _ := strconv.ParseInt(args[2], 10, 64)
		if it == 0 {
			return "*2\r\n:1\r\n" + reconciletest.Bulk(string(f.head))
		}
		return f.chunk(it)
	case "BF.MEXISTS":
		return "*" + strconv.Itoa(len(args)-2) + "\r\n" + strings.Repeat(":0\r\n", len(args)-2)
	}
	return "-ERR unknown command '" + args[0] + "'\r\n"
}

func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// chunkReply is BF.SCANDUMP's answer: the next iterator and the data.
func chunkReply(next int64, data []byte) string {
	return fmt.Sprintf("*2\r\n:%d\r\n%s", next, reconciletest.Bulk(string(data)))
}

// TestAuditHostileDump: a server whose filter's dump lies (its header,
// or chunks that do not make up the filter the header describes) is an
// error naming the shard, the key and the lie (exit 2), within --mem:
// never a crash, nor an allocation the header asks for.
func TestAuditHostileDump(t *testing.T) {
	reconciletest.PlainOnly(t, "dumps refused as they are read; the audit runs under -race in TestAudit")
	// A real chain of three sub-filters, as the module would make it.
	f, err := rbloom.NewFilter(rbloom.Params{Capacity: 100, Error: 0.01}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		f.Add([]byte(fmt.Sprint("item-", i)))
	}
	if n := len(f.Header().Links); n != 3 {
		t.Fatalf("%d sub-filters", n)
	}
	good, _ := f.Header().AppendBinary(nil)
	l0 := f.Header().Links[0].Bytes // the first sub-filter's bytes
	honest := func(it int64) string {
		// The chunk of the module: the rest of its sub-filter.
		pos := uint64(it - 1)
		for _, l := range f.Header().Links {
			if pos < l.Bytes {
				return chunkReply(it+int64(l.Bytes-pos), make([]byte, l.Bytes-pos))
			}
			pos -= l.Bytes
		}
		return "*2\r\n:0\r\n$0\r\n\r\n"
	}
	lie := func(at int64, reply string) func(int64) string {
		return func(it int64) string {
			if it == at {
				return reply
			}
			return honest(it)
		}
	}
	put := func(off int, v uint64) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(b[off:], v)
		return b
	}
	const link1 = rbloom.HeaderSize + rbloom.LinkSize // the second sub-filter's fields
	petabyte := append([]byte(nil), good...)
	binary.LittleEndian.PutUint64(petabyte[link1:], 1<<50)
	binary.LittleEndian.PutUint64(petabyte[link1+8:], 1<<53)
	many := make([]byte, rbloom.HeaderSize+300_000*rbloom.LinkSize) // 15 MiB: 300k sub-filters
	binary.LittleEndian.PutUint32(many[8:], 300_000)
	for _, c := range []struct {
		name  string
		head  []byte
		chunk func(int64) string
		want  string
	}{
		{"300k sub-filters", many, honest, "more sub-filters than the memory budget holds"},
		{"bits not bytes*8", put(link1+8, f.Header().Links[1].Bits+8), honest, "bits is not bytes*8"},
		{"item counts", put(0, f.Header().Size+1), honest, "item counts do not add up"},
		{"a petabyte sub-filter, chunks that overlap", petabyte, lie(int64(l0)+1, chunkReply(int64(l0)+1+16, make([]byte, 32))), "chunk overlaps or goes backwards"},
		{"a chunk past its sub-filter", good, lie(1, chunkReply(int64(l0)+9, make([]byte, l0+8))), "chunk runs past its sub-filter"},
		{"an iterator backwards", good, lie(int64(l0)+1, chunkReply(5, make([]byte, 4))), "chunk overlaps or goes backwards"},
		{"an empty chunk that is not the end", good, lie(1, chunkReply(1, nil)), "chunk of no bytes"},
		{"the end too early", good, lie(int64(l0)+1, "*2\r\n:0\r\n$0\r\n\r\n"), "dump ends before its sub-filters do"},
		{"a chunk of 32 MiB", good, lie(1, "*2\r\n:33554433\r\n$33554432\r\n"), "a string of 33554432 bytes"},
		{"an iterator that is no number", good, lie(1, "*2\r\n$1\r\nx\r\n$0\r\n\r\n"), "an iterator of type string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := newFakeFilter(t, c.head, c.chunk)
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "k.txt"), []byte("a\nb\nc\n"), 0o644)
			reconciletest.Fpdedup(t, dir, nil, "build", "-q", "-o", "truth.fpx", "k.txt").Want(t, 0)
			url := fmt.Sprintf("redis://%s/0?bf=lie:{*}&shards=1&route=all&item=fp", fake.addr)
			r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "truth.fpx", "--online", url, "--mem", "64MiB", "--retries", "0", "--report", "r.json").Want(t, 2)
			if !strings.Contains(r.Stderr, c.want) || !strings.Contains(r.Stderr, "lie:{0}") {
				t.Fatalf("stderr %q, want %q and the key in it", r.Stderr, c.want)
			}
			if m := reconciletest.ReadReport(t, filepath.Join(dir, "r.json")).Memory; m.PeakRSS > 256<<20 {
				t.Fatalf("peak RSS %d MiB under --mem 64MiB", m.PeakRSS>>20)
			}
		})
	}
	_ = math.MaxInt
}
