package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/online"
)

// placed is a source whose slots' owners are what owners says, one answer
// a call.
type placed struct {
	online.Source
	owners []string
}

func (p *placed) SlotOwners(context.Context) (string, error) {
	o := p.owners[0]
	p.owners = p.owners[1:]
	return o, nil
}

// TestPlacement: a run through a Cluster whose slots did not change hands
// is let be; one whose did is a MovedError naming the run and both
// placements; a source of one server (""), or no Placed source, is never
// checked.
func TestPlacement(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		owners []string
		moved  bool
	}{
		{"unmoved", []string{"a 1: 0-16383", "a 1: 0-16383"}, false},
		{"moved", []string{"a 1: 0-8191; b 2: 8192-16383", "a 1: 0-8191; c 3: 8192-16383"}, true},
		{"one server", []string{""}, false},
	} {
		pl, err := Place(ctx, "redis://t", &placed{owners: c.owners}, "--rebuild-shard")
		if err != nil {
			t.Fatal(err)
		}
		err = pl.Unmoved(ctx, 3)
		var me *MovedError
		if got := errors.As(err, &me); got != c.moved || (!c.moved && err != nil) {
			t.Fatalf("%s: %v, moved %v", c.name, err, c.moved)
		}
		if c.moved && (!strings.Contains(err.Error(), "during --rebuild-shard") || !strings.Contains(err.Error(), "3 shards swapped in") || me.Before != c.owners[0] || me.After != c.owners[1]) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if pl, err := Place(ctx, "redis://t", nil, "--apply"); pl != nil || err != nil || pl.Unmoved(ctx, 1) != nil {
		t.Errorf("a source that is not Placed: %v, %v", pl, err)
	}
}
