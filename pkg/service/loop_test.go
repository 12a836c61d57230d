package service

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock runs loop in lockstep with a test: every wait loop starts is handed to the test
// (waits), which fires it when it chooses; the time is what the test sets.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan fakeWait
	stop  <-chan struct{} // the test is over: nobody reads waits
}

type fakeWait struct {
	d    time.Duration
	fire chan time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	w := fakeWait{d: d, fire: make(chan time.Time, 1)}
	select {
	case c.waits <- w:
	case <-c.stop:
	}
	return w.fire
}

// loopScript drives loop over a fake clock: each step of the loop (a run of the pass, or a
// wait it starts) is read in order, so a run the test did not expect shows as the wrong step.
type loopScript struct {
	t     *testing.T
	clk   *fakeClock
	runs  chan int
	count int
}

func startLoop(t *testing.T, resync, gap time.Duration) (*loopScript, *Trigger) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &loopScript{t: t, clk: &fakeClock{now: time.Unix(1_000_000, 0), waits: make(chan fakeWait), stop: ctx.Done()}, runs: make(chan int)}
	kick := NewTrigger(gap)
	done := make(chan error, 1)
	go func() {
		done <- loop(ctx, s.clk, resync, kick, func() {
			s.count++
			select {
			case s.runs <- s.count:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return s, kick
}

// run expects the next step to be run number n of the pass.
func (s *loopScript) run(n int) {
	s.t.Helper()
	select {
	case got := <-s.runs:
		require.Equal(s.t, n, got, "run number")
	case w := <-s.clk.waits:
		s.t.Fatalf("expected run %d, the loop waits %s", n, w.d)
	case <-time.After(10 * time.Second):
		s.t.Fatalf("run %d never came", n)
	}
}

// wait expects the next step to be a wait of d, and returns it to fire.
func (s *loopScript) wait(d time.Duration) fakeWait {
	s.t.Helper()
	select {
	case w := <-s.clk.waits:
		require.Equal(s.t, d, w.d, "the wait the loop starts")
		return w
	case n := <-s.runs:
		s.t.Fatalf("expected a wait of %s, the loop ran (run %d)", d, n)
	case <-time.After(10 * time.Second):
		s.t.Fatalf("the wait of %s never came", d)
	}
	return fakeWait{}
}

// A burst of kicks makes one run, one gap after the last run ended, however many kicks it holds
// and whether they come before or during the gap; a kick the gap has already passed for runs at
// once; the resync runs without a kick.
func TestEveryOrKickedKeepsAGapAndCoalesces(t *testing.T) {
	const resync, gap = time.Hour, time.Second
	s, kick := startLoop(t, resync, gap)
	s.run(1) // at once
	s.wait(resync)

	for range 500 {
		kick.Kick() // never blocks
	}
	g := s.wait(gap) // not run back to back: the whole gap is left, as no time passed
	for range 500 {
		kick.Kick() // during the gap: the run to come answers these too
	}
	g.fire <- s.clk.Now()
	s.run(2) // one run for 1,000 kicks
	r := s.wait(resync)

	// Nothing kicked since run 2 started: the next step is the resync's run, not a run for the
	// kicks run 2 already answered.
	r.fire <- s.clk.Now()
	s.run(3)
	s.wait(resync)

	// A kick 400 ms after a run waits out the 600 ms left of the gap.
	s.clk.advance(400 * time.Millisecond)
	kick.Kick()
	g = s.wait(600 * time.Millisecond)
	s.clk.advance(600 * time.Millisecond)
	g.fire <- s.clk.Now()
	s.run(4)
	s.wait(resync)

	// A kick after the gap has passed runs at once.
	s.clk.advance(5 * time.Second)
	kick.Kick()
	s.run(5)
	s.wait(resync)
	assert.Equal(t, 5, s.count)
}

// KickAt wakes the pass at the moment it asked for, and a later call replaces an earlier one.
func TestKickAt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kick := NewTrigger(0)
	ran := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- EveryOrKicked(ctx, time.Hour, kick, func() { ran <- struct{}{} }) }()
	<-ran // the first run, at once

	kick.KickAt(time.Now().Add(time.Hour))
	kick.KickAt(time.Now().Add(20 * time.Millisecond)) // replaces the hour
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("KickAt did not wake the pass")
	}
	kick.KickAt(time.Now().Add(time.Hour))
	kick.KickAt(time.Time{}) // cancelled
	assert.Nil(t, kick.timer, "a zero time cancels the wake-up")
	cancel()
	require.NoError(t, <-done)
}
