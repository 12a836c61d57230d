package service

import (
	"context"
	"sync"
	"time"
)

// KickGap is the least time between the end of a pass and a run a kick starts, for the passes
// that read the whole cluster (statuses, drift, v1alpha5 adoption, the terminator's decisions).
// A second is as soon as any of them needs to react (Karpenter batches pending pods for one
// idle second too), and under churn — a scale-out updates thousands of pods and nodes a
// second — it bounds each pass to one run a second instead of one a change: a pass over 5,000
// nodes and 50,000 pods takes tens of milliseconds, so a few percent of a core at worst.
const KickGap = time.Second

// Trigger coalesces nudges into runs of a pass (see EveryOrKicked): Kick never blocks, and any
// number of kicks before the pass gets to them make one run. Make it with NewTrigger.
type Trigger struct {
	ch  chan struct{}
	gap time.Duration

	mu    sync.Mutex
	timer *time.Timer // KickAt's
}

// NewTrigger makes a Trigger whose kicked runs start at least gap after the previous run ended
// (KickGap for a pass over the whole cluster).
func NewTrigger(gap time.Duration) *Trigger {
	return &Trigger{ch: make(chan struct{}, 1), gap: gap}
}

// Kick asks for a run; a run already asked for absorbs it.
func (t *Trigger) Kick() {
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

// KickAt asks for a run at a moment no change will announce: a deadline the pass itself works
// out (an empty node's TTL ends, a claim expires). Each call replaces the previous one, so a pass
// that says after every run when it next needs to run is woken then; a zero time cancels it.
func (t *Trigger) KickAt(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if !at.IsZero() {
		t.timer = time.AfterFunc(time.Until(at), t.Kick)
	}
}

// Every runs f at once and then every d until ctx ends; it returns nil then, so it fits an
// errgroup. A slow f delays the next run rather than overlapping it.
func Every(ctx context.Context, d time.Duration, f func()) error {
	return EveryOrKicked(ctx, d, nil, f) // a nil Trigger is never kicked
}

// EveryOrKicked is Every driven by changes: it runs f at once, then after each kick, and every
// resync besides as a safety net, until ctx ends. A kicked run starts no sooner than the
// trigger's gap after the previous run ended, and kicks that come before a run starts are all
// answered by it: a burst of changes, however long, makes one run a gap, never one a kick or
// runs back to back. A run that changes nothing only causes more runs if something else kicks.
func EveryOrKicked(ctx context.Context, resync time.Duration, kick *Trigger, f func()) error {
	return loop(ctx, wallClock{}, resync, kick, f)
}

// clock is what loop waits with; tests drive a fake one.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func loop(ctx context.Context, clk clock, resync time.Duration, kick *Trigger, f func()) error {
	var kicked <-chan struct{} // nil: never
	var gap time.Duration
	if kick != nil {
		kicked, gap = kick.ch, kick.gap
	}
	for {
		select { // the run about to start answers every kick so far
		case <-kicked:
		default:
		}
		f()
		ended := clk.Now()
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(resync):
		case <-kicked:
			if wait := gap - clk.Now().Sub(ended); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-clk.After(wait):
				}
			}
		}
	}
}
