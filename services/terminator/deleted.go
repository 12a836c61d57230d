package main

import (
	"strconv"
	"strings"
	"time"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// deleting drives every deleting NodeClaim and Node the termination finalizer holds to its
// end, level-triggered from the objects rather than from the messages that started it:
//
//   - one deleted by the scheduler's decision (disruption.DecisionAnnotation: Empty,
//     Underutilized, Drifted, Expired) gets an intent of that reason, <uid>/<reason>; one someone
//     else deleted (kubectl, the emulator deleting a terminated instance's Node) a manual intent,
//     <uid>/deleted;
//   - one whose termination shows no progress for resumeAfter (progressAnnotation, else the
//     deletionTimestamp) gets its intent again, <uid>/<reason>/resumed/<last progress>: the intent
//     that was carrying it out aged out of the stream, was dead-lettered or purged, or its
//     worker is stuck. A NodeClaim the executor is working on records progress well within
//     resumeAfter and is left alone.
//
// The ids are deterministic, so the repeats of every pass (and of every replica) fall in
// JetStream's duplicate window; a repeat after the window, or a resumed intent next to a
// live one, is harmless: every step of the executor is idempotent.
func (k *kube) deleting(now time.Time, resumeAfter time.Duration) []*terminationv1.TerminationIntent {
	var out []*terminationv1.TerminationIntent
	byNode := map[string]*karpv1.NodeClaim{}
	for _, nc := range k.cache.Claims() {
		if nc.Status.NodeName != "" {
			byNode[nc.Status.NodeName] = nc
		}
		if nc.DeletionTimestamp == nil || !finalized(nc) {
			continue
		}
		last, beat := nc.DeletionTimestamp.Time, false
		if t, err := time.Parse(time.RFC3339, nc.Annotations[progressAnnotation]); err == nil {
			last, beat = t, true
		}
		switch {
		case nc.Annotations[intentAnnotation] == "" && !beat:
			out = append(out, deletedIntent(nc, now))
		case now.Sub(last) >= resumeAfter:
			out = append(out, resumedIntent(nc, last, now))
		}
	}
	for _, n := range k.cache.AllNodes() {
		if n.DeletionTimestamp == nil || !finalized(n) {
			continue
		}
		nc := byNode[n.Name]
		switch {
		case nc == nil:
			out = append(out, manualIntent(claimRef{NodeName: n.Name, ProviderID: n.Spec.ProviderID, InstanceID: ec2v1.InstanceID(n.Spec.ProviderID),
				Pool: clusterstate.PoolOf(n.Labels)}, string(n.UID), now))
		case nc.DeletionTimestamp == nil:
			out = append(out, manualIntent(refOf(nc), string(nc.UID), now))
		}
	}
	return out
}

// resumedMark is in the id of every intent kube.deleting publishes again.
const resumedMark = "/resumed/"

func manualIntent(c claimRef, uid string, now time.Time) *terminationv1.TerminationIntent {
	what := "nodeclaim " + c.Name
	if c.Name == "" {
		what = "node " + c.NodeName
	}
	return intentFor(c, commonv1.TerminationReason_TERMINATION_REASON_MANUAL, now, uid+"/deleted", what+" was deleted")
}

// decidedReasons are the termination reasons of the scheduler's decisions.
var decidedReasons = map[karpv1.DisruptionReason]commonv1.TerminationReason{
	karpv1.DisruptionReasonEmpty:         commonv1.TerminationReason_TERMINATION_REASON_EMPTY,
	karpv1.DisruptionReasonUnderutilized: commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED,
	karpv1.DisruptionReasonDrifted:       commonv1.TerminationReason_TERMINATION_REASON_DRIFTED,
	disruption.ReasonExpired:             commonv1.TerminationReason_TERMINATION_REASON_EXPIRED,
}

// deletedIntent is the intent to drain and terminate a deleted NodeClaim: of its decision's
// reason if the scheduler deleted it (what the decision says on the claim, not what a message
// says), else a manual one. It counts its grace period from the deletion.
func deletedIntent(nc *karpv1.NodeClaim, now time.Time) *terminationv1.TerminationIntent {
	d, ok, _ := disruption.DecisionOf(nc)
	reason, decided := decidedReasons[d.Reason]
	if !ok || !decided {
		return manualIntent(refOf(nc), string(nc.UID), now)
	}
	in := intentFor(refOf(nc), reason, nc.DeletionTimestamp.Time, string(nc.UID)+"/"+reasonName(reason), d.Why)
	in.Voluntary = d.Reason != disruption.ReasonExpired
	in.ReplacementNodeClaimNames = d.Replacements
	return in
}

// resumedIntent publishes again the termination of a deleting NodeClaim whose progress
// stopped at last, with the reason of the intent that deleted it (manual if none did).
func resumedIntent(nc *karpv1.NodeClaim, last, now time.Time) *terminationv1.TerminationIntent {
	reason := commonv1.TerminationReason_TERMINATION_REASON_MANUAL
	prev := nc.Annotations[intentAnnotation]
	if parts := strings.Split(prev, "/"); len(parts) > 1 {
		if r, ok := commonv1.TerminationReason_value["TERMINATION_REASON_"+strings.ToUpper(parts[1])]; ok {
			reason = commonv1.TerminationReason(r)
		}
	}
	why := "nodeclaim " + nc.Name + " is deleting and its termination made no progress since " + last.UTC().Format(time.RFC3339)
	if prev != "" {
		why += " (intent " + prev + ")"
	}
	in := intentFor(refOf(nc), reason, now, string(nc.UID)+"/"+reasonName(reason)+resumedMark+strconv.FormatInt(last.Unix(), 10), why)
	return in
}
