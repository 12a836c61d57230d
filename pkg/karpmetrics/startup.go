package karpmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Startups observes karpenter_pods_startup_duration_seconds (creation until Ready) and
// karpenter_pods_bound_duration_seconds (creation until PodScheduled) once per pod, from
// snapshots of the cluster taken now and then (a scheduler's disruption pass).
//
// Karpenter counts a pod its controller saw Pending, when it becomes Ready; a pod that went
// from Pending to Ready between two snapshots would never be seen Pending here, and only slow
// pods would be counted. So a pod counts if it was seen not yet started, or if it started
// (status.startTime) after the tracker did: either way its transition happened while the
// tracker watched. The times come from the pod's conditions, not from when a snapshot saw
// them, so a late snapshot does not lengthen them.
type Startups struct {
	startup  prometheus.Observer
	bound    prometheus.Observer
	since    time.Time
	pending  map[types.UID]bool // seen not Ready
	unbound  map[types.UID]bool // seen not bound
	started  map[types.UID]bool // counted Ready
	wasBound map[types.UID]bool // counted bound
}

// NewStartups tracks pods from since on (a replica's start of leading).
func NewStartups(startup, bound prometheus.Observer, since time.Time) *Startups {
	return &Startups{startup: startup, bound: bound, since: since, pending: map[types.UID]bool{}, unbound: map[types.UID]bool{},
		started: map[types.UID]bool{}, wasBound: map[types.UID]bool{}}
}

// Observe takes one snapshot of every pod; a pod missing from it is forgotten.
func (s *Startups) Observe(pods []*corev1.Pod) {
	seen := map[types.UID]bool{}
	for _, p := range pods {
		seen[p.UID] = true
		if terminal(p) {
			continue // a finished pod's Ready is False: Karpenter counts none
		}
		fresh := p.Status.StartTime != nil && !p.Status.StartTime.Time.Before(s.since)
		observeOnce(p, corev1.PodReady, fresh, s.pending, s.started, s.startup)
		observeOnce(p, corev1.PodScheduled, fresh || !p.CreationTimestamp.Time.Before(s.since), s.unbound, s.wasBound, s.bound)
	}
	for _, m := range []map[types.UID]bool{s.pending, s.unbound, s.started, s.wasBound} {
		for uid := range m {
			if !seen[uid] {
				delete(m, uid)
			}
		}
	}
}

// observeOnce observes the time from the pod's creation to its condition t turning True, once:
// if the pod was seen without it (waiting) or the transition is known to be recent (fresh).
func observeOnce(p *corev1.Pod, t corev1.PodConditionType, fresh bool, waiting, counted map[types.UID]bool, o prometheus.Observer) {
	c, ok := condition(p, t)
	switch {
	case !ok:
		waiting[p.UID] = true
	case counted[p.UID] || !(waiting[p.UID] || fresh):
	default:
		o.Observe(c.LastTransitionTime.Sub(p.CreationTimestamp.Time).Seconds())
		counted[p.UID] = true
		delete(waiting, p.UID)
	}
}
