package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
)

// Event reasons the terminator records on Nodes, NodeClaims and pods, as Karpenter's.
const (
	reasonDisruptionBlocked     = "DisruptionBlocked"
	reasonDisruptionTerminating = "DisruptionTerminating"
	reasonFailedDraining        = "FailedDraining"           // Node and NodeClaim: the pods still to go
	reasonAwaitingVolumes       = "AwaitingVolumeDetachment" // Node: the VolumeAttachments still bound
	reasonEvicted               = "Evicted"                  // pod: evicted through the Eviction API
	reasonDisrupted             = "Disrupted"                // pod: deleted at the node's termination deadline
	// Node and NodeClaim: the deadline recorded on a deleting claim; pods deleted for it.
	reasonGraceExpiring = "TerminationGracePeriodExpiring"
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

// tellObject records one event on an object (a pod); without a recorder, nothing.
func tellObject(r record.EventRecorder, obj runtime.Object, eventType, reason, message string) {
	if r != nil {
		r.Event(obj, eventType, reason, message)
	}
}
