package redisconn

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Server is the Redis server, or the Redis Cluster, a redis:// URL names.
type Server struct {
	Addr    string   // the (first) server
	User    string   // "": the default user
	DB      int      // the database number
	Seeds   []string // Redis Cluster: the seed addresses (Addr is the first)
	Cluster bool     // a Redis Cluster, read and written through its masters
}

// ParseServer reads the server of a redis:// URL, u, printed as redacted:
// the host, or hostList (a Cluster's host list, which url.Parse does not
// take, given apart), and the addr= and cluster= parameters; the user; the
// database number (the path).
func ParseServer(redacted string, u *url.URL, hostList string, q *online.Params) (Server, error) {
	var s Server
	if err := s.seeds(redacted, u, hostList, q); err != nil {
		return s, err
	}
	s.User = u.User.Username()
	if db := strings.Trim(u.Path, "/"); db != "" {
		var err error
		if s.DB, err = strconv.Atoi(db); err != nil || s.DB < 0 {
			return s, online.BadURL(redacted, "the path is the database number, not %q", db)
		}
	}
	if s.Cluster && s.DB != 0 {
		return s, online.BadURL(redacted, "a Redis Cluster has only database 0")
	}
	return s, nil
}

// seeds reads the server's address or a Redis Cluster's seeds: several
// addresses, listed in the host or (as go-redis's ParseClusterURL reads
// them) in addr= parameters, name a Redis Cluster; cluster=1 says so of a
// single seed.
func (s *Server) seeds(redacted string, u *url.URL, hostList string, q *online.Params) error {
	hosts := u.Host
	if hostList != "" {
		hosts = hostList
	}
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return online.BadURL(redacted, "an empty address in the host list")
		}
		s.Seeds = append(s.Seeds, online.HostPort(h, "6379"))
	}
	for _, a := range q.All("addr") {
		if a == "" {
			return online.BadURL(redacted, "addr= needs host:port")
		}
		s.Seeds = append(s.Seeds, online.HostPort(a, "6379"))
	}
	switch c := q.Get("cluster"); c {
	case "":
		s.Cluster = len(s.Seeds) > 1
	case "1", "true", "yes":
		s.Cluster = true
	case "0", "false", "no":
		if len(s.Seeds) > 1 {
			return online.BadURL(redacted, "several addresses are the seeds of a Redis Cluster; cluster=0 contradicts them")
		}
	default:
		return online.BadURL(redacted, "cluster= must be 1 or 0")
	}
	s.Addr = s.Seeds[0]
	if !s.Cluster {
		s.Seeds = nil
	}
	return nil
}
