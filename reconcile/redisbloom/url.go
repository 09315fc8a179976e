package redisbloom

import (
	"strconv"
	"strings"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Spec is the filters a redis:// URL names: bf=TEMPLATE&shards=N&
// route=ROUTER&item=ITEM (ring: &nodes=A,B,…&vnodes=V).
type Spec struct {
	// Template is a filter's key: its one '*' is the shard's name (the
	// router's: 0 … N-1, or a ring's node); without '*', the one filter
	// of a single shard.
	Template string
	Route    rbloom.RouterSpec
	Router   *rbloom.Router
	Item     rbloom.Item
}

// Key is shard s's filter's key.
func (s *Spec) Key(shard int) string {
	return strings.Replace(s.Template, "*", s.Router.Name(shard), 1)
}

// NeedsKeys reports whether the audit needs the truth's key texts, which
// the index alone does not hold: the item is made of them (key, sha256),
// or the router hashes them to a shard (mod-md5, ring). Only item=fp
// with route=all is audited from the index alone.
func (s *Spec) NeedsKeys() bool { return s.Item.NeedsKey() || !s.Router.All() }

// HashTagHoldsShard reports whether the template's Cluster hash tag (the
// text between its first '{' and the first '}' after it, when not empty)
// holds the '*': then a filter and the key it is rebuilt in share a slot.
func (s *Spec) HashTagHoldsShard() bool {
	open := strings.IndexByte(s.Template, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(s.Template[open+1:], '}')
	return end > 0 && strings.Contains(s.Template[open+1:open+1+end], "*")
}

// ParseSpec reads the RedisBloom filters of a redis:// URL, printed as
// redacted: the template (bf=, its value) and the router and item
// parameters. A parameter missing or wrong is a *online.URLError naming
// it.
func ParseSpec(redacted, template string, q *online.Params) (Spec, error) {
	s := Spec{Template: template}
	if strings.Count(template, "*") > 1 {
		return s, online.BadURL(redacted, "bf=%s: at most one '*', where the shard's name goes (l2:rb:{*})", template)
	}
	route, item := q.Get("route"), q.Get("item")
	shards, nodes, vnodes := q.Get("shards"), q.Get("nodes"), q.Get("vnodes")
	if route == "" {
		return s, online.BadURL(redacted, "bf= needs route=%s, %s or %s (how a key's shard is chosen)", rbloom.RouteModMD5, rbloom.RouteRing, rbloom.RouteAll)
	}
	if item == "" {
		return s, online.BadURL(redacted, "bf= needs item=key, sha256 or fp (what the filters hold of a key)")
	}
	var err error
	if s.Item, err = rbloom.ParseItem(item); err != nil {
		return s, online.BadURL(redacted, "%v", err)
	}
	s.Route = rbloom.RouterSpec{Route: route}
	if shards != "" {
		if s.Route.Shards, err = strconv.Atoi(shards); err != nil {
			return s, online.BadURL(redacted, "shards=%s: want a number of shards", shards)
		}
	} else if route != rbloom.RouteRing {
		return s, online.BadURL(redacted, "bf= with route=%s needs shards=N", route)
	}
	if nodes != "" {
		s.Route.Nodes = strings.Split(nodes, ",")
	}
	if vnodes != "" {
		if s.Route.VNodes, err = strconv.Atoi(vnodes); err != nil {
			return s, online.BadURL(redacted, "vnodes=%s: want a number of points a node", vnodes)
		}
	} else if route == rbloom.RouteRing {
		return s, online.BadURL(redacted, "route=ring needs vnodes=V (the points a node has on the ring)")
	}
	if s.Router, err = rbloom.NewRouter(s.Route); err != nil {
		return s, online.BadURL(redacted, "%v", err)
	}
	if !strings.Contains(template, "*") && s.Router.Shards() > 1 {
		return s, online.BadURL(redacted, "bf=%s has no '*' for the shard's name: it names one filter, but the router has %d shards", template, s.Router.Shards())
	}
	return s, nil
}
