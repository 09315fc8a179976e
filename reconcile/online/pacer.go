package online

import (
	"context"
	"sync"
	"time"
)

// Pacer limits a rate in keys per second across goroutines: a batch of n
// keys reserves the next n/rate seconds of the schedule and waits until
// they have passed, so the rate holds from the first key (the first
// batch too waits its n/rate: a whole bloom audit in one batch went
// unpaced). Idle time is not saved up, so there are no bursts after a
// pause.
type Pacer struct {
	mu   sync.Mutex
	rate float64
	next time.Time
}

// NewPacer returns nil (no limit) for a rate <= 0.
func NewPacer(rate float64) *Pacer {
	if rate <= 0 {
		return nil
	}
	return &Pacer{rate: rate}
}

// Wait reserves the next n/rate seconds of the schedule and waits until
// they have passed; at once for a nil Pacer.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	at := p.next
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
