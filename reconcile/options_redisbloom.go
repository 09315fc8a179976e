package reconcile

import (
	"cmp"
	"fmt"

	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// The options of a run against RedisBloom filters (?bf=…), apart from the
// rules every store shares (options.go).

// checkRedisBF checks what RedisBloom filters need: the key texts (the
// records) when the items are made of them or the router hashes them,
// and a router that names a shard for what is written.
func (o *Options) checkRedisBF() error {
	spec := &o.Target.BF
	if spec.NeedsKeys() && len(o.Records) == 0 {
		return &OptionError{Rule: NeedKeyTexts, Value: "item=" + spec.Item.String(), Target: "route=" + spec.Router.Route()}
	}
	if spec.Router.All() && (o.writes() || len(o.Rebuild) > 0) {
		return &OptionError{Rule: RouteAllWrites}
	}
	return nil
}

// checkRebuildBF checks a rebuild of RedisBloom filters.
func (o *Options) checkRebuildBF() error {
	t := o.Target
	switch {
	case o.Apply || o.Probe:
		return &OptionError{Rule: RebuildWithApply}
	case t.Redis.Cluster && !t.BF.HashTagHoldsShard():
		return &OptionError{Rule: RebuildNeedsHashTag, Value: t.BF.Template, Target: "bf"}
	}
	for _, s := range o.Rebuild {
		if s >= uint64(t.BF.Router.Shards()) {
			return &OptionError{Rule: RebuildShardRange, Value: fmt.Sprint(s), Target: fmt.Sprint(t.BF.Router.Shards())}
		}
	}
	// What is not given is the live filter's, checked as the module made it.
	p := rbloom.Params{Capacity: cmp.Or(o.RebuildCapacity, 1), Error: cmp.Or(o.RebuildError, 0.01)}
	if err := p.Check(); err != nil {
		return &OptionError{Rule: BadRebuildParams, Err: err}
	}
	return nil
}

// keyTexts: the run reads the records for the truth's key texts (an audit
// of RedisBloom filters whose items or router need them).
func (o *Options) keyTexts() bool { return o.Target.Kind == RedisBF && o.Target.BF.NeedsKeys() }
