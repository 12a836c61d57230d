package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	interruptionv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/interruption/v1"
	nodesv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/nodes/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
)

const (
	interruptionsConsumer = "terminator-interruptions"
	wait, tick            = 60 * time.Second, 100 * time.Millisecond
)

func newEvent() *interruptionv1.InterruptionEvent { return &interruptionv1.InterruptionEvent{} }
func newIntent() *terminationv1.TerminationIntent { return &terminationv1.TerminationIntent{} }
func newResult() *terminationv1.TerminationResult { return &terminationv1.TerminationResult{} }
func newNodeEvent() *nodesv1.NodeEvent            { return &nodesv1.NodeEvent{} }
func intentsSubject() string                      { return prefix.Of(subject.TerminationsIntents) }

// intents returns every TerminationIntent on the bus, on both subjects (intentSubject).
func (e *env) intents() []*terminationv1.TerminationIntent {
	in, _ := stored(e, intentsSubject(), newIntent)
	urgent, _ := stored(e, prefix.Of(subject.TerminationsUrgent), newIntent)
	return append(in, urgent...)
}

// polled waits for the InterruptionEvent about an instance, for the interruption queue to be
// emptied and for the interruptions consumer to handle the event, which it returns.
func (e *env) polled(id string) *interruptionv1.InterruptionEvent {
	e.t.Helper()
	var ev *interruptionv1.InterruptionEvent
	var seq uint64
	require.Eventually(e.t, func() bool {
		evs, seqs := stored(e, prefix.AllInterruptions(), newEvent)
		for i, x := range evs {
			if x.GetInstanceId() == id {
				ev, seq = x, seqs[i]
				return true
			}
		}
		return false
	}, wait, tick, "an InterruptionEvent for %s on the bus", id)
	e.queueDrained()
	e.handled(seq)
	return ev
}

// handled waits until the interruptions consumer has handled the event of stream sequence seq.
func (e *env) handled(seq uint64) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.consumed(prefix.AllInterruptions(), interruptionsConsumer, seq) }, wait, tick,
		"the interruptions consumer handled the event")
}

// queueDrained waits until the interruption queue holds no message, visible or in flight.
func (e *env) queueDrained() {
	e.t.Helper()
	url, err := e.sqs.GetQueueUrl(e.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("fleetwright-demo-cluster")})
	require.NoError(e.t, err)
	require.Eventually(e.t, func() bool {
		out, err := e.sqs.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		require.NoError(e.t, err)
		return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
	}, wait, tick, "the interruption queue is emptied")
	assert.True(e.t, slices.ContainsFunc(e.emu.Calls(), func(c awsemu.Call) bool { return c.Action == "DeleteMessage" && c.ErrorCode == "" }),
		"the terminator deleted the message")
}

// A spot interruption warning for a known instance becomes an InterruptionEvent, its SQS
// message is deleted, and the interruptions consumer (not the poller) publishes the
// TerminationIntent for the instance's NodeClaim.
func TestSpotInterruptionBecomesIntent(t *testing.T) {
	e := newEnv(t, 101)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeSpot)
	nc := e.claim("spot-a", inst, "")
	e.run()
	require.NoError(t, e.emu.Interrupt(awsemu.Interruption{Kind: awsemu.KindSpotInterruption, InstanceID: inst.ID, Notice: -1}))

	ev := e.polled(inst.ID)
	assert.Equal(t, commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, ev.GetKind())
	assert.Equal(t, "spot-a", ev.GetNodeClaimName(), "the poller resolved the instance's NodeClaim")

	var in *terminationv1.TerminationIntent
	require.Eventually(t, func() bool {
		for _, x := range e.intents() {
			if x.GetIntentId() == string(nc.UID)+"/interrupted" {
				in = x
				return true
			}
		}
		return false
	}, wait, tick, "a TerminationIntent for the NodeClaim")
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, in.GetReason())
	assert.Equal(t, "spot-a", in.GetNodeClaimName())
	assert.Equal(t, inst.ID, in.GetInstanceId())
	assert.Equal(t, ev.GetEventId(), in.GetInterruptionEventId())
	assert.Contains(t, in.GetWhy(), "EC2 Spot Instance Interruption Warning")
}

// A rebalance recommendation is recorded on the bus, its message deleted, and no intent
// follows; a malformed message before it is counted, dead-lettered and deleted, and the poller
// goes on.
func TestRebalanceRecordedAndMalformedSkipped(t *testing.T) {
	e := newEnv(t, 102)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeSpot)
	e.claim("rebalance-a", inst, "")
	e.run()
	url, err := e.sqs.GetQueueUrl(e.ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("fleetwright-demo-cluster")})
	require.NoError(t, err)
	_, err = e.sqs.SendMessage(e.ctx, &sqs.SendMessageInput{QueueUrl: url.QueueUrl, MessageBody: aws.String(`{"version":"0","detail-type":`)})
	require.NoError(t, err)
	require.NoError(t, e.emu.Interrupt(awsemu.Interruption{Kind: awsemu.KindRebalance, InstanceID: inst.ID}))

	ev := e.polled(inst.ID)
	assert.Equal(t, commonv1.InterruptionKind_INTERRUPTION_KIND_REBALANCE_RECOMMENDATION, ev.GetKind())
	assert.Equal(t, "rebalance-a", ev.GetNodeClaimName(), "the instance is a known node")
	// The consumer publishes an intent before it acknowledges the event: none is coming.
	assert.Empty(t, e.intents(), "a rebalance recommendation terminates nothing")
	m := e.metrics()
	assert.Regexp(t, regexp.MustCompile(`fleetwright_interruption_messages_total\{kind="malformed"\} 1\b`), m)
	st, err := e.conn.JetStream().Stream(e.ctx, prefix.Stream(subject.StreamDeadLetter))
	require.NoError(t, err)
	dl, err := st.GetLastMsgForSubject(e.ctx, prefix.DeadLetter(prefix.Of(subject.SQSInterruptions)))
	require.NoError(t, err, "the malformed body is dead-lettered")
	assert.Equal(t, `{"version":"0","detail-type":`, string(dl.Data))
	assert.Contains(t, dl.Header.Get(bus.HeaderError), "decoding event")
	assert.Regexp(t, regexp.MustCompile(`fleetwright_interruption_messages_total\{kind="rebalance_recommendation"\} 1\b`), m)
}

// The interruptions consumer decides from the event alone, whoever published it: a state
// change to running is recorded, one to stopping terminates the instance's NodeClaim.
func TestStateChangeEventsDecidedByConsumer(t *testing.T) {
	e := newEnv(t, 104)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	nc := e.claim("state-a", inst, "")
	e.run()
	publish := func(id, state string) uint64 {
		ev := &interruptionv1.InterruptionEvent{Kind: commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, InstanceId: inst.ID, EventId: id,
			EventTime: timestamppb.New(epoch), Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification", State: state}
		ack, err := e.conn.PublishAck(e.ctx, prefix.Interruptions(subject.InterruptionStateChange), ev, id+"/"+inst.ID)
		require.NoError(t, err)
		return ack.Sequence
	}

	e.handled(publish("ev-running", "running"))
	assert.Empty(t, e.intents(), "an instance that keeps running is not drained")

	publish("ev-stopping", "stopping")
	require.Eventually(t, func() bool { return len(e.intents()) > 0 }, wait, tick, "a TerminationIntent for the stopping instance")
	in := e.intents()[0]
	assert.Equal(t, string(nc.UID)+"/interrupted", in.GetIntentId())
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, in.GetReason())
	assert.Equal(t, "ev-stopping", in.GetInterruptionEventId())
	assert.Contains(t, in.GetWhy(), "(stopping)")
}

// The executor, given an intent for a NodeClaim with a node and pods that the scheduler decided
// and deleted, cordons and taints the node, evicts the pods, terminates the instance and lets
// Node and NodeClaim go.
func TestExecutorTerminatesClaimWithNode(t *testing.T) {
	e := newEnv(t, 103)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	node := e.node(inst)
	nc := e.claim("exec-a", inst, node.Name)
	for _, name := range []string{"app-1", "app-2"} {
		_, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node.Name, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	e.run()
	// Watch the node from here, to see every version of it the terminator writes.
	w, err := e.kube.CoreV1().Nodes().Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node.Name, ResourceVersion: "0"})
	require.NoError(t, err)
	tainted := make(chan bool, 1)
	go func() {
		seen := false
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && hasDisruptedTaint(n) {
				seen = true
			}
		}
		tainted <- seen
	}()

	in := &terminationv1.TerminationIntent{IntentId: string(nc.UID) + "/expired", NodeClaimName: nc.Name, NodeName: node.Name,
		InstanceId: inst.ID, ProviderId: providerID(inst), NodePoolName: "default", Reason: commonv1.TerminationReason_TERMINATION_REASON_EXPIRED,
		RequestTime: timestamppb.New(epoch), Why: "test"}
	e.deleteDecided(nc.Name, disruption.ReasonExpired)
	require.NoError(t, e.conn.Publish(e.ctx, intentsSubject(), in, in.GetIntentId()))

	var res *terminationv1.TerminationResult
	require.Eventually(t, func() bool {
		rs, _ := stored(e, prefix.Of(subject.TerminationsResults), newResult)
		for _, r := range rs {
			if r.GetIntentId() == in.GetIntentId() {
				res = r
				return true
			}
		}
		return false
	}, wait, tick, "a TerminationResult for the intent")
	assert.Equal(t, terminationv1.TerminationOutcome_TERMINATION_OUTCOME_TERMINATED, res.GetOutcome(), res.GetError())
	assert.EqualValues(t, 2, res.GetPodsEvicted(), "both pods went through the Eviction API")
	assert.Equal(t, inst.ID, res.GetInstanceId())
	w.Stop()
	assert.True(t, <-tainted, "the node was tainted %s", karpv1.DisruptedTaintKey)

	evs, _ := stored(e, prefix.Of(subject.NodesEvents), newNodeEvent)
	var kinds []nodesv1.NodeEventKind
	for _, ev := range evs {
		if ev.GetNodeName() == node.Name {
			kinds = append(kinds, ev.GetKind())
		}
	}
	assert.Equal(t, []nodesv1.NodeEventKind{nodesv1.NodeEventKind_NODE_EVENT_KIND_CORDONED, nodesv1.NodeEventKind_NODE_EVENT_KIND_DRAINED,
		nodesv1.NodeEventKind_NODE_EVENT_KIND_DELETED}, kinds, "cordoned (tainted), drained, deleted, in that order")

	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(inst.ID).State)
	assert.True(t, slices.ContainsFunc(e.emu.Calls(), func(c awsemu.Call) bool { return c.Action == "TerminateInstances" && c.ErrorCode == "" }))
	pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, pods.Items, "the pods were evicted")
	_, err = e.kube.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the node is gone: its finalizer was removed (%v)", err)
	_, err = e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the nodeclaim is gone: its finalizer was removed (%v)", err)
	// Why it went is the scheduler's DisruptionTerminating, told when it deleted the claim; the
	// terminator tells it for what it deletes itself (TestInterruptionOvertakesBlockedDrains).
}

// The terminator owns what never joined. A launched claim whose node has not registered by
// --registration-ttl after launch has its instance terminated and is deleted, so its pods are
// scheduled again; an instance tagged as the cluster's that no claim owns is terminated. A claim
// launched a moment ago, and its instance, are left alone.
func TestRegistrationTimeoutAndOrphans(t *testing.T) {
	e := newEnv(t, 105)
	owned := func(claim string) []ec2types.Tag {
		return []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String(claim)}}
	}
	late := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, owned("noreg-a")...)
	e.conditionsAt(e.claim("noreg-a", late, ""), time.Now().Add(-time.Hour), karpv1.ConditionTypeLaunched)
	fresh := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, owned("noreg-b")...)
	e.conditionsAt(e.claim("noreg-b", fresh, ""), time.Now(), karpv1.ConditionTypeLaunched)
	orphan := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, owned("deleted-by-hand")...)
	// Tagged for the cluster and with a claim's name, but no node pool: not Fleetwright's.
	stranger := e.launchTagged(ec2types.DefaultTargetCapacityTypeOnDemand,
		ec2types.Tag{Key: aws.String("kubernetes.io/cluster/demo-cluster"), Value: aws.String("owned")},
		ec2types.Tag{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("not-ours")})
	e.run("--registration-ttl", "15m", "--gc-interval", "200ms", "--gc-grace", "1m")

	running := func(id string) bool { s := e.instance(id).State; return s == "running" || s == "pending" }
	require.Eventually(t, func() bool {
		_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, "noreg-a", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && !running(late.ID)
	}, wait, tick, "the claim that never registered is deleted and its instance terminated")
	require.Eventually(t, func() bool { return !running(orphan.ID) }, wait, tick, "the instance no claim owns is terminated")
	in := e.intents()
	require.Len(t, in, 1, "one decision: the registration timeout")
	assert.Equal(t, commonv1.TerminationReason_TERMINATION_REASON_REGISTRATION_TIMEOUT, in[0].GetReason())
	assert.Equal(t, "noreg-a", in[0].GetNodeClaimName())
	assert.True(t, running(fresh.ID), "a claim launched a moment ago keeps its instance")
	assert.True(t, running(stranger.ID), "an instance without karpenter.sh/nodepool is never collected")
	_, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, "noreg-b", metav1.GetOptions{})
	assert.NoError(t, err)
	// Counted once TerminateInstances has answered, which may be after the emulator shows it.
	assert.Eventually(t, func() bool { return strings.Contains(e.metrics(), "fleetwright_terminator_orphans_terminated_total 1") }, wait, tick)
}

// The terminator ends only instances tagged for the cluster and a node pool, as the launcher
// tags them and as its IAM policy allows. An EKS managed node group's instance carries the
// cluster tag too: an intent naming its node (or only its instance) is refused — dead-lettered
// with the reason — and the node is neither tainted nor drained, the instance left running.
func TestExecutorNeverTerminatesManagedNodeGroupInstances(t *testing.T) {
	e := newEnv(t, 106)
	mngTags := []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/demo-cluster"), Value: aws.String("owned")},
		{Key: aws.String("eks:nodegroup-name"), Value: aws.String("system")}}
	withNode := e.launchTagged(ec2types.DefaultTargetCapacityTypeOnDemand, mngTags...)
	bare := e.launchTagged(ec2types.DefaultTargetCapacityTypeOnDemand, mngTags...)
	node := e.node(withNode, func(n *corev1.Node) { n.Labels, n.Finalizers = nil, nil }) // no pool's, not the terminator's
	e.run()

	urgent := prefix.Of(subject.TerminationsUrgent)
	var seqs []uint64
	for _, in := range []*terminationv1.TerminationIntent{
		{IntentId: "mng-node/interrupted", NodeName: node.Name, Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED,
			RequestTime: timestamppb.New(epoch), Why: "test"},
		{IntentId: "mng-bare/interrupted", NodeName: "gone-" + bare.PrivateDNS, InstanceId: bare.ID,
			Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, RequestTime: timestamppb.New(epoch), Why: "test"},
	} {
		ack, err := e.conn.PublishAck(e.ctx, urgent, in, in.GetIntentId()) // interruptions come on the urgent subject
		require.NoError(t, err)
		seqs = append(seqs, ack.Sequence)
	}
	require.Eventually(t, func() bool {
		return e.consumed(urgent, "terminator-urgent", seqs[0]) && e.consumed(urgent, "terminator-urgent", seqs[1])
	}, wait, tick, "both intents are settled")
	// Counted once the message is settled, which the consumer's state may show first.
	assert.Eventually(t, func() bool {
		return strings.Contains(e.metrics(), `outcome="deadlettered",subject="`+urgent+`"} 2`)
	}, wait, tick, "the refusals are dead-lettered, not retried")

	for _, inst := range []awsemu.InstanceInfo{withNode, bare} {
		assert.Equal(t, "running", e.instance(inst.ID).State, "instance %s is a managed node group's", inst.ID)
	}
	assert.False(t, slices.ContainsFunc(e.emu.Calls(), func(c awsemu.Call) bool { return c.Action == "TerminateInstances" }),
		"TerminateInstances is never called")
	n, err := e.kube.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
	require.NoError(t, err, "the node stays")
	assert.False(t, hasDisruptedTaint(n), "the node is not tainted")
	assert.False(t, n.Spec.Unschedulable)
}

// Issue 26, a spec of Karpenter's drift suite: a Node held by another's finalizer after the
// terminator deleted it keeps its NodeClaim (InstanceTerminating) until it is gone, as
// Karpenter's termination does; the claim went at once, and budgets then took the lingering
// node for gone and disrupted one more node than they allowed.
func TestClaimIsKeptUntilItsNodeIsGone(t *testing.T) {
	e := newEnv(t, 121)
	inst := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	const hold = "example.com/hold"
	node := e.node(inst, func(n *corev1.Node) { n.Finalizers = append(n.Finalizers, hold) })
	nc := e.claim("held-a", inst, node.Name)
	e.run()

	in := &terminationv1.TerminationIntent{IntentId: string(nc.UID) + "/drifted", NodeClaimName: nc.Name, NodeName: node.Name,
		InstanceId: inst.ID, ProviderId: providerID(inst), NodePoolName: "default", Reason: commonv1.TerminationReason_TERMINATION_REASON_DRIFTED,
		RequestTime: timestamppb.New(epoch), Why: "test"}
	e.deleteDecided(nc.Name, karpv1.DisruptionReasonDrifted)
	require.NoError(t, e.conn.Publish(e.ctx, intentsSubject(), in, in.GetIntentId()))

	require.Eventually(t, func() bool {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
		return err == nil && n.DeletionTimestamp != nil && !slices.Contains(n.Finalizers, karpv1.TerminationFinalizer)
	}, wait, tick, "the node is deleted, only the other finalizer left on it")
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(inst.ID).State, "the instance is ended")
	calls := func(action string) int {
		n := 0
		for _, c := range e.emu.Calls() {
			if c.Action == action {
				n++
			}
		}
		return n
	}
	claimOf := func() *karpv1.NodeClaim {
		u, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, nc.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		var c karpv1.NodeClaim
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c))
		return &c
	}
	// Deliveries come again while the node is held (each checks the instance is the cluster's):
	// the claim stays through them, and EC2 is asked to end the instance once.
	describes := calls("DescribeInstances")
	require.Eventually(t, func() bool { return calls("DescribeInstances") >= describes+2 }, wait, tick,
		"the intent is delivered again while the node is held")
	assert.Equal(t, 1, calls("TerminateInstances"), "the instance is ended once, not on every delivery")
	claim := claimOf()
	require.NotNil(t, claim, "the claim is kept while its node is there")
	assert.True(t, claim.IsTrue(karpv1.ConditionTypeInstanceTerminating), "and says its instance is terminating")

	_, err := e.kube.CoreV1().Nodes().Patch(e.ctx, node.Name, types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/metadata/finalizers","value":[]}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return claimOf() == nil }, wait, tick, "the claim goes once its node has")
}
