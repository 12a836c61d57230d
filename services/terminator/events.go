package main

import (
	"k8s.io/client-go/tools/record"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// Event reasons the terminator records on Nodes and NodeClaims, as Karpenter's.
const (
	reasonDisruptionBlocked     = "DisruptionBlocked"
	reasonDisruptionTerminating = "DisruptionTerminating"
	reasonFailedDraining        = "FailedDraining"
)

// tell records one event on the node and on its NodeClaim, whichever of them there is.
func tell(r record.EventRecorder, node, claim, claimUID, eventType, reason, message string) {
	if r == nil {
		return
	}
	if node != "" {
		r.Event(clusterstate.NodeRef(node), eventType, reason, message)
	}
	if claim != "" {
		r.Event(clusterstate.ClaimRef(claim, claimUID), eventType, reason, message)
	}
}
