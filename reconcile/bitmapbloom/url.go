package bitmapbloom

import (
	"github.com/fpdedup/fpdedup/internal/l2bloom"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Spec is the bloom a redis:// URL names: its shards' layout, and the
// template of their keys (bloom=).
type Spec struct {
	l2bloom.Layout
	Keys l2bloom.Template
}

// ParseSpec reads the bloom of a redis:// URL, printed as redacted: the
// template (bloom=, its value) and the layout, shards=N&bits=M&k=K, in
// the forms replay's --l2 takes.
func ParseSpec(redacted, template string, q *online.Params) (Spec, error) {
	var s Spec
	var err error
	if s.Keys, err = l2bloom.ParseTemplate(template); err != nil {
		return s, online.BadURL(redacted, "bloom=%s: %v", template, err)
	}
	shards, bits, k := q.Get("shards"), q.Get("bits"), q.Get("k")
	if shards == "" || bits == "" || k == "" {
		return s, online.BadURL(redacted, "bloom= needs its layout: &shards=N&bits=M&k=K (as replay's --l2)")
	}
	if s.Shards, err = l2bloom.ParseShards(shards); err != nil {
		return s, online.BadURL(redacted, "%v", err)
	}
	if s.Bits, err = l2bloom.ParseBits(bits); err != nil {
		return s, online.BadURL(redacted, "bits=%v", err)
	}
	if s.K, err = l2bloom.ParseK(k); err != nil {
		return s, online.BadURL(redacted, "%v", err)
	}
	return s, nil
}
