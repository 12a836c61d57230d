package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
)

// deliveries is how many times the durable consumer has handed out messages, redeliveries
// included: with one drain slice per delivery, the drain slices its workers have run.
func (e *env) deliveries(filter, durable string) uint64 {
	e.t.Helper()
	stream, err := e.js.StreamNameBySubject(e.ctx, filter)
	require.NoError(e.t, err)
	cons, err := e.js.Consumer(e.ctx, stream, durable)
	require.NoError(e.t, err)
	info, err := cons.Info(e.ctx)
	require.NoError(e.t, err)
	return info.Delivered.Consumer
}

// Interruptions do not queue behind drains a PodDisruptionBudget holds. Eight expiry drains wait
// on a budget that allows no disruption, redelivered slice after slice on the two --workers
// (JetStream hands redeliveries out before new messages, so some of the eight never even
// start); a spot interruption warning for another node then goes through the urgent lane: its
// node is tainted, drained and terminated while all eight are still blocked, within a few of
// their drain slices, on the first delivery of its intent.
func TestInterruptionOvertakesBlockedDrains(t *testing.T) {
	e := newEnv(t, 106)
	const blocked, workers = 8, 2

	e.budget("held", "held", 0)
	var held []*terminationv1.TerminationIntent
	var heldNodes []string
	for i := range blocked {
		inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
		n := e.node(inst)
		nc := e.claim(fmt.Sprintf("held-%d", i), inst, n.Name, decided(disruption.ReasonExpired))
		e.runningPod(fmt.Sprintf("held-%d", i), n.Name, "held")
		held = append(held, &terminationv1.TerminationIntent{IntentId: string(nc.UID) + "/expired", NodeClaimName: nc.Name, NodeName: n.Name,
			InstanceId: inst.ID, ProviderId: providerID(inst), NodePoolName: "default", Reason: commonv1.TerminationReason_TERMINATION_REASON_EXPIRED,
			RequestTime: timestamppb.Now(), Why: "expired for the test"})
		heldNodes = append(heldNodes, n.Name)
	}
	spot := e.launch(ec2types.DefaultTargetCapacityTypeSpot)
	spotNode := e.node(spot)
	spotClaim := e.claim("spot-urgent", spot, spotNode.Name)
	e.pod("app", spotNode.Name, nil)

	e.run("--workers", fmt.Sprint(workers), "--drain-slice", "10s")
	for _, in := range held {
		e.deleteByHand(in.GetNodeClaimName()) // as the scheduler does when it decides the expiry
		require.NoError(t, e.conn.Publish(e.ctx, intentsSubject(), in, in.GetIntentId()))
	}
	// The workers are taken: each has run three slices of blocked drains, so redeliveries are
	// under way (JetStream hands them out before the queued drains that have not started yet).
	require.Eventually(t, func() bool {
		tainted := 0
		for _, name := range heldNodes {
			if n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{}); err == nil && hasDisruptedTaint(n) {
				tainted++
			}
		}
		return tainted >= workers && e.deliveries(intentsSubject(), "terminator") >= 3*workers
	}, 2*wait, tick, "the blocked drains hold every worker")

	before := e.deliveries(intentsSubject(), "terminator")
	warned := time.Now()
	ev := &interruptionv1.InterruptionEvent{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, InstanceId: spot.ID, EventId: "urgent-1",
		EventTime: timestamppb.New(warned), ReceiveTime: timestamppb.New(warned), Source: "aws.ec2",
		DetailType: "EC2 Spot Instance Interruption Warning", State: "terminate"}
	require.NoError(t, e.conn.Publish(e.ctx, prefix.Interruptions(subject.InterruptionSpot), ev, "urgent-1/"+spot.ID))

	// The bound is counted in the blocked drains' slices, not in seconds: the interruption is
	// done, or the blocked workers have run four slices each without it.
	intentID := string(spotClaim.UID) + "/interrupted"
	var res *terminationv1.TerminationResult
	var spent uint64
	require.Eventually(t, func() bool {
		rs, _ := stored(e, prefix.Of(subject.TerminationsResults), newResult)
		for _, r := range rs {
			if r.GetIntentId() == intentID {
				res = r
			}
		}
		spent = e.deliveries(intentsSubject(), "terminator") - before
		return res != nil || spent >= 4*workers
	}, 3*wait, tick)
	require.NotNil(t, res, "the interruption was carried out before the blocked workers ran %d more drain slices", spent)
	assert.Equal(t, terminationv1.TerminationOutcome_TERMINATION_OUTCOME_TERMINATED, res.GetOutcome(), res.GetError())
	assert.Less(t, spent, uint64(4*workers))

	// Its node was tainted, drained and deleted, in that order ...
	evs, _ := stored(e, prefix.Of(subject.NodesEvents), newNodeEvent)
	var kinds []nodesv1.NodeEventKind
	var drained time.Time
	for _, x := range evs {
		if x.GetNodeName() == spotNode.Name {
			kinds = append(kinds, x.GetKind())
			if x.GetKind() == nodesv1.NodeEventKind_NODE_EVENT_KIND_DRAINED {
				drained = x.GetEventTime().AsTime()
			}
		}
	}
	assert.Equal(t, []nodesv1.NodeEventKind{nodesv1.NodeEventKind_NODE_EVENT_KIND_CORDONED, nodesv1.NodeEventKind_NODE_EVENT_KIND_DRAINED,
		nodesv1.NodeEventKind_NODE_EVENT_KIND_DELETED}, kinds, "the interrupted node was tainted, drained and deleted")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(spot.ID).State)
	t.Logf("spot interruption warning to node drained: %s, with %d drains blocked on %d workers (%d of their slices meanwhile)",
		drained.Sub(warned).Round(time.Millisecond), blocked, workers, spent)

	// ... while every blocked drain still waits: the interruption overtook them.
	for i, name := range heldNodes {
		_, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, fmt.Sprintf("held-%d", i), metav1.GetOptions{})
		assert.NoError(t, err, "the pod on %s is still held by its budget", name)
		_, err = e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, held[i].GetNodeClaimName(), metav1.GetOptions{})
		assert.NoError(t, err, "the claim of %s is still there", name)
	}

	// It went on the urgent subject, and its consumer needed one delivery: one drain slice.
	urgent, _ := stored(e, prefix.Of(subject.TerminationsUrgent), newIntent)
	assert.True(t, slices.ContainsFunc(urgent, func(in *terminationv1.TerminationIntent) bool { return in.GetIntentId() == intentID }),
		"the interruption's intent is on %s", prefix.Of(subject.TerminationsUrgent))
	assert.EqualValues(t, 1, e.deliveries(prefix.Of(subject.TerminationsUrgent), "terminator-urgent"))
	slow, _ := stored(e, intentsSubject(), newIntent)
	assert.False(t, slices.ContainsFunc(slow, func(in *terminationv1.TerminationIntent) bool { return in.GetIntentId() == intentID }),
		"and not among the voluntary and slow intents")
}

// Committing an intent records on the NodeClaim the deadline counted from the intent's request
// time (for a spot interruption, from the warning), not from the commit: an intent a worker
// reached 90 s late has 30 s of its 2 minutes left, not 2 fresh minutes.
func TestCommitRecordsTheIntentsDeadline(t *testing.T) {
	e := newEnv(t, 107)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeSpot)
	nc := e.claim("commit-a", inst, "")
	nodes, claims := writers(e.kube, e.dyn)
	ex := &executor{k: &kube{nodes: nodes, claims: claims}, now: time.Now, log: zerolog.Nop()}
	requested := time.Now().Add(-90 * time.Second).Truncate(time.Second)
	in := &terminationv1.TerminationIntent{IntentId: string(nc.UID) + "/interrupted", NodeClaimName: nc.Name,
		Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, RequestTime: timestamppb.New(requested), GracePeriod: durationpb.New(2 * time.Minute)}
	require.NoError(t, ex.commit(e.ctx, nc, in, true, ex.log))

	u, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, u.GetDeletionTimestamp(), "committed: the claim is deleting")
	assert.Equal(t, requested.Add(2*time.Minute).UTC().Format(time.RFC3339), u.GetAnnotations()[karpv1.NodeClaimTerminationTimestampAnnotationKey],
		"the deadline is the request time plus the grace period")
}
