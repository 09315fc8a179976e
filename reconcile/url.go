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
	Addr string
	User string
	DB   int    // Redis database number
	Name string // MySQL database

	// Redis.
	Prefix    string // keys are Prefix + hex
	Set       string // the set's key
	ScanCount int    // SCAN/SSCAN COUNT
	HexDigits int    // 32 or 64 when given by hex=; 0: from what is read

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
//	mysql://user@host:port/db?table=T&column=C[&where=SQL][&count=0]
//	file:PATH
func ParseURL(s string) (*Target, error) {
	if strings.HasPrefix(s, "file:") {
		p := strings.TrimPrefix(s, "file:")
		if strings.HasPrefix(p, "//") {
			p = strings.TrimPrefix(p, "//")
		}
		if p == "" {
			return nil, fmt.Errorf("--online file:PATH needs a path")
		}
		return &Target{Kind: File, Path: p, Redacted: "file:" + p}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's errors quote the whole input, password included.
		return nil, fmt.Errorf("--online: not a URL (want redis://, mysql:// or file:)")
	}
	if _, has := u.User.Password(); has {
		return nil, fmt.Errorf("--online %s holds a password, which would be visible in ps and shell history: remove it and put it in $%s or a --password-file",
			u.Redacted(), map[string]string{"redis": RedisPasswordEnv, "mysql": MySQLPasswordEnv}[u.Scheme])
	}
	t := &Target{Redacted: u.String()}
	q := u.Query()
	known := map[string]bool{}
	get := func(k string) string { known[k] = true; return q.Get(k) }
	switch u.Scheme {
	case "redis":
		if strings.Contains(u.Host, ",") {
			return nil, fmt.Errorf("--online %s: several seed addresses (Redis Cluster) are not supported yet; reconcile each master, or use one node", t.Redacted)
		}
		t.Addr = hostPort(u.Host, "6379")
		t.User = u.User.Username()
		if db := strings.Trim(u.Path, "/"); db != "" {
			if t.DB, err = strconv.Atoi(db); err != nil || t.DB < 0 {
				return nil, fmt.Errorf("--online %s: the path is the database number, not %q", t.Redacted, db)
			}
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

func hostPort(host, defPort string) string {
	if host == "" {
		host = "127.0.0.1"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		return net.JoinHostPort(strings.Trim(host, "[]"), defPort)
	}
	return host
}
