package etcdkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// items are n compare-and-create items under f, values from the template.
func items(t testing.TB, f KeyFormat, from, n int) []Item {
	t.Helper()
	tp, err := ParseTemplate(`{"obj":"bkt1:$user_id","ts":$timestamp_ms}`)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Item, 0, n)
	for i := from; i < from+n; i++ {
		d := digest(i)
		v, err := tp.Render(nil, func(name string) ([]byte, bool) {
			switch name {
			case "user_id":
				return fmt.Appendf(nil, "u%d", i), true
			case "timestamp_ms":
				return fmt.Appendf(nil, "%d", 1714579200000+i), true
			}
			return nil, false
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Item{Key: f.Append(nil, d[:]), Value: v})
	}
	return out
}

func keysOf(its []Item) [][]byte {
	ks := make([][]byte, len(its))
	for i, it := range its {
		ks[i] = it.Key
	}
	return ks
}

// Create writes only what is missing, never overwrites, and a rerun is a
// no-op; Get reads back what was written.
func TestCreate(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{Prefix: testPrefix(t, rc)}
	all := items(t, f, 0, 1000)
	// A third exists already, with other values.
	pre := map[string]string{}
	for i := 0; i < len(all); i += 3 {
		pre[string(all[i].Key)] = "online"
	}
	putAll(t, rc, pre)
	c := dial(t, eps, f.Prefix, func(o *Options) { o.MaxTxnOps = 50 })
	ctx := context.Background()
	created := make([]bool, len(all))
	st, err := c.Create(ctx, all, created)
	if err != nil {
		t.Fatal(err)
	}
	if st.Created != len(all)-len(pre) || st.Existed != len(pre) || st.Txns != 40 || st.Ambiguous != 0 {
		t.Fatalf("stats %+v", st)
	}
	got := make([]KV, len(all))
	if err := c.Get(ctx, keysOf(all), got); err != nil {
		t.Fatal(err)
	}
	for i, kv := range got {
		_, existed := pre[string(all[i].Key)]
		switch {
		case created[i] == existed:
			t.Fatalf("key %d: created %v, existed %v", i, created[i], existed)
		case !kv.Found || kv.Version != 1:
			t.Fatalf("key %d: %+v", i, kv)
		case existed && string(kv.Value) != "online", !existed && !bytes.Equal(kv.Value, all[i].Value):
			t.Fatalf("key %d: value %q", i, kv.Value)
		}
	}
	// A rerun writes nothing.
	st, err = c.Create(ctx, all, created)
	if err != nil || st.Created != 0 || st.Existed != len(all) {
		t.Fatalf("rerun: %+v %v", st, err)
	}
	if err := c.Get(ctx, keysOf(all), got); err != nil {
		t.Fatal(err)
	}
	for i, kv := range got {
		if kv.Version != 1 {
			t.Fatalf("key %d written twice: %+v", i, kv)
		}
	}
	// Absent keys read back as not found.
	miss := items(t, f, 5000, 3)
	if err := c.Get(ctx, keysOf(miss), got[:3]); err != nil || got[0].Found || got[2].Found {
		t.Fatalf("absent keys: %+v %v", got[:3], err)
	}
}

// Batches are split by bytes; a key named twice or too large for one
// request is refused before anything is written.
func TestCreateLimits(t *testing.T) {
	eps := single(t)
	rc := raw(t, eps)
	f := KeyFormat{Prefix: testPrefix(t, rc)}
	c := dial(t, eps, f.Prefix, nil)
	ctx := context.Background()
	big := bytes.Repeat([]byte("v"), 1<<20)
	its := items(t, f, 0, 4)
	for i := range its {
		its[i].Value = big
	}
	st, err := c.Create(ctx, its, nil)
	if err != nil || st.Created != 4 || st.Txns != 4 {
		t.Fatalf("1 MiB values: %+v %v", st, err)
	}
	got := make([]KV, 4)
	if err := c.Get(ctx, keysOf(its), got); err != nil || !bytes.Equal(got[3].Value, big) {
		t.Fatalf("read back of 1 MiB values: %v", err)
	}
	dup := items(t, f, 10, 3)
	dup[2] = dup[0]
	if _, err := c.Create(ctx, dup, nil); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a key twice: %v", err)
	}
	huge := []Item{{Key: []byte(f.Prefix + "x"), Value: bytes.Repeat([]byte("v"), 2<<20)}}
	var ke *KeyError
	if _, err := c.Create(ctx, huge, nil); !errors.Is(err, ErrTooLarge) || !errors.As(err, &ke) || ke.Len != len(f.Prefix)+1 {
		t.Fatalf("2 MiB value: %v", err)
	}
	// Over the server's limit but not the client's: the server's refusal,
	// named as such.
	c2 := dial(t, eps, f.Prefix, func(o *Options) { o.MaxRequestBytes = 4 << 20 })
	if _, err := c2.Create(ctx, huge, nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2 MiB value, the server's limit: %v", err)
	}
	if r, _ := rc.Get(ctx, f.Prefix, withPrefix()...); r.Count != 4 {
		t.Fatalf("%d keys after refused writes", r.Count)
	}
}

// An endpoint that is not etcd (answers garbage, or accepts and never
// answers, or refuses) is a *DialError within the timeout, never a hang.
func TestDialHostile(t *testing.T) {
	garbage := listen(t, func(c net.Conn) {
		c.Write(bytes.Repeat([]byte("HTTP/1.1 200 OK\r\n\r\ngarbage\x00\xff"), 100))
		time.Sleep(time.Second)
		c.Close()
	})
	silent := listen(t, func(c net.Conn) {
		time.Sleep(time.Minute)
		c.Close()
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		name string
		eps  []string
		opts Options
	}{
		{"garbage", []string{garbage}, Options{}},
		{"silent", []string{silent}, Options{}},
		{"closed port", []string{closed}, Options{}},
		{"silent with a user", []string{silent}, Options{Username: "root", Password: "Sekrit-pw-9"}},
		{"garbage and silent", []string{garbage, silent}, Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Endpoints, o.Timeout = tc.eps, 2*time.Second
			done := make(chan error, 1)
			go func() {
				c, err := Dial(context.Background(), o)
				if c != nil {
					c.Close()
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute): // a hang, not a slow machine
				t.Fatal("Dial hung")
			}
			var de *DialError
			if !errors.As(err, &de) || !errors.Is(err, ErrUnreachable) || strings.Join(de.Endpoints, ",") != strings.Join(tc.eps, ",") {
				t.Fatalf("%v (%T)", err, err)
			}
			if strings.Contains(err.Error(), "Sekrit") || strings.Contains(fmt.Sprintf("%v %+v %#v", o, o, o), "Sekrit") {
				t.Fatalf("the password shows: %v / %v", err, o)
			}
			t.Log(err)
		})
	}
}

// listen serves each connection with serve until the test ends.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return l.Addr().String()
}
