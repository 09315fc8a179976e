package etcdkeys

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Spec is what an etcd:// URL names: the members, the keys under a prefix
// and how they are spelled, the TLS files and the user (the password comes
// from elsewhere: online.Config.Password).
type Spec struct {
	Endpoints []string
	Format    etcdkv.KeyFormat
	User      string
	// CAFile verifies the members' certificates; CertFile and KeyFile are
	// the client's. Any of them makes the connections TLS.
	CAFile, CertFile, KeyFile string
	// Page is the most keys one Range asks for (page=, default 10000).
	Page int
}

// DefaultPort is etcd's client port, for a host named without one.
const DefaultPort = "2379"

// DefaultPage is the scan's page size: etcdctl's --limit is unbounded by
// default, but a page of 10^4 keys is already past where pages cost more
// than the keys in them (bench/etcd.sh).
const DefaultPage = 10000

// ParseSpec reads an etcd URL, printed as redacted:
//
//	etcd://[user@]host:port[,host:port…]/?prefix=P[&hex=64|32][&page=N][&ca=FILE][&cert=FILE&key=FILE]
//
// hostList is the member list when it has several (url.Parse is given a
// stand-in for it); otherwise u's host is the one member.
func ParseSpec(redacted string, u *url.URL, hostList string, q *online.Params) (Spec, error) {
	var s Spec
	hosts := u.Host
	if hostList != "" {
		hosts = hostList
	}
	for _, h := range strings.Split(hosts, ",") {
		if strings.TrimSpace(h) == "" && hosts != "" {
			return s, online.BadURL(redacted, "an empty member in the host list")
		}
		e := online.HostPort(h, DefaultPort)
		if _, _, err := net.SplitHostPort(e); err != nil {
			return s, online.BadURL(redacted, "member %q is not a host:port (%v)", h, err)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	if u.User != nil {
		s.User = u.User.Username()
	}
	if u.Path != "" && u.Path != "/" {
		return s, online.BadURL(redacted, "an etcd URL has no path (%q): the keys are named by ?prefix=", u.Path)
	}
	prefix := q.All("prefix")
	switch len(prefix) {
	case 0:
		return s, online.BadURL(redacted, "say which keys: ?prefix=P (keys P<hex of SHA-256>, such as prefix=/dedupe/sha256/); prefix= alone is the whole key space")
	case 1:
		s.Format.Prefix = prefix[0]
	default:
		return s, online.BadURL(redacted, "prefix= is given %d times", len(prefix))
	}
	switch h := q.Get("hex"); h {
	case "", "64":
		s.Format.Hex = etcdkv.Hex64
	case "32":
		s.Format.Hex = etcdkv.Hex32
	default:
		return s, online.BadURL(redacted, "hex= must be 64 (the whole SHA-256, the default) or 32 (its first 128 bits), not %q", h)
	}
	s.Page = DefaultPage
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return s, online.BadURL(redacted, "page= must be a positive number of keys, not %q", p)
		}
		s.Page = n
	}
	s.CAFile, s.CertFile, s.KeyFile = q.Get("ca"), q.Get("cert"), q.Get("key")
	if (s.CertFile == "") != (s.KeyFile == "") {
		return s, online.BadURL(redacted, "a client certificate needs both cert= and key= (its key file)")
	}
	return s, nil
}

// Files are the files the URL names (TLS), for a caller that checks its
// outputs against its inputs.
func (s Spec) Files() []string {
	var fs []string
	for _, f := range []string{s.CAFile, s.CertFile, s.KeyFile} {
		if f != "" {
			fs = append(fs, f)
		}
	}
	return fs
}
