package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// decisions follows <prefix>.terminations.decisions with the test's own consumer.
func (e *env) decisions() jetstream.Consumer {
	cons, err := e.conn.EnsureConsumer(e.ctx, bus.ConsumerSpec{Durable: "test-decisions", Subject: e.conn.Prefix().Of(subject.TerminationsDecisions)})
	require.NoError(e.t, err)
	return cons
}

// decisionAbout reads DisruptionDecisions until one of the kind about the claim arrives, and
// returns it with its Nats-Msg-Id and every message read before it.
func (e *env) decisionAbout(cons jetstream.Consumer, kind terminationv1.DisruptionDecisionKind, claim string) (
	*terminationv1.DisruptionDecision, string, []*terminationv1.DisruptionDecision,
) {
	e.t.Helper()
	var before []*terminationv1.DisruptionDecision
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Minute))
		require.NoError(e.t, err, "a %s decision about %s is published on %s", kind, claim, subject.TerminationsDecisions)
		require.NoError(e.t, msg.Ack())
		assert.Equal(e.t, "fleetwright.termination.v1.DisruptionDecision", msg.Headers().Get(bus.HeaderType))
		var d terminationv1.DisruptionDecision
		require.NoError(e.t, proto.Unmarshal(msg.Data(), &d))
		if d.Kind == kind && slices.Contains(d.NodeClaimNames, claim) {
			return &d, msg.Headers().Get(bus.HeaderMsgID), before
		}
		before = append(before, &d)
	}
}

// annotate sets an annotation on a NodeClaim.
func (e *env) annotate(name, key, value string) {
	e.t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	require.NoError(e.t, err)
	_, err = e.dyn.Resource(clusterstate.NodeClaims).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(e.t, err)
}

// hasEvent reports whether an event of the reason on the named object says text.
func (e *env) hasEvent(name, reason, text string) bool {
	evs, err := e.kube.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
	require.NoError(e.t, err)
	for _, ev := range evs.Items {
		if strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}

// A replacement that fails to launch abandons the decision: the replacement is deleted, the old
// claim's decision record removed (it no longer counts against its budget), and an event on it
// says why, as does an ABANDONED DisruptionDecision on <prefix>.terminations.decisions for the
// audit stream. Nothing was tainted: the old node's termination was never asked for.
func TestFailedReplacementAbandonsTheDecision(t *testing.T) {
	e := newEnv(t, "abandon")
	decidedAt := time.Now().UTC().Truncate(time.Second)
	rec := disruption.Decision{Reason: karpv1.DisruptionReasonUnderutilized, Action: disruption.ActionReplace, Replacements: []string{"default-rep"},
		DecidedAt: decidedAt, Why: "test", Savings: 0.05, Claims: []string{"default-old"}}.Value()
	e.createClaim("default-old", true)
	e.annotate("default-old", disruption.DecisionAnnotation, rec)
	e.createClaim("default-rep", false)
	e.annotate("default-rep", replacesAnnotation, "default-old")
	e.updateClaimStatus("default-rep", func(nc *karpv1.NodeClaim) {
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionFalse, Reason: "LaunchFailed",
			Message: "InsufficientInstanceCapacity for every offering", LastTransitionTime: metav1.Now()})
	})
	decisions := e.decisions()
	e.start("abandon-1", "--disruption-interval", "200ms")

	api := e.dyn.Resource(clusterstate.NodeClaims)
	require.Eventually(t, func() bool {
		_, err := api.Get(e.ctx, "default-rep", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "the failed replacement is deleted")
	require.Eventually(t, func() bool {
		u, err := api.Get(e.ctx, "default-old", metav1.GetOptions{})
		require.NoError(t, err)
		return u.GetAnnotations()[disruption.DecisionAnnotation] == ""
	}, time.Minute, 100*time.Millisecond, "the old claim no longer carries the decision")
	require.Eventually(t, func() bool {
		return e.hasEvent("default-old", "DisruptionAbandoned", "replacement default-rep failed to launch: InsufficientInstanceCapacity")
	}, time.Minute, 100*time.Millisecond, "an event on the old claim says why it was abandoned")
	assert.NotContains(t, e.logs.String(), "DisruptionTerminating")
	assert.NotContains(t, e.logs.String(), "initialized; draining")

	got, msgID, before := e.decisionAbout(decisions, terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_ABANDONED, "default-old")
	old, err := api.Get(e.ctx, "default-old", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%s/underutilized/%d/abandoned", old.GetUID(), decidedAt.Unix()), got.DecisionId)
	assert.Equal(t, got.DecisionId, msgID, "Nats-Msg-Id is the decision id")
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED, got.Reason)
	assert.Equal(t, terminationv1.DisruptionAction_DISRUPTION_ACTION_REPLACE, got.Action)
	assert.Equal(t, []string{"default-old"}, got.NodeClaimNames)
	assert.Equal(t, []string{"default-rep"}, got.ReplacementNodeClaimNames)
	assert.Equal(t, []string{"default"}, got.NodePoolNames)
	assert.Contains(t, got.Why, "replacement default-rep failed to launch: InsufficientInstanceCapacity")
	assert.InDelta(t, 0.05, got.SavingsUsdPerHour, 1e-9)
	assert.True(t, got.DecidedAt.AsTime().Equal(decidedAt), "decided_at is the decision's time, got %s", got.DecidedAt.AsTime())
	for _, d := range before {
		assert.NotEqual(t, terminationv1.DisruptionDecisionKind_DISRUPTION_DECISION_KIND_TERMINATING, d.Kind, "nothing was terminated: %v", d)
	}
}

// A replacement whose node registered but is not initialized within --replacement-timeout
// abandons the decision, and is kept, as Karpenter keeps it (its "Drift Failure … registers but
// never initialized" spec counts it): it is a node of the cluster, ordinary capacity from then on,
// so it no longer names the claim it replaced. The old claim is untainted and keeps its node.
func TestAbandonKeepsARegisteredReplacement(t *testing.T) {
	e := newEnv(t, "abandon-kept")
	decidedAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	rec := disruption.Decision{Reason: karpv1.DisruptionReasonDrifted, Action: disruption.ActionReplace, Replacements: []string{"default-rep"},
		DecidedAt: decidedAt, Why: "test", Claims: []string{"default-old"}}.With(disruption.StepLaunched, decidedAt, "").Value()
	e.createClaim("default-old", true)
	e.annotate("default-old", disruption.DecisionAnnotation, rec)
	e.createClaim("default-rep", true)
	e.annotate("default-rep", replacesAnnotation, "default-old")
	e.updateClaimStatus("default-rep", func(nc *karpv1.NodeClaim) {
		nc.Status.NodeName = "ip-10-0-0-9.ec2.internal"
		nc.SetCondition(metav1.Condition{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue, Reason: "Registered", LastTransitionTime: metav1.Now()})
	})
	e.start("abandon-kept-1", "--disruption-interval", "200ms", "--replacement-timeout", "1m")

	api := e.dyn.Resource(clusterstate.NodeClaims)
	require.Eventually(t, func() bool {
		return e.hasEvent("default-old", "DisruptionAbandoned", "not initialized within 1m0s")
	}, time.Minute, 100*time.Millisecond, "the decision is abandoned")
	require.Eventually(t, func() bool {
		u, err := api.Get(e.ctx, "default-old", metav1.GetOptions{})
		require.NoError(t, err)
		return u.GetAnnotations()[disruption.DecisionAnnotation] == ""
	}, time.Minute, 100*time.Millisecond, "the old claim no longer carries the decision")
	rep, err := api.Get(e.ctx, "default-rep", metav1.GetOptions{})
	require.NoError(t, err, "the registered replacement is kept")
	assert.Nil(t, rep.GetDeletionTimestamp(), "and not deleted")
	assert.NotContains(t, rep.GetAnnotations(), replacesAnnotation, "it replaces nothing now")
}
