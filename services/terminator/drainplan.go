package main

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// A drain round, decided on plain data (planRound) and carried out by the executor (drain):
//
//	pods on the node ─ waitsFor ─┬─ deadline − own grace reached ─> delete, grace max(1 s, deadline − now)
//	(not mirror, not tolerating  ├─ terminating already          ─> wait for it to go
//	 karpenter.sh/disrupted,     ├─ do-not-disrupt (not for an   ─> hold: neither evicted nor deleted yet
//	 not finished, not past      │  interruption)
//	 its deletionTimestamp)      ├─ an earlier group still there ─> later
//	                             └─ otherwise                     ─> evict (Eviction API: PDBs hold)
//
// as Karpenter v1's terminator does: pods are evicted in four groups, each once every pod of
// the groups before it is gone — other pods, DaemonSet pods, critical pods, critical DaemonSet
// pods (the order of the kubelet's graceful node shutdown); a pod that tolerates the
// karpenter.sh/disrupted:NoSchedule taint (a DaemonSet tolerating every taint, say) would be
// put back on the node at once, so it is neither evicted nor waited for. At the node's deadline
// (deletionTimestamp + terminationGracePeriod, or an interruption's) each pod is deleted early
// enough to get its own terminationGracePeriodSeconds, never with grace 0.

// drainPolicy is what a drain holds to.
type drainPolicy struct {
	// Deadline is when the node goes whatever its pods: each is deleted at Deadline less its
	// own grace period. Zero: never; the drain waits for every pod.
	Deadline time.Time
	// Interruption evicts karpenter.sh/do-not-disrupt pods too: AWS takes the instance at a
	// time of its choosing whatever the drain does. Every other drain leaves them be until
	// Deadline.
	Interruption bool
	// Reason is what the pods are drained for, in Karpenter's words: the claim's disruption
	// reason, or "Forceful Termination" (karpenter_pods_drained_total).
	Reason string
}

// podAction is what a drain round does about one pod.
type podAction int

const (
	awaitPod  podAction = iota // terminating already (evicted, deleted): wait for it to go
	evictPod                   // ask the Eviction API
	deletePod                  // delete it for the deadline, with podStep.Grace
	holdPod                    // karpenter.sh/do-not-disrupt: not evicted; deleted at podStep.DeleteAt
	laterPod                   // of a later group: evicted once the groups before it are gone
)

// podStep is what a round does about one pod the drain waits for.
type podStep struct {
	Pod    *corev1.Pod
	Action podAction
	// Grace is the deletion's grace period in seconds (deletePod): the time left until the
	// deadline, at least 1 (grace 0 removes the pod from the API before its containers stop).
	Grace int64
	// DeleteAt is when the pod is deleted for the deadline; zero without one.
	DeleteAt time.Time
	// Until is when a do-not-disrupt duration stops protecting the pod (holdPod); zero for
	// "true", which protects it for as long as it carries the annotation.
	Until time.Time
}

// roundPlan is one round of a drain.
type roundPlan struct {
	// Steps has a step for each pod the drain still waits for; none once the node is drained.
	Steps []podStep
	// Next is the next moment the plan changes by itself (a pod's DeleteAt, a protection's
	// end), so a drain with nothing to do until then need not look sooner; zero: none.
	Next time.Time
}

// planRound decides what to do about each of the node's pods at now.
func planRound(pods []corev1.Pod, pol drainPolicy, now time.Time) roundPlan {
	var plan roundPlan
	waiting := make([]*corev1.Pod, 0, len(pods))
	first := drainGroups // the first group a pod still to go is in
	for i := range pods {
		p := &pods[i]
		if !waitsFor(p, now) {
			continue
		}
		waiting = append(waiting, p)
		first = min(first, drainGroup(p))
	}
	soonest := func(t time.Time) {
		if t.After(now) && (plan.Next.IsZero() || t.Before(plan.Next)) {
			plan.Next = t
		}
	}
	for _, p := range waiting {
		s := podStep{Pod: p}
		if !pol.Deadline.IsZero() {
			s.DeleteAt = pol.Deadline.Add(-ownGrace(p))
			soonest(s.DeleteAt)
		}
		protected, until, _ := disruption.DoNotDisrupt(p, now)
		switch {
		case !s.DeleteAt.IsZero() && !now.Before(s.DeleteAt) && shortens(p, pol.Deadline, now):
			s.Action, s.Grace = deletePod, graceLeft(pol.Deadline, now)
		case p.DeletionTimestamp != nil:
			s.Action = awaitPod
		case protected && !pol.Interruption:
			s.Action, s.Until = holdPod, until
			soonest(until)
		case drainGroup(p) > first:
			s.Action = laterPod
		default:
			s.Action = evictPod
		}
		plan.Steps = append(plan.Steps, s)
	}
	return plan
}

// waitsFor reports whether a drain waits for the pod to go: not a mirror pod (the kubelet's, it
// cannot be evicted), not one that tolerates karpenter.sh/disrupted:NoSchedule, not finished,
// and not terminating past its deletionTimestamp. The API server sets deletionTimestamp to the
// deletion request plus the grace period, so a pod still there after it is one no kubelet is
// removing (the node is gone, or a finalizer holds the object): waiting for it would keep the
// drain going forever.
func waitsFor(p *corev1.Pod, now time.Time) bool {
	if podproj.Mirror(p) || toleratesDisrupted(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	return p.DeletionTimestamp == nil || !now.After(p.DeletionTimestamp.Time)
}

// toleratesDisrupted reports a pod that tolerates the taint of a node being disrupted: evicted,
// it could be put straight back (its DaemonSet would do so), so a drain leaves it, as
// Karpenter's does.
func toleratesDisrupted(p *corev1.Pod) bool {
	taint := karpv1.DisruptedNoScheduleTaint
	for i := range p.Spec.Tolerations {
		if p.Spec.Tolerations[i].ToleratesTaint(&taint) {
			return true
		}
	}
	return false
}

// drainGroups is how many groups a drain evicts in turn.
const drainGroups = 4

// drainGroup is the pod's turn in a drain, as in the kubelet's graceful node shutdown and
// Karpenter's: 0 other pods, 1 DaemonSet pods, 2 critical pods, 3 critical DaemonSet pods.
func drainGroup(p *corev1.Pod) int {
	g := 0
	if critical(p) {
		g = 2
	}
	if podproj.OwnedBy(p, "DaemonSet") {
		g++
	}
	return g
}

// critical reports a pod of the priority classes a drain evicts last.
func critical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

// ownGrace is the pod's terminationGracePeriodSeconds (the API server's default when unset).
func ownGrace(p *corev1.Pod) time.Duration {
	s := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		s = *p.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(s) * time.Second
}

// graceLeft is the grace period a pod deleted at now for the deadline gets: the whole seconds
// left, at least 1.
func graceLeft(deadline, now time.Time) int64 {
	return max(int64(deadline.Sub(now)/time.Second), 1)
}

// shortens reports whether deleting the pod now for the deadline changes anything: a pod not
// yet terminating, or one whose termination (an eviction's, with its own grace period) would
// end after the deadline and is granted less grace than it now has.
func shortens(p *corev1.Pod, deadline, now time.Time) bool {
	if p.DeletionTimestamp == nil {
		return true
	}
	if !p.DeletionTimestamp.After(deadline) {
		return false
	}
	return p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds > graceLeft(deadline, now)
}
