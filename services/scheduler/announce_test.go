package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

func testClaim(name, uid, pool, node string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + uid), Labels: map[string]string{karpv1.NodePoolLabelKey: pool}}}
	nc.Status.NodeName = node
	return nc
}

// The messages each step of a decision puts on the bus: what they name, and ids that are the
// same however often (and by whichever replica) the step is told, different between steps.
func TestDisruptionDecisionMessages(t *testing.T) {
	at := time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC)
	a, b := testClaim("spot-a", "a", "spot", "node-a"), testClaim("default-b", "b", "default", "")
	rec := disruption.Decision{Reason: karpv1.DisruptionReasonUnderutilized, Action: disruption.ActionDelete, DecidedAt: at, Why: "pods fit elsewhere",
		Savings: 0.3, Claims: []string{"spot-a", "default-b"}}

	d := decidedMessage([]*karpv1.NodeClaim{a, b}, rec)
	assert.Equal(t, terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_DECIDED, d.Kind)
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED, d.Reason)
	assert.Equal(t, terminationv1.DisruptionAction_DISRUPTION_ACTION_DELETE, d.Action)
	assert.Equal(t, []string{"spot-a", "default-b"}, d.NodeClaimNames)
	assert.Equal(t, []string{"node-a", ""}, d.NodeNames, "one node name per claim, in order")
	assert.Equal(t, []string{"default", "spot"}, d.NodePoolNames)
	assert.Equal(t, "pods fit elsewhere", d.Why)
	assert.InDelta(t, 0.3, d.SavingsUsdPerHour, 1e-9)
	assert.True(t, d.DecidedAt.AsTime().Equal(at))
	assert.Regexp(t, `^[0-9a-f]{16}/underutilized/1795539600/decided$`, d.DecisionId, "several claims: a hash of their uids")
	assert.Equal(t, d.DecisionId, decidedMessage([]*karpv1.NodeClaim{b, a}, rec).DecisionId, "in any order")

	term := terminatingMessage(a, rec)
	assert.Equal(t, "uid-a/underutilized/1795539600/terminating", term.DecisionId, "the termination intent's id, and the step")
	assert.Equal(t, []string{"spot-a"}, term.NodeClaimNames)
	assert.InDelta(t, 0.15, term.SavingsUsdPerHour, 1e-9, "the node's share")

	drift := disruption.Decision{Reason: karpv1.DisruptionReasonDrifted, Action: disruption.ActionReplace, Replacements: []string{"default-r1"},
		DecidedAt: at, Why: "drifted", Claims: []string{"default-b"}}
	ab := abandonedMessage(b, drift, "replacement default-r1 is gone")
	assert.Equal(t, "uid-b/drifted/1795539600/abandoned", ab.DecisionId)
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_DRIFTED, ab.Reason)
	assert.Equal(t, terminationv1.DisruptionAction_DISRUPTION_ACTION_REPLACE, ab.Action)
	assert.Equal(t, []string{"default-r1"}, ab.ReplacementNodeClaimNames)
	assert.Equal(t, "replacement default-r1 is gone", ab.Why)

	bl := blockedMessage(a, karpv1.DisruptionReasonUnderutilized, "pod ns/p is annotated karpenter.sh/do-not-disrupt", at)
	assert.Equal(t, terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_BLOCKED, bl.Kind)
	assert.Equal(t, terminationv1.DisruptionAction_DISRUPTION_ACTION_UNSPECIFIED, bl.Action)
	assert.Empty(t, bl.ReplacementNodeClaimNames)
	assert.Regexp(t, `^uid-a/underutilized/blocked/[0-9a-f]{12}$`, bl.DecisionId)
	assert.Equal(t, bl.DecisionId, blockedMessage(a, karpv1.DisruptionReasonUnderutilized, bl.Why, at.Add(time.Hour)).DecisionId,
		"a block told again later is the same message")
	assert.NotEqual(t, bl.DecisionId, blockedMessage(a, karpv1.DisruptionReasonUnderutilized, "budget", at).DecisionId)
	assert.NotEqual(t, bl.DecisionId, blockedMessage(a, karpv1.DisruptionReasonDrifted, bl.Why, at).DecisionId)
}
