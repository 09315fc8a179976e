package reconcile

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/reconcile/bitmapbloom"
	"github.com/fpdedup/fpdedup/reconcile/etcdkeys"
	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
	"github.com/fpdedup/fpdedup/reconcile/mysqltable"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/rediskeys"
)

func TestParseURL(t *testing.T) {
	ok := []struct {
		in   string
		want Target
	}{
		{"redis://127.0.0.1:6390/3?match=dd:*", Target{Kind: RedisKeys, Redis: redisconn.Server{Addr: "127.0.0.1:6390", DB: 3}, Keys: rediskeys.Keys{Prefix: "dd:", ScanCount: 1000}}},
		{"redis://audit@cache?set=seen&count=5000&hex=64", Target{Kind: RedisSet, Redis: redisconn.Server{Addr: "cache:6379", User: "audit"}, Keys: rediskeys.Keys{Set: "seen", ScanCount: 5000, HexDigits: 64}}},
		{"redis://h:1/0?match=*", Target{Kind: RedisKeys, Redis: redisconn.Server{Addr: "h:1"}, Keys: rediskeys.Keys{ScanCount: 1000}}},
		{"mysql://u@db1/dedup?table=events&column=fp", Target{Kind: MySQL, MySQL: mysqltable.Table{Addr: "db1:3306", User: "u", Name: "dedup", Table: "events", Column: "fp", Count: CountAuto}}},
		{"mysql://u@db1:3307/d?table=other.t&column=c&where=c%20%3E%200&count=0", Target{Kind: MySQL, MySQL: mysqltable.Table{Addr: "db1:3307", User: "u", Name: "d", Table: "other.t", Column: "c", Where: "c > 0", Count: CountNever}}},
		{"file:/tmp/x.txt", Target{Kind: File, Path: "/tmp/x.txt"}},
		{"file:///tmp/x.txt", Target{Kind: File, Path: "/tmp/x.txt"}},
		{"file:rel.txt.gz", Target{Kind: File, Path: "rel.txt.gz"}},
		{"redis://h1:1,h2:2/0?match=a*", Target{Kind: RedisKeys, Redis: redisconn.Server{Addr: "h1:1", Seeds: []string{"h1:1", "h2:2"}, Cluster: true}, Keys: rediskeys.Keys{Prefix: "a", ScanCount: 1000}}},
		{"redis://audit@h1:1,h2?set=s", Target{Kind: RedisSet, Redis: redisconn.Server{Addr: "h1:1", User: "audit", Seeds: []string{"h1:1", "h2:6379"}, Cluster: true}, Keys: rediskeys.Keys{Set: "s", ScanCount: 1000}}},
		{"redis://h1:1?match=a*&addr=h2:2&addr=h3:3", Target{Kind: RedisKeys, Redis: redisconn.Server{Addr: "h1:1", Seeds: []string{"h1:1", "h2:2", "h3:3"}, Cluster: true}, Keys: rediskeys.Keys{Prefix: "a", ScanCount: 1000}}},
		{"redis://h1:1/?match=a*&cluster=1", Target{Kind: RedisKeys, Redis: redisconn.Server{Addr: "h1:1", Seeds: []string{"h1:1"}, Cluster: true}, Keys: rediskeys.Keys{Prefix: "a", ScanCount: 1000}}},
		{"redis://h1:1/2?match=a*&cluster=0", Target{Kind: RedisKeys, Redis: redisconn.Server{Addr: "h1:1", DB: 2}, Keys: rediskeys.Keys{Prefix: "a", ScanCount: 1000}}},
		{"redis://h:1/0?bloom=l2:bf:{*}&shards=16&bits=2^33&k=3", Target{Kind: RedisBloom, Redis: redisconn.Server{Addr: "h:1"}, Bloom: bitmapbloom.Spec{Keys: "l2:bf:{*}", Layout: l2bloom.Layout{Shards: 16, Bits: 1 << 33, K: 3}}}},
		{"redis://h1:1,h2:2/?bloom=bf*&shards=3&bits=1GiB&k=7", Target{Kind: RedisBloom, Redis: redisconn.Server{Addr: "h1:1", Seeds: []string{"h1:1", "h2:2"}, Cluster: true}, Bloom: bitmapbloom.Spec{Keys: "bf*", Layout: l2bloom.Layout{Shards: 3, Bits: 8 << 30, K: 7}}}},
		{"etcd://127.0.0.1:2391/?prefix=/dedupe/sha256/", Target{Kind: Etcd, Etcd: etcdkeys.Spec{Endpoints: []string{"127.0.0.1:2391"}, Format: etcdkv.KeyFormat{Prefix: "/dedupe/sha256/", Hex: 64}, Page: etcdkeys.DefaultPage}}},
		{"etcd://audit@e1:1,e2,[::1]:3?prefix=d/&hex=32&page=500", Target{Kind: Etcd, Etcd: etcdkeys.Spec{Endpoints: []string{"e1:1", "e2:2379", "[::1]:3"}, User: "audit", Format: etcdkv.KeyFormat{Prefix: "d/", Hex: 32}, Page: 500}}},
		{"etcd://e:2379/?prefix=&hex=64&ca=/etc/ca.pem&cert=c.pem&key=k.pem", Target{Kind: Etcd, Etcd: etcdkeys.Spec{Endpoints: []string{"e:2379"}, Format: etcdkv.KeyFormat{Hex: 64}, Page: etcdkeys.DefaultPage, CAFile: "/etc/ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}}},
	}
	for _, c := range ok {
		got, err := ParseURL(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		// Every parameter of ours is printed as it is: only a value that
		// is not ours (a password=) is replaced.
		if strings.Contains(got.Redacted, "xxxxx") {
			t.Errorf("%s is printed %s", c.in, got.Redacted)
		}
		got.Redacted = ""
		if !reflect.DeepEqual(*got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.in, *got, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"redis://u:hunter2@h/0?match=a*", "holds a password"},
		{"mysql://u:hunter2@h/d?table=t&column=c", "FPDEDUP_MYSQL_PASSWORD"},
		{"redis://h/0", "say which keys"},
		{"redis://h/0?match=a*b*", "literal prefix"},
		{"redis://h/0?match=abc", "literal prefix"},
		{"redis://h/0?match=a*&set=s", "exclude each other"},
		{"redis://h/0?set=s&bloom=b*&shards=1&bits=8&k=1", "exclude each other"},
		{"redis://h/0?bloom=b&shards=1&bits=8&k=1", "exactly one '*'"},
		{"redis://h/0?bloom=b*&shards=1&bits=8", "needs its layout"},
		{"redis://h/0?bloom=b*&shards=0&bits=8&k=1", "shards=0: want 1 to"},
		{"redis://h/0?bloom=b*&shards=2&bits=2^44&k=1", "want 2^0 to 2^43"},
		{"redis://h/0?bloom=b*&shards=2&bits=8&k=33", "k=33: want 1 to 32"},
		{"redis://h/0?bloom=b*&shards=2&bits=8&k=1&hex=32", `unknown parameter "hex"`},
		{"redis://h1:1,h2:2/3?match=a*", "only database 0"},
		{"redis://h1:1?match=a*&addr=h2:2&cluster=0", "contradicts"},
		{"redis://u:hunter2@h1,h2:2/0?match=a*", "holds a password"},
		{"redis://h1:1?match=a*&cluster=maybe", "cluster= must be"},
		{"redis://h1:1,,h2:2?match=a*", "empty address"},
		{"redis://h/x?match=a*", "database number"},
		{"redis://h/0?match=a*&hex=40", "hex="},
		{"redis://h/0?match=a*&cnt=4", `unknown parameter "cnt"`},
		{"mysql://u@h/d?table=t%3Bdrop&column=c", "plain identifiers"},
		{"mysql://u@h/d?table=t;drop&column=c", "write it %3B"},
		{"mysql://u@h/d?table=t&column=c&where=a=1;b=2", "write it %3B"},
		{"mysql://h/d?table=t&column=c", "mysql://user@"},
		{"postgres://u@h/d", "unknown scheme"},
		{"file:", "needs a path"},
		{"file:://u:hunter2@h/x", "not another URL"},
		{"file:redis://u:hunter2@h/0", "not another URL"},
		{"redis://h1:1/?match=a*&addr=%3Ahunter2%40h2:2", "holds a password"},
		{"redis://h1:1/?match=a*&%61ddr=u%3Ahunter2%40h2:2", "holds a password"},
		{"redis://u%3Ahunter2@h/0?match=a*", "holds a password"},
		{"mysql://u%3Ahunter2@h/d?table=t&column=c", "holds a password"},
		{"redis://h1:1/?match=a*&addr=%zzhunter2", "does not decode"},
		{"redis://h1:1/?match=a*&addr=u:hun&ter2@h2:2", "redis://h1:1/?… holds a password"},
		{"redis://h1:1/?match=a*;addr=h2:2", "write it %3B"},
		{"etcd://h:1/", "say which keys: ?prefix=P"},
		{"etcd://h:1/?prefix=a&prefix=b", "prefix= is given 2 times"},
		{"etcd://h:1/?prefix=a&hex=40", `hex= must be 64`},
		{"etcd://h:1/?prefix=a&page=-1", "page= must be a positive number"},
		{"etcd://h:1/?prefix=a&cert=c.pem", "needs both cert= and key="},
		{"etcd://h:1/?prefix=a&key=k.pem", "needs both cert= and key="},
		{"etcd://h:1/db?prefix=a", "has no path"},
		{"etcd://h:1,,h:2/?prefix=a", "an empty member"},
		{"etcd://h:1/?prefix=a&match=b*", `unknown parameter "match"`},
		{"etcd://u:hunter2@h:1/?prefix=a", "FPDEDUP_ETCD_PASSWORD"},
		{"etcd://h:1/?prefix=a&password=hunter2", "holds a password"},
		{"etcd://h1:1,u:hunter2@h2:2/?prefix=a", "holds a password"},
	}
	for _, c := range bad {
		_, err := ParseURL(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want one saying %q", c.in, err, c.msg)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error shows the password: %v", c.in, err)
		}
	}
}

func TestScrub(t *testing.T) {
	base := errors.New("dial mysql://u@h/d?table=t: access denied for pw=hunter2")
	err := Scrub(base, "hunter2", "")
	if strings.Contains(err.Error(), "hunter2") || !errors.Is(err, base) {
		t.Fatalf("%v", err)
	}
	// Its percent-encoded forms too (as a URL's user info, path or query
	// holds it).
	const pw = "p@ss/w rd#1"
	base = fmt.Errorf("dial redis://u:%s@h/0?x=%s&y=%s: refused (%s)", url.PathEscape(pw), url.QueryEscape(pw), url.UserPassword("u", pw).String(), pw)
	if msg := Scrub(base, pw, "").Error(); strings.Contains(msg, pw) || strings.Contains(msg, url.PathEscape(pw)) ||
		strings.Contains(msg, url.QueryEscape(pw)) || strings.Contains(msg, "p%40ss") || !strings.Contains(msg, "*****") {
		t.Fatalf("%s", msg)
	}
	// A password that happens to occur in the redacted URL leaves the URL be.
	url := "mysql://fpdedup@h:3306/fpdedup?table=t&column=c"
	err = Scrub(errors.New("cannot reach "+url+": Error 1045: Access denied for user 'fpdedup'"), "fpdedup", url)
	if err.Error() != "cannot reach "+url+": Error 1045: Access denied for user '*****'" {
		t.Fatalf("%v", err)
	}
}
