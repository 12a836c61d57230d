package main

import (
	"fmt"
	"time"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// expiry decides to terminate a NodeClaim that has lived its expireAfter
// (ttlSecondsUntilExpired for v1alpha5). A do-not-disrupt pod or node holds it back.
func expiry(c candidate, now time.Time) (action, bool) {
	if c.Disrupting || c.ExpireAfter == nil {
		return action{}, false
	}
	ttl := *c.ExpireAfter
	if now.Before(c.Created.Add(ttl)) {
		return action{}, false
	}
	if c.BlockedBy != "" {
		return action{Kind: blocked, Candidate: c, Why: "expired node not terminated: " + c.BlockedBy + " is annotated " + karpv1.DoNotDisruptAnnotationKey}, true
	}
	in := intentFor(c, commonv1.TerminationReason_TERMINATION_REASON_EXPIRED, now, c.UID+"/expired",
		fmt.Sprintf("expired %s after creation (expireAfter %s)", now.Sub(c.Created).Round(time.Second), karpv1.FormatDuration(ttl)))
	return action{Kind: terminate, Candidate: c, Intent: in,
		Why: fmt.Sprintf("triggering termination for expired node after %s", karpv1.FormatDuration(ttl))}, true
}

// liveness decides to terminate a claim whose instance launched but whose node never registered
// by its deadline (--registration-ttl after launch): the instance is terminated and the claim
// deleted, so its pods are scheduled again. There is no node, so nothing can block it.
func liveness(c candidate, now time.Time) (action, bool) {
	if c.Disrupting || c.RegisterBy.IsZero() || now.Before(c.RegisterBy) {
		return action{}, false
	}
	in := intentFor(c, commonv1.TerminationReason_TERMINATION_REASON_REGISTRATION_TIMEOUT, now, c.UID+"/registration-timeout",
		"no node registered for the instance by "+c.RegisterBy.UTC().Format(time.RFC3339))
	return action{Kind: terminate, Candidate: c, Intent: in, Why: "triggering termination for a node that never registered"}, true
}
