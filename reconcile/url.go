package reconcile

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/fpdedup/fpdedup/reconcile/bitmapbloom"
	"github.com/fpdedup/fpdedup/reconcile/etcdkeys"
	"github.com/fpdedup/fpdedup/reconcile/exportfile"
	"github.com/fpdedup/fpdedup/reconcile/mysqltable"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisbloom"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/rediskeys"
)

// Kind is the kind of online source.
type Kind int

// The online source kinds.
const (
	RedisKeys  Kind = iota + 1 // redis://…?match=PREFIX*: keys PREFIX<hex>
	RedisSet                   // redis://…?set=KEY: members <hex> of a set
	MySQL                      // mysql://…?table=T&column=C
	File                       // file:PATH: one hex fingerprint (or key) per line
	RedisBloom                 // redis://…?bloom=TEMPLATE&shards=N&bits=M&k=K: the L2 sharded bloom
	RedisBF                    // redis://…?bf=TEMPLATE&shards=N&route=R&item=I: the L2 as RedisBloom (BF.*) filters
	Etcd                       // etcd://…/?prefix=P: keys P<hex> under an etcd prefix
)

func (k Kind) String() string {
	switch k {
	case RedisKeys:
		return "redis-keys"
	case RedisSet:
		return "redis-set"
	case MySQL:
		return "mysql"
	case File:
		return "file"
	case RedisBloom:
		return "redis-bloom"
	case RedisBF:
		return "redisbloom"
	case Etcd:
		return "etcd"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Target is a parsed online URL (ParseURL). It never holds a password: URLs with one
// are refused (they would be visible in ps and shell history).
type Target struct {
	Kind     Kind
	Redacted string // the URL as printed in messages and reports

	// Redis (RedisKeys, RedisSet, RedisBloom): the server or Cluster.
	Redis redisconn.Server
	// RedisKeys, RedisSet: which keys, how they are scanned and named.
	Keys rediskeys.Keys
	// RedisBloom: the shards' layout and the template of their keys.
	Bloom bitmapbloom.Spec
	// RedisBF: the filters' key template, router and item.
	BF redisbloom.Spec

	// MySQL: the fingerprint column of a table.
	MySQL mysqltable.Table

	// File.
	Path string

	// Etcd: the members, the prefix and its keys' width, TLS, the user.
	Etcd etcdkeys.Spec
}

// Environment variables that hold the online store's password.
const (
	RedisPasswordEnv = "FPDEDUP_REDIS_PASSWORD"
	MySQLPasswordEnv = "FPDEDUP_MYSQL_PASSWORD"
	EtcdPasswordEnv  = "FPDEDUP_ETCD_PASSWORD"
)

// PasswordEnv is the variable that holds the password for t.
func (t *Target) PasswordEnv() string {
	switch t.Kind {
	case RedisKeys, RedisSet, RedisBloom, RedisBF:
		return RedisPasswordEnv
	case MySQL:
		return MySQLPasswordEnv
	case Etcd:
		return EtcdPasswordEnv
	}
	return ""
}

// hostRE is a host:port printed as it is in a query.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9._:\[\]-]*$`)

// ParseURL reads the URL of an online side:
//
//	redis://[user@]host:port/db?match=PREFIX*[&count=N][&hex=32|64]
//	redis://[user@]host:port/db?set=KEY[&count=N][&hex=32|64]
//	redis://[user@]host1:port1,host2:port2/?match=PREFIX*   (Redis Cluster)
//	redis://[user@]host1:port1/?match=PREFIX*&addr=host2:port2&cluster=1
//	redis://[user@]host:port/db?bloom=l2:bf:{*}&shards=N&bits=M&k=K   (the L2 bloom)
//	redis://[user@]host:port/db?bf=l2:rb:{*}&shards=N&route=mod-md5&item=sha256   (RedisBloom filters)
//	redis://[user@]host:port/db?bf=l2:rb:{*}&route=ring&nodes=A,B,C&vnodes=100&item=key
//	mysql://user@host:port/db?table=T&column=C[&where=SQL][&count=0]
//	etcd://[user@]host:port[,host:port…]/?prefix=P[&hex=64|32][&page=N][&ca=FILE][&cert=FILE&key=FILE]
//	file:PATH
//
// A URL it refuses is a *URLError (ErrNoPath for "file:" alone), whose
// message never holds a password.
func ParseURL(s string) (*Target, error) {
	if path, ok := strings.CutPrefix(s, "file:"); ok {
		p, err := exportfile.ParsePath(path)
		if err != nil {
			return nil, err
		}
		return &Target{Kind: File, Path: p, Redacted: "file:" + p}, nil
	}
	u, hostList, err := splitURL(s)
	if err != nil {
		return nil, err
	}
	redacted := redactURL(u, hostList)
	if secretIn(u) {
		// Its query is not shown at all: a password split at a '&'
		// (addr=u:pw&rd@h) leaves a part of it in a value of ours.
		shown, _, cut := strings.Cut(redacted, "?")
		if cut {
			shown += "?…"
		}
		return nil, &URLError{URL: shown, PasswordEnv: map[string]string{"redis": RedisPasswordEnv, "mysql": MySQLPasswordEnv, "etcd": EtcdPasswordEnv}[u.Scheme]}
	}
	t := &Target{Redacted: redacted}
	if u.Fragment != "" {
		return nil, badURL(t, "a fragment (#…) means nothing in an online URL")
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		// u.Query() would drop the parameter: an addr= or a where= not
		// read, without a word.
		if strings.Contains(err.Error(), "semicolon") {
			return nil, badURL(t, "a ';' separates nothing in the query: write it %%3B in a value")
		}
		return nil, badURL(t, "a parameter does not decode: a %% must be followed by two hex digits")
	}
	q := online.NewParams(u.Query())
	switch u.Scheme {
	case "redis":
		err = parseRedisURL(t, u, hostList, q)
	case "mysql":
		t.Kind = MySQL
		t.MySQL, err = mysqltable.ParseTable(t.Redacted, u, q)
	case "etcd":
		t.Kind = Etcd
		t.Etcd, err = etcdkeys.ParseSpec(t.Redacted, u, hostList, q)
	default:
		return nil, &URLError{Reason: fmt.Sprintf("unknown scheme %q (want redis://, mysql://, etcd:// or file:)", u.Scheme)}
	}
	if err != nil {
		return nil, err
	}
	if k := q.Unknown(); k != "" {
		return nil, badURL(t, "unknown parameter %q", k)
	}
	return t, nil
}

// splitURL parses s, and returns a Redis Cluster's or an etcd cluster's
// host list apart: a list (h1:p1,h2,h3:p3) is not a host url.Parse
// accepts when a name before the last lacks its port, so the URL is
// parsed with seedsStandIn in its place.
func splitURL(s string) (u *url.URL, hostList string, err error) {
	for _, scheme := range []string{"redis://", "etcd://"} {
		rest, ok := strings.CutPrefix(s, scheme)
		if !ok {
			continue
		}
		auth := rest[:strings.IndexFunc(rest+"/", func(r rune) bool { return r == '/' || r == '?' || r == '#' })]
		at := strings.LastIndex(auth, "@")
		if hosts := auth[at+1:]; strings.Contains(hosts, ",") {
			hostList = hosts
			s = scheme + auth[:at+1] + seedsStandIn + rest[len(auth):]
		}
	}
	if u, err = url.Parse(s); err != nil || u.Opaque != "" {
		// url's errors quote the whole input, password included; and an
		// opaque URL (etcd::/…, redis:h) has no host, user or password
		// parsed apart, so nothing of it may be printed either.
		return nil, "", &URLError{Reason: "not a URL (want redis://, mysql://, etcd:// or file:)"}
	}
	return u, hostList, nil
}

func badURL(t *Target, format string, a ...any) error { return online.BadURL(t.Redacted, format, a...) }

func parseRedisURL(t *Target, u *url.URL, hostList string, q *online.Params) (err error) {
	if t.Redis, err = redisconn.ParseServer(t.Redacted, u, hostList, q); err != nil {
		return err
	}
	return redisKeys(t, q)
}

// redisKeys reads which keys hold the fingerprints, match=PREFIX*, set=KEY,
// bloom=TEMPLATE or bf=TEMPLATE, and the rest of their store's URL.
func redisKeys(t *Target, q *online.Params) (err error) {
	match, set, bloom, bf := q.Get("match"), q.Get("set"), q.Get("bloom"), q.Get("bf")
	given := 0
	for _, v := range []string{match, set, bloom, bf} {
		if v != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return badURL(t, "match=, set=, bloom= and bf= exclude each other")
	case match != "":
		t.Kind = RedisKeys
		t.Keys, err = rediskeys.ParseKeys(t.Redacted, match, "", q)
	case set != "":
		t.Kind = RedisSet
		t.Keys, err = rediskeys.ParseKeys(t.Redacted, "", set, q)
	case bloom != "":
		t.Kind = RedisBloom
		t.Bloom, err = bitmapbloom.ParseSpec(t.Redacted, bloom, q)
	case bf != "":
		t.Kind = RedisBF
		t.BF, err = redisbloom.ParseSpec(t.Redacted, bf, q)
	default:
		return badURL(t, "say which keys: ?match=PREFIX* (keys PREFIX<hex>), ?set=KEY (members of a set), ?bloom=TEMPLATE&shards=N&bits=M&k=K (the L2 bloom of plain bitmaps) or ?bf=TEMPLATE&shards=N&route=R&item=I (RedisBloom filters)")
	}
	return err
}

// urlParams are the parameters a URL may hold; any other is refused, and
// its value is never printed (it may be a password=).
var urlParams = map[string]bool{"match": true, "set": true, "count": true, "hex": true, "addr": true, "cluster": true, "table": true, "column": true, "where": true,
	"bloom": true, "shards": true, "bits": true, "k": true,
	"prefix": true, "page": true, "ca": true, "cert": true, "key": true,
	"bf": true, "route": true, "item": true, "nodes": true, "vnodes": true}

// redactURL is u as every message, report and figure prints it: the one
// redaction. A password in the user info is left out (and a user name
// holding a ':', a password whose ':' was percent-encoded, is left out
// whole), and so is a user info in an addr= parameter, its '@'
// percent-encoded or not; the value of a parameter that is not one of
// ours (password=, pw=, …) is replaced by xxxxx, as is one that does not
// decode.
func redactURL(u *url.URL, hostList string) string {
	r := *u
	if r.User != nil {
		if name := r.User.Username(); strings.Contains(name, ":") {
			r.User = nil
		} else {
			r.User = url.User(name)
		}
	}
	parts := strings.Split(r.RawQuery, "&")
	for i, part := range parts {
		k, v, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(k)
		switch {
		case err != nil || strings.Contains(name, "@"):
			parts[i] = "xxxxx=xxxxx" // an addr=u:pw&rd@h split at its '&'
			continue
		case !urlParams[name]:
			parts[i] = k + "=xxxxx"
			continue
		}
		if name != "addr" {
			continue
		}
		switch dv, err := url.QueryUnescape(v); {
		case err != nil:
			parts[i] = k + "=xxxxx"
		case strings.Contains(dv, "@"):
			host := dv[strings.LastIndex(dv, "@")+1:]
			if !hostRE.MatchString(host) {
				host = url.QueryEscape(host)
			}
			parts[i] = k + "=" + host
		}
	}
	if r.RawQuery != "" {
		r.RawQuery = strings.Join(parts, "&")
	}
	r.Fragment, r.RawFragment = "", ""
	return strings.Replace(r.String(), seedsStandIn, hostList, 1)
}

// secretIn reports a credential anywhere in u: a password in its user
// info (its ':' percent-encoded or not), a user info in an addr= (its '@'
// percent-encoded or not), a parameter that names one, or a parameter
// name holding an '@' (addr=u:pw&rd@h, split at the '&').
func secretIn(u *url.URL) bool {
	if _, has := u.User.Password(); has || strings.Contains(u.User.Username(), ":") {
		return true
	}
	for k, vs := range u.Query() {
		if strings.Contains(k, "@") {
			return true
		}
		switch strings.ToLower(k) {
		case "password", "pass", "passwd", "pw", "pwd", "secret", "token", "auth", "requirepass":
			return true
		case "addr":
			for _, v := range vs {
				if strings.Contains(v, "@") {
					return true
				}
			}
		}
	}
	return false
}

// seedsStandIn stands for a Redis Cluster's or an etcd cluster's host
// list while url.Parse reads the rest of the URL.
const seedsStandIn = "fpdedup-seeds.invalid"
