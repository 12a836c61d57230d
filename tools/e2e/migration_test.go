package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetwright/fleetwright/tools/e2e"
	"github.com/fleetwright/fleetwright/tools/e2e/migrate"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// Issue 15, migration from Karpenter v1: NodeClaims, Nodes and instances that Karpenter made
// are adopted as they are. The test makes a cluster look as Karpenter v1 leaves it (no
// fleetwright.io annotations, Karpenter's own hash versions "v3"/"v4" and hashes), then starts
// Fleetwright on it: nothing is launched again, nothing is taken for drifted, and the nodes
// are removed, their instances terminated, when their pods go.
func TestKarpenterNodeClaimsAreAdopted(t *testing.T) {
	t.Parallel()
	s := v1Stack(t, `{"disruption":{"consolidationPolicy":"WhenEmpty","consolidateAfter":"5s"}}`)
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "4")
	podsRunning(t, s, "app=inflate", 4, 3*time.Minute)
	// Karpenter is scaled to zero before Fleetwright starts: here, every service stops.
	stopAllInitialized(t, s)
	ctx := context.Background()
	before := s.NodeClaims(t)
	for i := range before {
		nc := &before[i]
		patch := client.MergeFrom(nc.DeepCopy())
		for k := range nc.Annotations {
			if strings.HasPrefix(k, "fleetwright.io/") {
				delete(nc.Annotations, k)
			}
		}
		nc.Annotations[karpv1.NodePoolHashAnnotationKey] = "1234567890123456789"
		nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] = "v3"
		nc.Annotations[ec2v1.AnnotationEC2NodeClassHash] = "9876543210987654321"
		nc.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion] = "v4"
		require.NoError(t, s.Client.Patch(ctx, nc, patch))
	}
	fleets := s.Calls(t, "CreateFleet")

	for _, name := range withTerminator() {
		s.StartService(name)
	}
	s.Leading()
	// The claims are taken over: the hash versions are Fleetwright's again (a version change
	// restamps, it is not drift), and no claim is Drifted.
	require.Eventually(t, func() bool {
		for _, nc := range s.NodeClaims(t) {
			if nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion ||
				nc.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion] != ec2v1.EC2NodeClassHashVersion {
				return false
			}
		}
		return true
	}, time.Minute, 250*time.Millisecond, "the hash versions are restamped")
	for _, nc := range s.NodeClaims(t) {
		assert.False(t, nc.IsTrue(karpv1.ConditionTypeDrifted), "adopted claim %s is not drifted", nc.Name)
	}
	assert.Equal(t, fleets, s.Calls(t, "CreateFleet"), "nothing is launched again")
	names := func(ncs []karpv1.NodeClaim) []string {
		var out []string
		for _, nc := range ncs {
			out = append(out, nc.Name)
		}
		return out
	}
	assert.ElementsMatch(t, names(before), names(s.NodeClaims(t)), "the same claims")
	podsRunning(t, s, "app=inflate", 4, time.Minute)

	// And they are Fleetwright's to remove.
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "0")
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) == 0 && len(launchedNodes(t, s)) == 0 },
		3*time.Minute, 500*time.Millisecond, "the adopted nodes are removed once empty")
	s.AssertInvariants(t, []string{"default"}, time.Minute)
	noLeftovers(t, s)
}

// Issue 15, migration from Karpenter v0.2x: its nodes have no NodeClaim (a Node labelled
// karpenter.sh/provisioner-name, an instance tagged with it and the cluster). The test makes
// Fleetwright's own v1alpha5 nodes look so (claims gone, instances re-tagged as v0.2x tagged
// them), then starts Fleetwright again: each node gets a NodeClaim of its own, its instance the
// tags the terminator needs, nothing is launched; and the nodes are removed when empty.
func TestKarpenterV1Alpha5NodesAreAdopted(t *testing.T) {
	t.Parallel()
	s := legacyStack(t, `{"ttlSecondsAfterEmpty":5}`)
	s.Apply("deploy/examples/inflate.yaml")
	s.Kubectl("scale", "deployment", "inflate", "--replicas", "3")
	podsRunning(t, s, "app=inflate", 3, 3*time.Minute)
	stopAllInitialized(t, s)

	ctx := context.Background()
	instanceOf := migrate.AsKarpenterV1Alpha5(t, s, "default")
	fleets := s.Calls(t, "CreateFleet")

	for _, name := range withTerminator() {
		s.StartService(name)
	}
	s.Leading()
	require.Eventually(t, func() bool {
		adopted := map[string]bool{}
		for _, nc := range s.NodeClaims(t) {
			if nc.IsTrue(karpv1.ConditionTypeInitialized) && instanceOf[nc.Status.NodeName] == ec2v1.InstanceID(nc.Status.ProviderID) {
				adopted[nc.Status.NodeName] = true
			}
		}
		return len(adopted) == len(instanceOf)
	}, time.Minute, 250*time.Millisecond, "every v0.2x node gets an initialized NodeClaim of its own")
	insts, err := s.Emu.Instances(ctx)
	require.NoError(t, err)
	for _, i := range insts {
		tags := map[string]string{}
		for _, tg := range i.Tags {
			tags[tg.Key] = tg.Value
		}
		if i.State == "running" {
			assert.NotEmpty(t, tags[ec2v1.TagNodeClaim], "instance %s is tagged with its claim", i.ID)
			assert.Equal(t, "default", tags[karpv1.NodePoolLabelKey], "instance %s is tagged with its pool", i.ID)
		}
	}
	assert.Equal(t, fleets, s.Calls(t, "CreateFleet"), "nothing is launched")
	podsRunning(t, s, "app=inflate", 3, time.Minute)

	s.Kubectl("scale", "deployment", "inflate", "--replicas", "0")
	require.Eventually(t, func() bool { return len(s.NodeClaims(t)) == 0 && len(provisionerNodes(t, s)) == 0 },
		3*time.Minute, 500*time.Millisecond, "the adopted nodes are removed once empty")
	s.AssertInvariants(t, []string{"default"}, time.Minute)
	noLeftovers(t, s)
}

// provisionerNodes are the nodes of a v1alpha5 Provisioner.
func provisionerNodes(t *testing.T, s *e2e.Stack) []corev1.Node {
	t.Helper()
	var list corev1.NodeList
	require.NoError(t, s.Client.List(context.Background(), &list, client.HasLabels{"karpenter.sh/provisioner-name"}))
	return list.Items
}

// stopAllInitialized waits until every claim is initialized, then kills every service: the
// autoscaler that made them is gone.
func stopAllInitialized(t *testing.T, s *e2e.Stack) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, nc := range s.NodeClaims(t) {
			if !nc.IsTrue(karpv1.ConditionTypeInitialized) {
				return false
			}
		}
		return true
	}, time.Minute, 250*time.Millisecond, "every claim is initialized")
	for _, name := range withTerminator() {
		s.Service(name).Kill()
	}
}
