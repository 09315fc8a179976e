package reconcile

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Kind is the kind of online source.
type Kind int

// The online source kinds.
const (
	RedisKeys Kind = iota + 1 // redis://…?match=PREFIX*: keys PREFIX<hex>
	RedisSet                  // redis://…?set=KEY: members <hex> of a set
	MySQL                     // mysql://…?table=T&column=C
	File                      // file:PATH: one hex fingerprint (or key) per line
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
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Target is a parsed --online URL. It never holds a password: URLs with one
// are refused (they would be visible in ps and shell history).
type Target struct {
	Kind     Kind
	Redacted string // the URL as printed in messages and reports

	// Redis and MySQL.
	Addr string // the (first) server
	User string
	DB   int    // Redis database number
	Name string // MySQL database

	// Redis.
	Seeds     []string // Redis Cluster: the seed addresses (Addr is the first)
	Cluster   bool     // a Redis Cluster, read and written through its masters
	Prefix    string   // keys are Prefix + hex
	Set       string   // the set's key
	ScanCount int      // SCAN/SSCAN COUNT
	HexDigits int      // 32 or 64 when given by hex=; 0: from what is read

	// MySQL.
	Table, Column, Where string
	Count                CountMode

	// File.
	Path string
}

// CountMode says when a MySQL read is checked against COUNT(*).
type CountMode int

// The count modes (&count=auto|1|0).
const (
	CountAuto   CountMode = iota // when the table is small enough for it to be cheap
	CountAlways                  // always
	CountNever                   // never
)

// countAutoMax is the largest table (by the server's row estimate) that
// CountAuto counts. Measured here: COUNT(*) of a 9.1M-row BINARY(16)
// table larger than the buffer pool cost 60% of the streamed read itself
// (20.1 s against 12.7 s), of 900k rows 0.1 s (20%).
const countAutoMax = 2_000_000

// Environment variables that hold the online store's password.
const (
	RedisPasswordEnv = "FPDEDUP_REDIS_PASSWORD"
	MySQLPasswordEnv = "FPDEDUP_MYSQL_PASSWORD"
)

// PasswordEnv is the variable that holds the password for t.
func (t *Target) PasswordEnv() string {
	switch t.Kind {
	case RedisKeys, RedisSet:
		return RedisPasswordEnv
	case MySQL:
		return MySQLPasswordEnv
	}
	return ""
}

var identRE = regexp.MustCompile(`^[A-Za-z0-9_$]+(\.[A-Za-z0-9_$]+)?$`)

// ParseURL reads an --online URL:
//
//	redis://[user@]host:port/db?match=PREFIX*[&count=N][&hex=32|64]
//	redis://[user@]host:port/db?set=KEY[&count=N][&hex=32|64]
//	redis://[user@]host1:port1,host2:port2/?match=PREFIX*   (Redis Cluster)
//	redis://[user@]host1:port1/?match=PREFIX*&addr=host2:port2&cluster=1
//	mysql://user@host:port/db?table=T&column=C[&where=SQL][&count=0]
//	file:PATH
func ParseURL(s string) (*Target, error) {
	if strings.HasPrefix(s, "file:") {
		p := strings.TrimPrefix(strings.TrimPrefix(s, "file:"), "//")
		if p == "" {
			return nil, fmt.Errorf("--online file:PATH needs a path")
		}
		return &Target{Kind: File, Path: p, Redacted: "file:" + p}, nil
	}
	// A host list (h1:p1,h2,h3:p3) is not a host url.Parse accepts when a
	// name before the last lacks its port: parse with a stand-in host.
	hostList := ""
	if rest, ok := strings.CutPrefix(s, "redis://"); ok {
		auth := rest[:strings.IndexFunc(rest+"/", func(r rune) bool { return r == '/' || r == '?' || r == '#' })]
		at := strings.LastIndex(auth, "@")
		if hosts := auth[at+1:]; strings.Contains(hosts, ",") {
			hostList = hosts
			s = "redis://" + auth[:at+1] + seedsStandIn + rest[len(auth):]
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's errors quote the whole input, password included.
		return nil, fmt.Errorf("--online: not a URL (want redis://, mysql:// or file:)")
	}
	withHosts := func(s string) string { return strings.Replace(s, seedsStandIn, hostList, 1) }
	if _, has := u.User.Password(); has {
		return nil, fmt.Errorf("--online %s holds a password, which would be visible in ps and shell history: remove it and put it in $%s or a --password-file",
			withHosts(u.Redacted()), map[string]string{"redis": RedisPasswordEnv, "mysql": MySQLPasswordEnv}[u.Scheme])
	}
	t := &Target{Redacted: withHosts(u.String())}
	q := u.Query()
	known := map[string]bool{}
	get := func(k string) string { known[k] = true; return q.Get(k) }
	switch u.Scheme {
	case "redis":
		// Several seed addresses, listed in the host or (as go-redis's
		// ParseClusterURL reads them) in addr= parameters, name a Redis
		// Cluster; cluster=1 says so of a single seed.
		hosts := u.Host
		if hostList != "" {
			hosts = hostList
		}
		for _, h := range strings.Split(hosts, ",") {
			if h == "" {
				return nil, fmt.Errorf("--online %s: an empty address in the host list", t.Redacted)
			}
			t.Seeds = append(t.Seeds, hostPort(h, "6379"))
		}
		known["addr"] = true
		for _, a := range q["addr"] {
			if a == "" {
				return nil, fmt.Errorf("--online %s: addr= needs host:port", t.Redacted)
			}
			t.Seeds = append(t.Seeds, hostPort(a, "6379"))
		}
		switch c := get("cluster"); c {
		case "":
			t.Cluster = len(t.Seeds) > 1
		case "1", "true", "yes":
			t.Cluster = true
		case "0", "false", "no":
			if len(t.Seeds) > 1 {
				return nil, fmt.Errorf("--online %s: several addresses are the seeds of a Redis Cluster; cluster=0 contradicts them", t.Redacted)
			}
		default:
			return nil, fmt.Errorf("--online %s: cluster= must be 1 or 0", t.Redacted)
		}
		t.Addr = t.Seeds[0]
		if !t.Cluster {
			t.Seeds = nil
		}
		t.User = u.User.Username()
		if db := strings.Trim(u.Path, "/"); db != "" {
			if t.DB, err = strconv.Atoi(db); err != nil || t.DB < 0 {
				return nil, fmt.Errorf("--online %s: the path is the database number, not %q", t.Redacted, db)
			}
		}
		if t.Cluster && t.DB != 0 {
			return nil, fmt.Errorf("--online %s: a Redis Cluster has only database 0", t.Redacted)
		}
		match, set := get("match"), get("set")
		switch {
		case match != "" && set != "":
			return nil, fmt.Errorf("--online %s: match= and set= exclude each other", t.Redacted)
		case match != "":
			if !strings.HasSuffix(match, "*") || strings.ContainsAny(match[:len(match)-1], `*?[]\`) {
				return nil, fmt.Errorf("--online %s: match= must be a literal prefix followed by one *, like match=dedup:*", t.Redacted)
			}
			t.Kind, t.Prefix = RedisKeys, match[:len(match)-1]
		case set != "":
			t.Kind, t.Set = RedisSet, set
		default:
			return nil, fmt.Errorf("--online %s: say which keys: ?match=PREFIX* (keys PREFIX<hex>) or ?set=KEY (members of a set)", t.Redacted)
		}
		t.ScanCount = 1000
		if c := get("count"); c != "" {
			if t.ScanCount, err = strconv.Atoi(c); err != nil || t.ScanCount < 1 {
				return nil, fmt.Errorf("--online %s: count= must be a positive number", t.Redacted)
			}
		}
		switch h := get("hex"); h {
		case "":
		case "32", "64":
			t.HexDigits, _ = strconv.Atoi(h)
		default:
			return nil, fmt.Errorf("--online %s: hex= must be 32 or 64", t.Redacted)
		}
	case "mysql":
		t.Kind = MySQL
		t.Addr = hostPort(u.Host, "3306")
		t.User = u.User.Username()
		t.Name = strings.Trim(u.Path, "/")
		if t.User == "" || t.Name == "" {
			return nil, fmt.Errorf("--online %s: want mysql://user@host:port/database?table=T&column=C", t.Redacted)
		}
		t.Table, t.Column, t.Where = get("table"), get("column"), get("where")
		if !identRE.MatchString(t.Table) || !identRE.MatchString(t.Column) || strings.Contains(t.Column, ".") {
			return nil, fmt.Errorf("--online %s: table= and column= must be plain identifiers ([A-Za-z0-9_$], table may be db.table)", t.Redacted)
		}
		switch c := get("count"); c {
		case "", "auto":
			t.Count = CountAuto
		case "1", "true":
			t.Count = CountAlways
		case "0", "false":
			t.Count = CountNever
		default:
			return nil, fmt.Errorf("--online %s: count= must be auto, 1 or 0", t.Redacted)
		}
	default:
		return nil, fmt.Errorf("--online: unknown scheme %q (want redis://, mysql:// or file:)", u.Scheme)
	}
	for k := range q {
		if !known[k] {
			return nil, fmt.Errorf("--online %s: unknown parameter %q", t.Redacted, k)
		}
	}
	return t, nil
}

// seedsStandIn stands for a Redis Cluster's host list while url.Parse
// reads the rest of the URL.
const seedsStandIn = "fpdedup-seeds.invalid"

func hostPort(host, defPort string) string {
	if host == "" {
		host = "127.0.0.1"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		return net.JoinHostPort(strings.Trim(host, "[]"), defPort)
	}
	return host
}
