package main

import (
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// candidate is one launched NodeClaim and its node, as the decision stages see them: plain
// data, so the stages are pure functions of it and the clock.
type candidate struct {
	claimRef
	Created     time.Time
	Initialized bool
	HasNode     bool
	Disrupting  bool           // being deleted, or tainted karpenter.sh/disrupted
	Empty       bool           // no pods but DaemonSet and mirror pods
	EmptySince  time.Time      // the node's emptiness timestamp; zero if none
	BlockedBy   string         // a karpenter.sh/do-not-disrupt pod or node, in words
	EmptyAfter  *time.Duration // pool's ttlSecondsAfterEmpty / consolidateAfter; nil: never
	ExpireAfter *time.Duration // claim's expireAfter; nil: never
	RegisterBy  time.Time      // a launched claim's node must have registered by then; zero once it has
	// The termination finalizer is missing from the registered claim or its node.
	ClaimUnfinalized, NodeUnfinalized bool
	// Counted: already among its pool's disrupting nodes (the cluster says so, or an intent this
	// replica published is pending), so terminating it uses no more of the pool's budgets.
	Counted bool
	// Replacing: a replacement still waiting for the pods of the node it replaces (see
	// disruption.Replacing): not empty in any sense that matters yet.
	Replacing bool
	// AwaitedUntil is when the first live nomination of a pending pod to this claim ends by the
	// clock (podproj.Nomination.Expires); zero when none does. Such a pod keeps Empty false.
	AwaitedUntil time.Time
	// KeptFor says why the node stays though it may hold no pod: it was launched for a pod still
	// pending and did not hold it (podproj.LaunchLoopRule.Keeps). It keeps Empty false.
	KeptFor string
}

// actionKind is what a decision stage asks for.
type actionKind int

const (
	markEmpty   actionKind = iota + 1 // record the emptiness timestamp on the node
	unmarkEmpty                       // a pod arrived: clear it, the clock starts again
	terminate                         // publish the intent
	blocked                           // would terminate, but a do-not-disrupt pod or node, or a disruption budget, says no
)

// action is one decision about one candidate.
type action struct {
	Kind      actionKind
	Candidate candidate
	Intent    *terminationv1.TerminationIntent // for terminate
	Why       string
}

// decide runs the stages over every candidate (registration timeout first, then expiry, then
// emptiness), then holds back the emptiness terminations the pools' disruption budgets do not
// allow now (withinBudgets; a pool missing from pools has no budgets).
func decide(cands []candidate, pools map[string]*poolBudget, now time.Time) []action {
	var out []action
	for _, c := range cands {
		if a, ok := liveness(c, now); ok {
			out = append(out, a)
			continue
		}
		if a, ok := expiry(c, now); ok {
			out = append(out, a)
			continue
		}
		if a, ok := emptiness(c, now); ok {
			out = append(out, a)
		}
	}
	return withinBudgets(out, pools, now)
}

// nextDeadline is the first moment after now at which the stages would decide otherwise with
// nothing in the cluster changing: an empty node's TTL ends, a claim expires or misses its
// registration deadline, a pending pod's nomination to a node runs out. The decider is woken
// then (service.Trigger.KickAt); everything else it decides on is a change it is told of.
// Deadlines already past are left out: what they wait for now (a do-not-disrupt annotation to
// go, a budget to allow it) is a change too. Zero when there is none.
func nextDeadline(cands []candidate, now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, c := range cands {
		if c.Disrupting {
			continue
		}
		if !c.RegisterBy.IsZero() {
			consider(c.RegisterBy)
		}
		if c.ExpireAfter != nil {
			consider(c.Created.Add(*c.ExpireAfter))
		}
		if !c.AwaitedUntil.IsZero() {
			consider(c.AwaitedUntil)
		}
		if c.HasNode && c.Initialized && c.Empty && !c.Replacing && c.EmptyAfter != nil && !c.EmptySince.IsZero() {
			consider(c.EmptySince.Add(*c.EmptyAfter))
		}
	}
	return next
}

// emptiness tracks how long an initialized node has been empty and decides to terminate it
// once that reaches the pool's TTL. A pod arriving meanwhile resets the clock.
func emptiness(c candidate, now time.Time) (action, bool) {
	if !c.HasNode || c.Disrupting || !c.Initialized {
		return action{}, false
	}
	if c.Replacing {
		if !c.EmptySince.IsZero() {
			return action{Kind: unmarkEmpty, Candidate: c, Why: "node replaces another and waits for its pods"}, true
		}
		return action{}, false
	}
	switch {
	case !c.Empty && !c.EmptySince.IsZero():
		return action{Kind: unmarkEmpty, Candidate: c, Why: "node is no longer empty"}, true
	case !c.Empty || c.EmptyAfter == nil:
		return action{}, false
	case c.EmptySince.IsZero():
		return action{Kind: markEmpty, Candidate: c, Why: "added TTL to empty node"}, true
	}
	ttl := *c.EmptyAfter
	if now.Before(c.EmptySince.Add(ttl)) {
		return action{}, false
	}
	if c.BlockedBy != "" {
		return action{Kind: blocked, Candidate: c, Why: "empty node not terminated: " + c.BlockedBy + " is annotated " + karpv1.DoNotDisruptAnnotationKey}, true
	}
	in := intentFor(c, commonv1.TerminationReason_TERMINATION_REASON_EMPTY, now,
		c.UID+"/empty/"+strconv.FormatInt(c.EmptySince.Unix(), 10),
		fmt.Sprintf("empty for %s (ttl %s)", now.Sub(c.EmptySince).Round(time.Second), karpv1.FormatDuration(ttl)))
	in.Voluntary = true
	return action{Kind: terminate, Candidate: c, Intent: in,
		Why: fmt.Sprintf("triggering termination after %s for empty node", karpv1.FormatDuration(ttl))}, true
}

// intentFor builds the intent to terminate a candidate.
func intentFor(c candidate, reason commonv1.TerminationReason, now time.Time, id, why string) *terminationv1.TerminationIntent {
	in := &terminationv1.TerminationIntent{
		IntentId: id, NodeClaimName: c.Name, NodeName: c.NodeName, InstanceId: c.InstanceID, ProviderId: c.ProviderID,
		NodePoolName: c.Pool, Reason: reason, RequestTime: timestamppb.New(now), Why: why,
	}
	if c.Grace != nil {
		in.GracePeriod = durationpb.New(*c.Grace)
	}
	return in
}
