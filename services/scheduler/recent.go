package main

import (
	"sync"
	"time"
)

// recentMemoryTTL bounds how long this replica remembers its own writes: long past the moment
// the informer caches have seen them.
const recentMemoryTTL = 5 * time.Minute

// recent remembers the NodeClaims this replica created and the pods it nominated, until the
// informer caches catch up, so a batch redelivered moments later is recognised as done and the
// room a claim was just given stays counted; and which nominations, and ended nominations, a pod
// was already told about.
type recent struct {
	now func() time.Time

	mu        sync.Mutex
	claims    map[string]time.Time
	pods      map[string]nomination          // by pod UID
	byClaim   map[string]map[string]struct{} // claim → UIDs of the pods nominated to it
	announced map[string]time.Time           // "uid claim@at" of ended nominations told, "nominated uid claim" of nominations told
	pruned    time.Time
}

type nomination struct {
	namespace, name string
	claim           string
	at              time.Time
}

func newRecent(now func() time.Time) *recent {
	return &recent{now: now, claims: map[string]time.Time{}, pods: map[string]nomination{},
		byClaim: map[string]map[string]struct{}{}, announced: map[string]time.Time{}}
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

func (r *recent) addNomination(podUID string, n nomination) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune()
	if old, ok := r.pods[podUID]; ok {
		delete(r.byClaim[old.claim], podUID)
	}
	r.pods[podUID] = n
	if r.byClaim[n.claim] == nil {
		r.byClaim[n.claim] = map[string]struct{}{}
	}
	r.byClaim[n.claim][podUID] = struct{}{}
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

// nominatedTo returns the pods this replica nominated to the claim, by UID.
func (r *recent) nominatedTo(claim string) map[string]nomination {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]nomination, len(r.byClaim[claim]))
	for uid := range r.byClaim[claim] {
		out[uid] = r.pods[uid]
	}
	return out
}

// announce reports whether the pod has not been told yet that this nomination ended, and
// remembers that it now is.
func (r *recent) announce(podUID, claim string, at time.Time) bool {
	key := podUID + " " + claim + "@" + at.Format(time.RFC3339)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune()
	if _, told := r.announced[key]; told {
		return false
	}
	r.announced[key] = r.now()
	return true
}

// toldNominated reports whether the pod was told in an event that it is nominated to the claim.
func (r *recent) toldNominated(podUID, claim string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, told := r.announced["nominated "+podUID+" "+claim]
	return told
}

// tellNominated remembers that the pod is told it is nominated to the claim.
func (r *recent) tellNominated(podUID, claim string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prune()
	r.announced["nominated "+podUID+" "+claim] = r.now()
}

// prune forgets what is older than recentMemoryTTL, at most once a minute (every write calls it,
// so the memory stays bounded whether or not claims are being created). The caller holds mu.
func (r *recent) prune() {
	if r.now().Sub(r.pruned) < time.Minute {
		return
	}
	r.pruned = r.now()
	cutoff := r.now().Add(-recentMemoryTTL)
	for k, t := range r.claims {
		if t.Before(cutoff) {
			delete(r.claims, k)
		}
	}
	for k, n := range r.pods {
		if n.at.Before(cutoff) {
			delete(r.pods, k)
			delete(r.byClaim[n.claim], k)
			if len(r.byClaim[n.claim]) == 0 {
				delete(r.byClaim, n.claim)
			}
		}
	}
	for k, t := range r.announced {
		if t.Before(cutoff) {
			delete(r.announced, k)
		}
	}
}
