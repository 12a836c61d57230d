package main

import (
	"sync"
	"time"
)

// recentMemoryTTL bounds how long this replica remembers its own writes: long past the moment
// the informers have seen them.
const recentMemoryTTL = 5 * time.Minute

// recent remembers the NodeClaims this replica created and the pods it nominated, until the
// informer caches catch up, so a batch redelivered moments later is recognised as done.
type recent struct {
	now func() time.Time

	mu     sync.Mutex
	claims map[string]time.Time
	pods   map[string]nomination // by pod UID
}

type nomination struct {
	claim string
	at    time.Time
}

func newRecent(now func() time.Time) *recent {
	return &recent{now: now, claims: map[string]time.Time{}, pods: map[string]nomination{}}
}

func (r *recent) addClaim(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune()
	r.claims[name] = r.now()
}

func (r *recent) forgetClaim(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.claims, name)
}

func (r *recent) addNomination(podUID, claim string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods[podUID] = nomination{claim: claim, at: at}
}

func (r *recent) created(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.claims[name]
	return ok
}

func (r *recent) nomination(podUID string) (nomination, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.pods[podUID]
	return n, ok
}

func (r *recent) prune() {
	cutoff := r.now().Add(-recentMemoryTTL)
	for k, t := range r.claims {
		if t.Before(cutoff) {
			delete(r.claims, k)
		}
	}
	for k, n := range r.pods {
		if n.at.Before(cutoff) {
			delete(r.pods, k)
		}
	}
}
