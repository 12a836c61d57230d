package main

import (
	"sync"
	"time"
)

// unavailableSet remembers offerings that ran out of capacity until their expiry.
type unavailableSet struct {
	mu     sync.Mutex
	expiry map[Offering]time.Time
}

func newUnavailableSet() *unavailableSet { return &unavailableSet{expiry: map[Offering]time.Time{}} }

func (u *unavailableSet) add(o Offering, until time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if until.After(u.expiry[o]) {
		u.expiry[o] = until
	}
}

// snapshot returns the offerings unavailable at now, dropping expired ones.
func (u *unavailableSet) snapshot(now time.Time) map[Offering]bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[Offering]bool, len(u.expiry))
	for o, until := range u.expiry {
		if now.Before(until) {
			out[o] = true
		} else {
			delete(u.expiry, o)
		}
	}
	return out
}
