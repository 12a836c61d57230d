package main

import (
	"time"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// claimDeadline is when a deleting NodeClaim's node goes whatever its pods, as Karpenter v1
// reads it: karpenter.sh/nodeclaim-termination-timestamp (which Karpenter, and this executor,
// record on the claim once it is deleting), else its deletionTimestamp plus its
// spec.terminationGracePeriod. None for a claim not being deleted, nor for one without a
// terminationGracePeriod: its drain waits for every pod.
func claimDeadline(nc *karpv1.NodeClaim) (time.Time, bool) {
	if nc == nil || nc.DeletionTimestamp == nil {
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]); err == nil {
		return t, true
	}
	if g := nc.Spec.TerminationGracePeriod; g != nil {
		return nc.DeletionTimestamp.Add(g.Duration), true
	}
	return time.Time{}, false
}

// drainDeadline is when the drain deletes what pods are left (zero: never): the claim's
// (claimDeadline) and, for an interruption, the intent's own (intentDeadline: when AWS takes
// the instance), whichever comes first. Nothing else in the intent counts: the grace period
// and request time of a decision are not the deletion's, which the claim records.
func drainDeadline(claim *karpv1.NodeClaim, in *terminationv1.TerminationIntent, interruption bool, now time.Time) time.Time {
	at, ok := claimDeadline(claim)
	if !interruption {
		return at
	}
	if own, has := intentDeadline(in, now); has && (!ok || own.Before(at)) {
		return own
	}
	return at
}

// intentDeadline is the instant an interruption intent's grace period ends: its request time
// plus its grace period (for a spot interruption, when AWS reclaims the instance), not the time
// a worker got to it. An intent without a request time counts from now; one without a grace
// period has no deadline.
func intentDeadline(in *terminationv1.TerminationIntent, now time.Time) (time.Time, bool) {
	g := in.GetGracePeriod()
	if g == nil {
		return time.Time{}, false
	}
	from := now
	if t := in.GetRequestTime(); t != nil && t.IsValid() && t.AsTime().Unix() > 0 {
		from = t.AsTime()
	}
	return from.Add(g.AsDuration()), true
}
