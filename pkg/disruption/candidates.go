package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// Candidate is a node a voluntary method may take, as the decider sees it.
type Candidate struct {
	clusterstate.NodeView
	// Movable are the pods its disruption evicts and reschedules (Movable).
	Movable []*corev1.Pod
	// Since is when a pod last arrived on or left it (the claim's status.lastPodEventTime), or
	// when it was initialized if later: consolidateAfter counts from there.
	Since time.Time
	// Consolidatable: its pool consolidates (WhenEmpty, or WhenEmptyOrUnderutilized for nodes
	// with pods) and consolidateAfter has passed since Since.
	Consolidatable bool
	// Drifted is the reason of its Drifted condition ("" when not drifted).
	Drifted string
	// Blocked: a do-not-disrupt annotation or a PodDisruptionBudget holds it back (Cause, Why);
	// drift with a terminationGracePeriod goes ahead regardless (EventuallyDisruptable).
	Cause Cause
	Why   string
}

// Empty reports a candidate whose disruption moves no pod.
func (c Candidate) Empty() bool { return len(c.Movable) == 0 }

// Blocked reports whether pods hold the candidate back.
func (c Candidate) Blocked() bool { return c.Cause != "" }

// EventuallyDisruptable reports a drifted claim with a terminationGracePeriod: Karpenter v1's
// eventual disruption, which do-not-disrupt pods and PodDisruptionBudgets delay (the drain waits
// for them) but do not prevent (the grace period bounds the wait).
func (c Candidate) EventuallyDisruptable() bool {
	return c.Claim.Spec.TerminationGracePeriod != nil
}

// Inputs is what candidates are computed from, besides the joined nodes.
type Inputs struct {
	PDBs []*policyv1.PodDisruptionBudget
	// Awaited are claims a pending pod waits for (a live nomination, podproj.NominationRule)
	// and claims kept for a pod still pending they were launched for (podproj.LaunchLoopRule),
	// each with why: not disrupted voluntarily while that holds.
	Awaited map[string]Block
	// Exists reports whether a NodeClaim of that name exists (a replacement's old claims).
	Exists func(name string) bool
	Now    time.Time
	// Bad collects do-not-disrupt annotations that protect nothing, to tell their owners.
	Bad func(error)
}

// Candidates are the nodes voluntary disruption may consider, and those held back with why:
// launched, registered and initialized claims of a known pool, not marked for removal, not a
// replacement still waiting for the pods of the nodes it replaces, not awaited by a pending pod,
// their node not annotated do-not-disrupt. Candidates whose pods hold them back are returned
// with Cause set (drift may still take them: EventuallyDisruptable).
func Candidates(views []clusterstate.NodeView, in Inputs) (cands []Candidate, blocked []Block) {
	for _, v := range views {
		nc := v.Claim
		if v.Pool == nil || v.Node == nil || !nc.IsTrue(karpv1.ConditionTypeInitialized) || Marked(nc, v.Node) ||
			(in.Exists != nil && Replacing(nc, in.Exists)) {
			continue
		}
		if b, ok := in.Awaited[nc.Name]; ok {
			b.Claim, b.Node = nc.Name, v.Node.Name
			blocked = append(blocked, b)
			continue
		}
		if NodeDoNotDisrupt(v.Node) {
			blocked = append(blocked, Block{Claim: nc.Name, Node: v.Node.Name, Cause: CauseDoNotDisruptNode,
				Why: fmt.Sprintf("node %s is annotated %s", v.Node.Name, karpv1.DoNotDisruptAnnotationKey)})
			continue
		}
		c := Candidate{NodeView: v, Movable: Movable(v.Pods), Since: since(nc)}
		if cond := nc.Condition(karpv1.ConditionTypeDrifted); cond != nil && cond.Status == "True" {
			c.Drifted = cond.Reason
		}
		if after, ok := ConsolidateAfter(*v.Pool, c.Empty()); ok {
			c.Consolidatable = !in.Now.Before(c.Since.Add(after))
		}
		c.Cause, c.Why, _ = Blocker(v.Pods, c.Movable, in.PDBs, in.Now, in.Bad)
		cands = append(cands, c)
	}
	return cands, blocked
}

// since is when consolidateAfter starts counting for a claim: its last pod event, or its
// initialization if later (a node that never had a pod event counts from when it could).
func since(nc *karpv1.NodeClaim) time.Time {
	t := nc.Status.LastPodEventTime.Time
	if c := nc.Condition(karpv1.ConditionTypeInitialized); c != nil && c.LastTransitionTime.After(t) {
		t = c.LastTransitionTime.Time
	}
	return t
}

// ConsolidateAfter is how long after its last pod event a node of the pool may be consolidated:
// an empty node under WhenEmpty or WhenEmptyOrUnderutilized, one with pods under
// WhenEmptyOrUnderutilized; ok is false when never (consolidateAfter "Never", or the policy).
func ConsolidateAfter(p clusterstate.Pool, empty bool) (time.Duration, bool) {
	d := p.Spec.Disruption
	if d.ConsolidateAfter.Duration == nil {
		return 0, false
	}
	switch d.ConsolidationPolicy {
	case karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized:
		return *d.ConsolidateAfter.Duration, true
	case karpv1.ConsolidationPolicyWhenEmpty:
		return *d.ConsolidateAfter.Duration, empty
	}
	return 0, false
}

// Movable are the pods a disruption of their node evicts and reschedules: active, and neither
// DaemonSet nor mirror (static) pods, which stay with their node.
func Movable(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if PodActive(p) && !podproj.StaysWithNode(p) {
			out = append(out, p)
		}
	}
	return out
}

// Expired reports whether the claim has lived its expireAfter at now, and since when it is due.
func Expired(nc *karpv1.NodeClaim, now time.Time) (bool, time.Time) {
	ea := nc.Spec.ExpireAfter.Duration
	if ea == nil || *ea <= 0 {
		return false, time.Time{}
	}
	due := nc.CreationTimestamp.Add(*ea)
	return !now.Before(due), due
}
