package redisconn

import (
	"slices"
	"testing"
)

// CLUSTER NODES as Redis 7.0 writes it: a master with ranges and a single
// slot, a replica (hostname after the bus port), a failed master, a
// migrating slot, a node in handshake.
const nodesText = `e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:7391@17391 myself,master - 0 0 1 connected 0-5460 5470
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:7392@17392,node-2 master - 0 1426238316232 2 connected 5461-5469 5471-10922 [10923->-292f8b365bb7edb5e285caf0b7e6ddc7265a2f4f]
292f8b365bb7edb5e285caf0b7e6ddc7265a2f4f 127.0.0.1:7393@17393 master,fail - 0 1426238318243 3 connected 10923-16383
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:7394@17394 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238316232 1 connected
824fe116063bc5fcf9f4ffd895bc17aee7731ac3 :0@0 handshake - 0 0 0 disconnected
`

func TestParseClusterNodes(t *testing.T) {
	nodes := parseClusterNodes(nodesText)
	if len(nodes) != 5 {
		t.Fatalf("%d nodes, want 5: %+v", len(nodes), nodes)
	}
	self, ok := myself(nodes)
	if !ok || self.addr != "127.0.0.1:7391" {
		t.Fatalf("myself %+v, %v", self, ok)
	}
	for _, c := range []struct {
		node  int
		slot  int
		serve bool
	}{{0, 0, true}, {0, 5460, true}, {0, 5461, false}, {0, 5470, true}, {1, 5461, true}, {1, 5470, false}, {1, 10922, true},
		{1, 10923, false}, {2, 16383, true}, {3, 0, false}} {
		if got := nodes[c.node].serves(c.slot); got != c.serve {
			t.Errorf("node %d (%s) serves slot %d: %v, want %v", c.node, nodes[c.node].addr, c.slot, got, c.serve)
		}
	}
	var down []string
	for _, n := range nodes {
		if n.down() {
			down = append(down, n.id[:4])
		}
	}
	if want := []string{"292f", "824f"}; !slices.Equal(down, want) { // failed; met, without an address yet
		t.Errorf("down %v, want %v", down, want)
	}
	if nodes[1].addr != "127.0.0.1:7392" || nodes[3].master != self.id {
		t.Errorf("addresses or masters misread: %+v", nodes)
	}
}

// FuzzParseClusterNodes: any CLUSTER NODES reply (a server's, so any
// bytes) is read without a panic; every node read has an ID, and serves
// no slot outside the ranges it lists.
func FuzzParseClusterNodes(f *testing.F) {
	f.Add(nodesText)
	f.Add("a b c d e f g h 1-2 3 [4->-x] 9-\n\n x")
	f.Add("id 1.2.3.4:5@6,name myself,master - 0 0 1 connected 0-16383")
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range parseClusterNodes(s) {
			if n.id == "" {
				t.Fatalf("a node without an ID from %q", s)
			}
			_ = n.down()
			lo, hi := 1<<30, -1<<30
			for _, r := range n.slots {
				lo, hi = min(lo, r[0]), max(hi, r[1])
			}
			for _, slot := range []int{lo - 1, hi + 1, -1, 16384} {
				if slot < lo || slot > hi {
					if n.serves(slot) {
						t.Fatalf("node %+v serves slot %d, outside its ranges", n, slot)
					}
				}
			}
		}
		myself(parseClusterNodes(s))
	})
}
