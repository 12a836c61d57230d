package main

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// The terminator decides no voluntary disruption: emptiness, consolidation, drift and expiry
// are the scheduler's (one decider, one budget ledger), handed over by deleting the NodeClaim,
// which this service then drains and terminates (deleted.go, executor.go). What it decides itself
// is what no scheduler can: a claim whose instance launched and whose node never registered.

// candidate is one launched NodeClaim as the liveness stage sees it: plain data, so the stage is
// a pure function of it and the clock.
type candidate struct {
	claimRef
	Disrupting bool      // being deleted
	RegisterBy time.Time // a launched claim's node must have registered by then; zero once it has
	// The termination finalizer is missing from the registered claim or its node.
	ClaimUnfinalized, NodeUnfinalized bool
	// TraceParent is the trace of the decision that created the claim (telemetry.TraceAnnotation).
	TraceParent string
}

// action is one decision about one candidate: publish Intent.
type action struct {
	Candidate candidate
	Intent    *terminationv1.TerminationIntent
	Why       string
}

// decide runs the liveness stage over every candidate.
func decide(cands []candidate, now time.Time) []action {
	var out []action
	for _, c := range cands {
		if a, ok := liveness(c, now); ok {
			out = append(out, a)
		}
	}
	return out
}

// nextDeadline is the first moment after now at which liveness would decide otherwise with
// nothing changing: a claim misses its registration deadline. The decider is woken then
// (service.Trigger.KickAt). Zero when there is none.
func nextDeadline(cands []candidate, now time.Time) time.Time {
	var next time.Time
	for _, c := range cands {
		if c.Disrupting || c.RegisterBy.IsZero() || !c.RegisterBy.After(now) {
			continue
		}
		if next.IsZero() || c.RegisterBy.Before(next) {
			next = c.RegisterBy
		}
	}
	return next
}

// liveness decides to terminate a claim whose instance launched but whose node never registered
// by its deadline (--registration-ttl after launch): the instance is terminated and the claim
// deleted, so its pods are scheduled again. There is no node, so nothing can block it.
func liveness(c candidate, now time.Time) (action, bool) {
	if c.Disrupting || c.RegisterBy.IsZero() || now.Before(c.RegisterBy) {
		return action{}, false
	}
	in := intentFor(c.claimRef, commonv1.TerminationReason_TERMINATION_REASON_REGISTRATION_TIMEOUT, now, c.UID+"/registration-timeout",
		"no node registered for the instance by "+c.RegisterBy.UTC().Format(time.RFC3339))
	return action{Candidate: c, Intent: in, Why: "triggering termination for a node that never registered"}, true
}

// intentFor builds the intent to terminate a claim.
func intentFor(c claimRef, reason commonv1.TerminationReason, now time.Time, id, why string) *terminationv1.TerminationIntent {
	in := &terminationv1.TerminationIntent{
		IntentId: id, NodeClaimName: c.Name, NodeName: c.NodeName, InstanceId: c.InstanceID, ProviderId: c.ProviderID,
		NodePoolName: c.Pool, Reason: reason, RequestTime: timestamppb.New(now), Why: why,
	}
	if c.Grace != nil {
		in.GracePeriod = durationpb.New(*c.Grace)
	}
	return in
}
