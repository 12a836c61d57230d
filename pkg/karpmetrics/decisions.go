package karpmetrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Decisions observes karpenter_pods_scheduling_decision_duration_seconds: from when the
// scheduler first saw a pod pending (Karpenter's ack, when its provisioner first takes the pod
// into a batch) until its first scheduling decision (a solve that placed it or found it
// unschedulable), once per pod. A pod is remembered until Forget says it is gone.
type Decisions struct {
	o       prometheus.Observer
	mu      sync.Mutex
	decided map[string]bool // pod UIDs
}

// NewDecisions observes into o.
func NewDecisions(o prometheus.Observer) *Decisions {
	return &Decisions{o: o, decided: map[string]bool{}}
}

// Decided records a decision on the pod at now; seen is when it was first seen pending.
func (d *Decisions) Decided(uid string, seen, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.decided[uid] {
		return
	}
	d.decided[uid] = true
	d.o.Observe(now.Sub(seen).Seconds())
}

// Forget drops every pod that present does not name (deleted, or bound and done with).
func (d *Decisions) Forget(present func(uid string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for uid := range d.decided {
		if !present(uid) {
			delete(d.decided, uid)
		}
	}
}
