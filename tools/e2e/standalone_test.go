package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// A NodeClaim made by hand, as Karpenter's StandaloneNodeClaim specs make one (no pool, no
// resources), is launched and becomes Ready, its conditions observed at the claim's generation
// (Karpenter's clients take an older one for Unknown), and its node carries its labels,
// annotations and taints; deleted, it goes with its node and its instance.
func TestHandMadeNodeClaimBecomesReady(t *testing.T) {
	t.Parallel()
	s := v1Stack(t, "")
	applyYAML(t, s, `apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: standalone
  labels: {karpenter.k8s.aws/ec2nodeclass: default, custom-label: custom-value}
  annotations: {custom-annotation: custom-value}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  expireAfter: Never
  taints:
    - {key: custom-taint, value: custom-value, effect: NoSchedule}
  requirements:
    - {key: kubernetes.io/os, operator: In, values: [linux]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [t4g]}
  resources: {}
`)
	var nc karpv1.NodeClaim
	require.Eventually(t, func() bool {
		if err := s.Client.Get(context.Background(), client.ObjectKey{Name: "standalone"}, &nc); err != nil {
			return false
		}
		ready := nc.Condition("Ready")
		return ready != nil && ready.Status == "True" && ready.ObservedGeneration == nc.Generation
	}, 3*time.Minute, 250*time.Millisecond, "the hand-made claim is Ready at its generation")
	for _, c := range nc.Status.Conditions {
		assert.Equal(t, nc.Generation, c.ObservedGeneration, "condition %s is observed at the claim's generation", c.Type)
	}
	var node corev1.Node
	require.NoError(t, s.Client.Get(context.Background(), client.ObjectKey{Name: nc.Status.NodeName}, &node))
	assert.Equal(t, "custom-value", node.Labels["custom-label"], "the claim's labels are the node's")
	assert.Equal(t, "custom-value", node.Annotations["custom-annotation"], "and its annotations")
	assert.Contains(t, node.Spec.Taints, corev1.Taint{Key: "custom-taint", Value: "custom-value", Effect: corev1.TaintEffectNoSchedule})

	// Deleted, it goes with its node and its instance: the instance of a claim of no pool is
	// tagged karpenter.sh/nodepool="", as Karpenter tags it, and is the terminator's to end
	// (before, the terminator refused it as not its own and dead-lettered the termination; the
	// claim, the node and the instance stayed for good).
	instance := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
	s.Kubectl("delete", "nodeclaim", "standalone", "--wait=false")
	require.Eventually(t, func() bool {
		err := s.Client.Get(context.Background(), client.ObjectKey{Name: "standalone"}, &karpv1.NodeClaim{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, time.Second, "the claim is gone")
	require.Eventually(t, func() bool {
		err := s.Client.Get(context.Background(), client.ObjectKey{Name: node.Name}, &corev1.Node{})
		return apierrors.IsNotFound(err)
	}, time.Minute, time.Second, "its node is gone")
	insts, err := s.Emu.Instances(context.Background())
	require.NoError(t, err)
	found := false
	for _, i := range insts {
		if i.ID == instance {
			found = true
			assert.Contains(t, []string{"shutting-down", "terminated"}, i.State, "its instance is terminated")
		}
	}
	assert.True(t, found, "instance %s is known to EC2", instance)
}
