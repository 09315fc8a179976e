package rbloom

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/fpdedup/fpdedup/internal/l2bloom"
)

// The routers: which shard's filter holds a key, as a function of the key
// text alone, as the online system computes it.
const (
	// RouteModMD5: shard = int(first 4 bytes of MD5(key), big-endian) mod
	// N; the shards are named 0 … N-1.
	RouteModMD5 = "mod-md5"
	// RouteRing: a consistent-hash ring (ketama style). Node A with V
	// virtual nodes has the points int(first 4 bytes of MD5("A#i"),
	// big-endian), i = 0 … V-1; a key goes to the node of the first point
	// at or after int(first 4 bytes of MD5(key), big-endian), wrapping
	// past the largest point to the smallest. Points equal to each other
	// are ordered by the nodes' order in the list, then by i, so the first
	// node listed wins a tie. A shard is named by its node.
	RouteRing = "ring"
	// RouteAll: the router is not known; a key is held if any shard holds
	// it. Conservative: a key is reported missing only when no shard has
	// it, so a key that lost its bits in its own shard but collides in
	// another is not found missing.
	RouteAll = "all"
)

// Bounds of a router.
const (
	MaxVNodes     = 1 << 16
	maxRingPoints = 1 << 24 // 128 MiB of points at most
)

// RouterSpec is a router as a URL gives it.
type RouterSpec struct {
	Route  string   // RouteModMD5, RouteRing or RouteAll
	Shards int      // mod-md5 and all: the number of shards; ring: 0 or len(Nodes)
	Nodes  []string // ring: the nodes, in order
	VNodes int      // ring: points a node
}

// Router routes keys to shards. Safe for concurrent use.
type Router struct {
	route  string
	names  []string
	points []ringPoint // ring: sorted
}

type ringPoint struct {
	at   uint32
	node int32
}

// NewRouter checks a spec (errors name the parameter at fault, as a URL
// writes it) and makes its router.
func NewRouter(s RouterSpec) (*Router, error) {
	switch s.Route {
	case RouteModMD5, RouteAll:
		if s.Shards < 1 || s.Shards > l2bloom.MaxShards {
			return nil, fmt.Errorf("%w: shards=%d: want 1 to %d", ErrRouter, s.Shards, l2bloom.MaxShards)
		}
		if len(s.Nodes) > 0 || s.VNodes != 0 {
			return nil, fmt.Errorf("%w: nodes= and vnodes= are for route=ring, not route=%s", ErrRouter, s.Route)
		}
		r := &Router{route: s.Route, names: make([]string, s.Shards)}
		for i := range r.names {
			r.names[i] = strconv.Itoa(i)
		}
		return r, nil
	case RouteRing:
		return newRing(s)
	}
	return nil, fmt.Errorf("%w: route=%q: want %s, %s or %s", ErrRouter, s.Route, RouteModMD5, RouteRing, RouteAll)
}

func newRing(s RouterSpec) (*Router, error) {
	switch {
	case len(s.Nodes) == 0:
		return nil, fmt.Errorf("%w: route=ring needs nodes=A,B,…", ErrRouter)
	case s.Shards != 0 && s.Shards != len(s.Nodes):
		return nil, fmt.Errorf("%w: shards=%d but nodes= names %d", ErrRouter, s.Shards, len(s.Nodes))
	case s.VNodes < 1 || s.VNodes > MaxVNodes:
		return nil, fmt.Errorf("%w: vnodes=%d: want 1 to %d", ErrRouter, s.VNodes, MaxVNodes)
	case len(s.Nodes)*s.VNodes > maxRingPoints:
		return nil, fmt.Errorf("%w: %d nodes of %d vnodes: more than %d points", ErrRouter, len(s.Nodes), s.VNodes, maxRingPoints)
	}
	seen := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		if n == "" || seen[n] {
			return nil, fmt.Errorf("%w: nodes=: an empty or repeated node %q", ErrRouter, n)
		}
		seen[n] = true
	}
	r := &Router{route: RouteRing, names: slices.Clone(s.Nodes), points: make([]ringPoint, 0, len(s.Nodes)*s.VNodes)}
	var b []byte
	for node, name := range s.Nodes {
		for i := range s.VNodes {
			b = strconv.AppendInt(append(append(b[:0], name...), '#'), int64(i), 10)
			r.points = append(r.points, ringPoint{md5Prefix(b), int32(node)})
		}
	}
	// Stable: points made in (node, i) order keep it among equals.
	slices.SortStableFunc(r.points, func(a, b ringPoint) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return r, nil
}

// md5Prefix is the first 4 bytes of MD5(b), big-endian.
func md5Prefix(b []byte) uint32 {
	d := md5.Sum(b)
	return binary.BigEndian.Uint32(d[:4])
}

// Route is the router's name.
func (r *Router) Route() string { return r.route }

// Shards is the number of shards.
func (r *Router) Shards() int { return len(r.names) }

// Name is shard s's name, the text that replaces '*' in the key template.
func (r *Router) Name(s int) string { return r.names[s] }

// All reports whether every shard is asked for every key (RouteAll).
func (r *Router) All() bool { return r.route == RouteAll }

// Shard is the shard of the key text, -1 for RouteAll (every shard).
func (r *Router) Shard(key []byte) int {
	switch r.route {
	case RouteModMD5:
		return int(md5Prefix(key) % uint32(len(r.names)))
	case RouteRing:
		h := md5Prefix(key)
		i, _ := slices.BinarySearchFunc(r.points, h, func(p ringPoint, h uint32) int {
			switch {
			case p.at < h:
				return -1
			case p.at > h:
				return 1
			}
			return 0
		})
		if i == len(r.points) {
			i = 0
		}
		return int(r.points[i].node)
	}
	return -1
}

// Item is what a filter holds for a key.
type Item int

// The items.
const (
	// ItemKey: the key text itself (as the index's recipe makes it).
	ItemKey Item = iota
	// ItemSHA256: the lowercase hex of the key text's SHA-256, as L3
	// stores it.
	ItemSHA256
	// ItemFP: the index's own 128-bit fingerprint, as 32 lowercase hex
	// digits, high half first (fpstore.Fingerprint's String).
	ItemFP
)

var itemNames = [...]string{ItemKey: "key", ItemSHA256: "sha256", ItemFP: "fp"}

// ParseItem reads item=.
func ParseItem(s string) (Item, error) {
	for i, n := range itemNames {
		if s == n {
			return Item(i), nil
		}
	}
	return 0, fmt.Errorf("%w: item=%q: want key, sha256 or fp", ErrItem, s)
}

func (it Item) String() string {
	if it >= 0 && int(it) < len(itemNames) {
		return itemNames[it]
	}
	return "Item(" + strconv.Itoa(int(it)) + ")"
}

// NeedsKey reports whether the item is made from the key text (which the
// index alone does not hold), not from the fingerprint.
func (it Item) NeedsKey() bool { return it != ItemFP }

// AppendKeyItem appends the item of the key text (ItemKey, ItemSHA256).
func (it Item) AppendKeyItem(dst, key []byte) []byte {
	if it == ItemSHA256 {
		d := sha256.Sum256(key)
		return hex.AppendEncode(dst, d[:])
	}
	return append(dst, key...)
}

// AppendFP appends the ItemFP item of the fingerprint (hi, lo).
func AppendFP(dst []byte, hi, lo uint64) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return hex.AppendEncode(dst, b[:])
}
