package reconcile

import (
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// TestParseURLRedisBF: the RedisBloom filters' URL (bf=TEMPLATE&shards=N&
// route=…&item=…): each router and item read, and every parameter wrong
// or missing a usage error naming it.
func TestParseURLRedisBF(t *testing.T) {
	ok := []struct {
		in     string
		shards int
		route  string
		item   rbloom.Item
		key0   string
	}{
		{"redis://h:1/0?bf=l2:rb:{*}&shards=16&route=mod-md5&item=sha256", 16, "mod-md5", rbloom.ItemSHA256, "l2:rb:{0}"},
		{"redis://h:1/0?bf=l2:rb:{*}&route=ring&nodes=a:1,b:2,c:3&vnodes=100&item=key", 3, "ring", rbloom.ItemKey, "l2:rb:{a:1}"},
		{"redis://h:1/0?bf=l2:rb:{*}&shards=3&route=ring&nodes=a,b,c&vnodes=10&item=key", 3, "ring", rbloom.ItemKey, "l2:rb:{a}"},
		{"redis://h:1/0?bf=f*&shards=4&route=all&item=fp", 4, "all", rbloom.ItemFP, "f0"},
		{"redis://h:1/0?bf=one&shards=1&route=mod-md5&item=key", 1, "mod-md5", rbloom.ItemKey, "one"},
		{"redis://h1:1,h2:2/?bf={*}&shards=2&route=mod-md5&item=fp", 2, "mod-md5", rbloom.ItemFP, "{0}"},
	}
	for _, c := range ok {
		got, err := ParseURL(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got.Kind != RedisBF || got.BF.Router.Shards() != c.shards || got.BF.Router.Route() != c.route || got.BF.Item != c.item || got.BF.Key(0) != c.key0 {
			t.Errorf("%s: kind %v, %d shards, route %s, item %v, shard 0's key %q", c.in, got.Kind, got.BF.Router.Shards(), got.BF.Router.Route(), got.BF.Item, got.BF.Key(0))
		}
		if got.Redacted != c.in {
			t.Errorf("%s is printed %s", c.in, got.Redacted)
		}
	}
	bad := []struct{ in, msg string }{
		{"redis://h/0?bf=x*&shards=2&item=key", "needs route="},
		{"redis://h/0?bf=x*&shards=2&route=mod-md5", "needs item="},
		{"redis://h/0?bf=x*&shards=2&route=md5&item=key", `route="md5"`},
		{"redis://h/0?bf=x*&shards=2&route=mod-md5&item=hex", `item="hex"`},
		{"redis://h/0?bf=x*&route=mod-md5&item=key", "needs shards=N"},
		{"redis://h/0?bf=x*&shards=two&route=mod-md5&item=key", "shards=two"},
		{"redis://h/0?bf=x*&shards=0&route=mod-md5&item=key", "shards=0"},
		{"redis://h/0?bf=x*&route=ring&nodes=a,b&item=key", "vnodes="},
		{"redis://h/0?bf=x*&route=ring&vnodes=10&item=key", "nodes="},
		{"redis://h/0?bf=x*&route=ring&nodes=a,a&vnodes=10&item=key", "nodes="},
		{"redis://h/0?bf=x*&route=ring&nodes=a,b&vnodes=ten&item=key", "vnodes=ten"},
		{"redis://h/0?bf=x*&shards=3&route=ring&nodes=a,b&vnodes=10&item=key", "shards=3"},
		{"redis://h/0?bf=x*&shards=2&route=mod-md5&nodes=a,b&item=key", "nodes="},
		{"redis://h/0?bf=x*y*&shards=2&route=mod-md5&item=key", "at most one '*'"},
		{"redis://h/0?bf=x&shards=2&route=mod-md5&item=key", "no '*'"},
		{"redis://h/0?bf=x*&bloom=b*&shards=2&route=mod-md5&item=key", "exclude each other"},
		{"redis://h/0?bf=x*&shards=2&route=mod-md5&item=key&vnode=3", `unknown parameter "vnode"`},
		{"redis://u:hunter2@h/0?bf=x*&shards=2&route=mod-md5&item=key", "holds a password"},
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
