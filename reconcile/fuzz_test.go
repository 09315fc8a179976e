package reconcile

import (
	"net"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseURL: any --online string is a Target or an error, never a
// panic; a password in it is refused (passwords come from the environment
// or a file), so none reaches the redacted form; a cluster has its first
// seed as Addr.
//
//	go test -run XXX -fuzz FuzzParseURL -fuzztime 60s ./reconcile
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6390/3?match=dd:*", "redis://audit@cache?set=seen&count=5000&hex=64",
		"redis://h1:1,h2:2/0?match=a*", "redis://h1:1?match=a*&addr=h2:2&addr=h3:3",
		"redis://h1:1/?match=a*&cluster=1", "redis://u:secret@h/0?match=a*",
		"mysql://u@db1:3307/d?table=other.t&column=c&where=c%20%3E%200&count=0",
		"mysql://u:pw@db/d?table=t&column=c", "file:/tmp/x.txt", "file:///x", "", "redis://", "redis://[::1]:1/0?match=*",
		"redis://h:1/0?bloom=l2:bf:{*}&shards=16&bits=2^33&k=3", "redis://h1:1,h2:2/?bloom=b*&shards=3&bits=1GiB&k=7",
		"etcd://127.0.0.1:2391/?prefix=/dedupe/sha256/", "etcd://u@e1:1,e2,e3:3/?prefix=d/&hex=32&page=5&ca=c&cert=a&key=b",
		"etcd://u:pw@e/?prefix=", "etcd://e1,u:pw@e2/?prefix=x",
		"redis://h:1/0?bf=l2:rb:{*}&shards=16&route=mod-md5&item=sha256", "redis://h1:1,h2:2/?bf=rb&route=all&item=fp",
		"redis://h:1/2?bf=l2:rb:{*}&route=ring&item=key&vnodes=100&nodes=a:1,b:2,c:3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseURL(s)
		if err != nil {
			if tg != nil {
				t.Fatalf("%q: an error (%v) and a target", s, err)
			}
			return
		}
		if tg.Kind == RedisBloom {
			// A bloom's layout is in bounds and its template names each
			// shard apart.
			if err := tg.Bloom.Check(); err != nil || strings.Count(string(tg.Bloom.Keys), "*") != 1 {
				t.Fatalf("%q: bloom %+v %q accepted (%v)", s, tg.Bloom.Layout, tg.Bloom.Keys, err)
			}
		}
		if tg.Kind == Etcd {
			// Every member is a host:port, and the keys have a width.
			if len(tg.Etcd.Endpoints) == 0 || tg.Etcd.Format.Check() != nil || tg.Etcd.Page < 1 {
				t.Fatalf("%q: etcd %+v accepted", s, tg.Etcd)
			}
			for _, e := range tg.Etcd.Endpoints {
				if _, _, err := net.SplitHostPort(e); err != nil {
					t.Fatalf("%q: member %q: %v", s, e, err)
				}
			}
		}
		if tg.Redis.Cluster && (len(tg.Redis.Seeds) == 0 || tg.Redis.Seeds[0] != tg.Redis.Addr) {
			t.Fatalf("%q: cluster seeds %v, Addr %q", s, tg.Redis.Seeds, tg.Redis.Addr)
		}
		if i := strings.Index(s, "://"); i >= 0 {
			userinfo, _, found := strings.Cut(s[i+3:], "@")
			if found && strings.Contains(userinfo, ":") && !strings.ContainsAny(userinfo, "/?#") {
				t.Fatalf("%q: a password in the URL was accepted", s)
			}
		}
	})
}

// FuzzURLPasswordNeverPrinted: a password written into an online URL in
// any of the places a URL takes one (the user info, an addr='s user info,
// a parameter), as it is or percent-encoded, is refused, and neither it
// nor any of its encoded forms is in the error.
//
//	go test -run XXX -fuzz FuzzURLPasswordNeverPrinted -fuzztime 60s ./reconcile
func FuzzURLPasswordNeverPrinted(f *testing.F) {
	for _, pw := range []string{"hunter2", "p@ss/w rd#1", "a:b@c", "%41%zz", "S3cr3tPW", "ünï©ode"} {
		f.Add(pw)
	}
	urls := []func(pw string) string{
		func(pw string) string { return "redis://" + url.UserPassword("u", pw).String() + "@h:1/0?match=a*" },
		func(pw string) string { return "redis://u%3A" + url.QueryEscape(pw) + "@h:1/0?match=a*" },
		func(pw string) string { return "redis://h1:1/?match=a*&addr=%3A" + url.QueryEscape(pw) + "%40h2:2" },
		func(pw string) string {
			return "redis://h1:1/?match=a*&addr=u%3A" + url.QueryEscape(pw) + "%40h2:2&cluster=1"
		},
		func(pw string) string { return "redis://h1:1/?match=a*&addr=u:" + url.QueryEscape(pw) + "@h2:2" },
		func(pw string) string { return "redis://h1:1/0?match=a*&password=" + url.QueryEscape(pw) },
		func(pw string) string {
			return "redis://h1:1," + url.UserPassword("u", pw).String() + "@h2:2/?match=a*"
		},
		func(pw string) string {
			return "mysql://" + url.UserPassword("u", pw).String() + "@h:1/d?table=t&column=c"
		},
		func(pw string) string { return "mysql://u%3A" + url.QueryEscape(pw) + "@h:1/d?table=t&column=c" },
		func(pw string) string { return "etcd://" + url.UserPassword("u", pw).String() + "@h:1/?prefix=p/" },
		func(pw string) string {
			return "etcd://h1:1," + url.UserPassword("u", pw).String() + "@h2:2/?prefix=p/"
		},
		func(pw string) string { return "etcd://h:1/?prefix=p/&pw=" + url.QueryEscape(pw) },
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 4 || strings.ContainsAny(pw, "\x00\r\n") {
			return
		}
		for _, mk := range urls {
			s := mk(pw)
			// The same URL with another password: what its error says
			// whatever the password (the URL's own text, the xxxxx).
			_, base := ParseURL(mk("Qz7Qz7Qz"))
			if base == nil || strings.Contains(base.Error(), pw) {
				continue
			}
			tg, err := ParseURL(s)
			if err == nil {
				t.Fatalf("%q: a password in the URL was accepted (%+v)", s, tg)
			}
			for _, form := range passwordForms(pw) {
				if strings.Contains(err.Error(), form) {
					t.Fatalf("%q: the error shows the password as %q: %v", s, form, err)
				}
			}
		}
	})
}
