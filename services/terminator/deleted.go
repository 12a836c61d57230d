package main

import (
	"time"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// deletedByOthers finds NodeClaims and Nodes someone else deleted (kubectl, the emulator
// deleting a terminated instance's Node) that the termination finalizer holds, and decides
// to terminate them. A NodeClaim the executor deleted carries its intent's id and is skipped:
// that intent is still being delivered.
func (k *kube) deletedByOthers(now time.Time) []*terminationv1.TerminationIntent {
	var out []*terminationv1.TerminationIntent
	byNode := map[string]*karpv1.NodeClaim{}
	for _, nc := range k.cache.Claims() {
		if nc.Status.NodeName != "" {
			byNode[nc.Status.NodeName] = nc
		}
		if nc.DeletionTimestamp == nil || !finalized(nc) || nc.Annotations[intentAnnotation] != "" {
			continue
		}
		out = append(out, manualIntent(refOf(nc), string(nc.UID), now))
	}
	for _, n := range k.cache.AllNodes() {
		if n.DeletionTimestamp == nil || !finalized(n) {
			continue
		}
		nc := byNode[n.Name]
		switch {
		case nc == nil:
			out = append(out, manualIntent(claimRef{NodeName: n.Name, ProviderID: n.Spec.ProviderID, InstanceID: ec2v1.InstanceID(n.Spec.ProviderID),
				Pool: poolOf(n.Labels)}, string(n.UID), now))
		case nc.DeletionTimestamp == nil:
			out = append(out, manualIntent(refOf(nc), string(nc.UID), now))
		}
	}
	return out
}

func manualIntent(c claimRef, uid string, now time.Time) *terminationv1.TerminationIntent {
	what := "nodeclaim " + c.Name
	if c.Name == "" {
		what = "node " + c.NodeName
	}
	in := intentFor(candidate{claimRef: c}, commonv1.TerminationReason_TERMINATION_REASON_MANUAL, now, uid+"/deleted", what+" was deleted")
	return in
}
