package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/subject"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	terminationv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/termination/v1"
	"github.com/fleetwright/fleetwright/tools/awsemu"
)

// An intent only names what to terminate; the executor acts on what the NodeClaim, Node and
// instance say. An intent naming a claim that is gone terminates the instance it carries only
// if that instance is this cluster's, claimless and runs no Node with pods; an interruption
// counts as one only on the urgent subject (which only the terminator publishes to); a Node no
// one is deleting is not drained for an intent that names no claim; a voluntary reason (empty,
// underutilized, drifted, expired) counts only for a claim being deleted, the scheduler's
// hand-over. Each refusal is
// dead-lettered with its reason, and nothing is tainted, drained or terminated for it.
func TestIntentsActOnTheObjectsNotTheirFields(t *testing.T) {
	e := newEnv(t, 211)
	launchedFor := func(claim string) ec2types.Tag {
		return ec2types.Tag{Key: aws.String(claimTag), Value: aws.String(claim)}
	}
	// Another claim's instance, named by an intent for a claim that is gone.
	owned := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, launchedFor("owner-a"))
	e.claim("owner-a", owned, "")
	// A claimless instance that still runs a Node with a pod.
	busy := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, launchedFor("gone-b"))
	busyNode := e.node(busy)
	e.pod("busy", busyNode.Name, nil)
	// A claimless instance with no node: the one an intent may end.
	orphan := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand, launchedFor("gone-c"))
	// A live claim and node, named by an interruption on the wrong subject.
	live := e.launch(ec2types.DefaultTargetCapacityTypeSpot)
	liveNode := e.node(live)
	liveClaim := e.claim("live-d", live, liveNode.Name)
	e.pod("app", liveNode.Name, nil)
	// A node no one deletes, named without a claim.
	idle := e.launch(ec2types.DefaultTargetCapacityTypeOnDemand)
	idleNode := e.node(idle)
	e.run("--gc-grace", "100000h") // the orphan collector leaves the claimless instances (launched at epoch) to the intents

	intents := []*terminationv1.TerminationIntent{
		{IntentId: "gone-a/deleted", NodeClaimName: "gone-a", InstanceId: owned.ID, Reason: commonv1.TerminationReason_TERMINATION_REASON_MANUAL},
		{IntentId: "gone-b/deleted", NodeClaimName: "gone-b", InstanceId: busy.ID, Reason: commonv1.TerminationReason_TERMINATION_REASON_MANUAL},
		{IntentId: string(liveClaim.UID) + "/interrupted", NodeClaimName: liveClaim.Name, NodeName: liveNode.Name, InstanceId: live.ID,
			Reason: commonv1.TerminationReason_TERMINATION_REASON_INTERRUPTED, RequestTime: timestamppb.New(epoch), GracePeriod: durationpb.New(0)},
		{IntentId: "idle/deleted", NodeName: idleNode.Name, InstanceId: idle.ID, Reason: commonv1.TerminationReason_TERMINATION_REASON_MANUAL},
		{IntentId: "gone-c/deleted", NodeClaimName: "gone-c", InstanceId: orphan.ID, Reason: commonv1.TerminationReason_TERMINATION_REASON_MANUAL},
		// A decision's reason for a live claim nobody deleted: the scheduler decides, by deleting.
		{IntentId: string(liveClaim.UID) + "/underutilized", NodeClaimName: liveClaim.Name, NodeName: liveNode.Name, InstanceId: live.ID,
			Reason: commonv1.TerminationReason_TERMINATION_REASON_UNDERUTILIZED, Voluntary: true},
	}
	var seqs []uint64
	for _, in := range intents {
		in.Why = "test"
		ack, err := e.conn.PublishAck(e.ctx, intentsSubject(), in, in.GetIntentId())
		require.NoError(t, err)
		seqs = append(seqs, ack.Sequence)
	}
	require.Eventually(t, func() bool {
		return !slices.ContainsFunc(seqs, func(seq uint64) bool { return !e.consumed(intentsSubject(), "terminator", seq) })
	}, wait, tick, "every intent is settled")
	assert.Eventually(t, func() bool {
		return strings.Contains(e.metrics(), `outcome="deadlettered",subject="`+intentsSubject()+`"} 5`)
	}, wait, tick, "five refusals are dead-lettered, not retried")

	results, _ := stored(e, prefix.Of(subject.TerminationsResults), newResult)
	require.Len(t, results, 1, "one intent was carried out")
	assert.Equal(t, "gone-c/deleted", results[0].GetIntentId())
	assert.Equal(t, terminationv1.TerminationOutcome_TERMINATION_OUTCOME_ALREADY_GONE, results[0].GetOutcome())
	assert.Contains(t, []string{"shutting-down", "terminated"}, e.instance(orphan.ID).State, "the claimless instance without a node is terminated")
	for _, inst := range []awsemu.InstanceInfo{owned, busy, live, idle} {
		assert.Equal(t, "running", e.instance(inst.ID).State, "instance %s is left running", inst.ID)
	}
	terminated := 0
	for _, c := range e.emu.Calls() {
		if c.Action == "TerminateInstances" {
			terminated++
		}
	}
	assert.Equal(t, 1, terminated, "TerminateInstances was called for the claimless instance only")
	for _, name := range []string{liveNode.Name, idleNode.Name} {
		n, err := e.kube.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, hasDisruptedTaint(n), "node %s is not tainted", name)
	}
	for _, name := range []string{"busy", "app"} {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, p.DeletionTimestamp, "pod %s was not evicted", name)
	}
	c, err := e.dyn.Resource(clusterstate.NodeClaims).Get(e.ctx, liveClaim.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, c.GetDeletionTimestamp(), "the live claim is not deleted")
}

// An instance is the terminator's only with the cluster's owned tag and a karpenter.sh/nodepool
// tag, which may be empty: a NodeClaim made by hand belongs to no pool, and its instance is
// tagged karpenter.sh/nodepool="" (refused before: its claim's deletion was dead-lettered).
func TestOwnedTags(t *testing.T) {
	tags := func(kv ...string) []ec2types.Tag {
		var out []ec2types.Tag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, ec2types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
		}
		return out
	}
	assert.True(t, owned(tags("kubernetes.io/cluster/demo", "owned", "karpenter.sh/nodepool", "default"), "demo"))
	assert.True(t, owned(tags("kubernetes.io/cluster/demo", "owned", "karpenter.sh/nodepool", ""), "demo"), "a claim of no pool")
	assert.False(t, owned(tags("kubernetes.io/cluster/demo", "owned"), "demo"), "a managed node group's")
	assert.False(t, owned(tags("kubernetes.io/cluster/other", "owned", "karpenter.sh/nodepool", "default"), "demo"), "another cluster's")
	assert.False(t, owned(tags("kubernetes.io/cluster/demo", "shared", "karpenter.sh/nodepool", "default"), "demo"), "not owned")
	assert.False(t, owned(tags("karpenter.sh/nodepool", "default"), ""), "no cluster name")
}
