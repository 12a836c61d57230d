package awsemu

import (
	"sync"
	"time"
)

// Clock is the emulator's source of time. Boot delays, shutdowns, spot notices, visibility
// timeouts and long-poll deadlines are all measured against it.
type Clock interface {
	Now() time.Time
}

// RealClock is wall-clock time.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that only moves when told to. Tests use it to pass boot delays and
// notices without sleeping.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
