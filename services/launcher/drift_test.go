package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
)

const driftPoolManifest = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: drift
spec:
  template:
    metadata:
      labels:
        team: a
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: drift
      requirements:
      - key: kubernetes.io/arch
        operator: In
        values: ["arm64"]
      - key: karpenter.k8s.aws/instance-family
        operator: In
        values: ["t4g"]
`

// A launched claim records what drift is judged by (the pool's and class's hashes, its subnet
// and security groups) and is marked Drifted — the DRIFTED column of `kubectl get nodeclaims
// -o wide` — when its pool's template changes (NodePoolDrifted) and when its class no longer
// resolves to its AMI (AMIDrift); undoing each change clears the condition. The statuses and
// drift are driven by the changes of what they read: with the safety-net resync an hour away,
// the class's status, the hashes and each drift still follow every change at once.
func TestDriftOfPoolAndAMI(t *testing.T) {
	e := start(t, "--status-interval", "1h", "--resolver-ttl", "100ms")
	e.applyUntilEnd(classManifest("drift", demoRole) + "---\n" + driftPoolManifest)

	// A claim of the pool as one made before hashes were recorded: the launcher annotates it.
	intent := e.claimOf("drift", "drift-1", "t4g.medium")
	require.NoError(t, e.kube.Patch(e.ctx, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "drift-1"}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"karpenter.sh/nodepool":"drift"}}}`))))
	intent.NodePoolName = "drift"
	e.publish(intent, intent.NodeClaimName)

	var pool karpv1.NodePool
	var class ec2v1.EC2NodeClass
	require.Eventually(t, func() bool {
		nc := e.nodeClaim("drift-1")
		if nc == nil || !nc.IsTrue(karpv1.ConditionTypeLaunched) || e.kube.Get(e.ctx, client.ObjectKey{Name: "drift"}, &pool) != nil ||
			e.kube.Get(e.ctx, client.ObjectKey{Name: "drift"}, &class) != nil {
			return false
		}
		return nc.Annotations[karpv1.NodePoolHashAnnotationKey] != "" && len(class.Status.AMIs) > 0 &&
			pool.Annotations[karpv1.NodePoolHashAnnotationKey] != "" && class.Annotations[ec2v1.AnnotationEC2NodeClassHash] != ""
	}, 90*time.Second, 100*time.Millisecond, "the claim is launched and annotated, its pool and class too")
	nc := e.nodeClaim("drift-1")
	assert.Equal(t, pool.Hash(), nc.Annotations[karpv1.NodePoolHashAnnotationKey])
	assert.Equal(t, karpv1.NodePoolHashVersion, nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey])
	assert.Equal(t, class.Hash(), nc.Annotations[ec2v1.AnnotationEC2NodeClassHash], "the hash of the class it was launched with")
	assert.Equal(t, ec2v1.EC2NodeClassHashVersion, nc.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion])
	assert.Equal(t, pool.Hash(), pool.Annotations[karpv1.NodePoolHashAnnotationKey], "the pool carries its hash, as in Karpenter")
	assert.Equal(t, karpv1.NodePoolHashVersion, pool.Annotations[karpv1.NodePoolHashVersionAnnotationKey])
	assert.Equal(t, class.Hash(), class.Annotations[ec2v1.AnnotationEC2NodeClassHash], "the class carries its hash")
	assert.Equal(t, ec2v1.EC2NodeClassHashVersion, class.Annotations[ec2v1.AnnotationEC2NodeClassHashVersion])
	instance := e.instancesFor("drift-1")
	require.Len(t, instance, 1)
	assert.Equal(t, instance[0].SubnetID, nc.Annotations[disruption.SubnetAnnotation], "the instance's subnet is recorded")
	var groups []string
	for _, g := range class.Status.SecurityGroups {
		groups = append(groups, g.ID)
	}
	slices.Sort(groups)
	assert.Equal(t, strings.Join(groups, ","), nc.Annotations[disruption.SecurityGroupsAnnotation], "and its security groups")
	require.Never(t, func() bool { return e.nodeClaim("drift-1").Condition(karpv1.ConditionTypeDrifted) != nil }, 2*time.Second, 100*time.Millisecond,
		"a claim that matches its pool and class is not drifted")

	drifted := func(reason string) func() bool {
		return func() bool {
			nc := e.nodeClaim("drift-1")
			c := nc.Condition(karpv1.ConditionTypeDrifted)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
		}
	}
	notDrifted := func() bool { return e.nodeClaim("drift-1").Condition(karpv1.ConditionTypeDrifted) == nil }
	patch := func(obj client.Object, p string) {
		t.Helper()
		require.NoError(t, e.kube.Patch(e.ctx, obj, client.RawPatch(types.MergePatchType, []byte(p))))
	}

	// The pool's template labels change: the node is not what the pool would make now.
	patch(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "drift"}}, `{"spec":{"template":{"metadata":{"labels":{"team":"b"}}}}}`)
	require.Eventually(t, drifted("NodePoolDrifted"), 30*time.Second, 100*time.Millisecond, "drifted from its pool")
	c := e.nodeClaim("drift-1").Condition(karpv1.ConditionTypeDrifted)
	assert.Contains(t, c.Message, "NodePool drift changed")
	require.Eventually(t, func() bool { return e.eventReasons("NodeClaim", "drift-1")["Drifted"] }, 30*time.Second, 100*time.Millisecond,
		"kubectl describe nodeclaim says it drifted")
	patch(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "drift"}}, `{"spec":{"template":{"metadata":{"labels":{"team":"a"}}}}}`)
	require.Eventually(t, notDrifted, 30*time.Second, 100*time.Millisecond, "the pool as it was: no longer drifted")

	// The class resolves to another AMI (its selector terms change; terms are not hashed, what
	// they resolve to is compared): the instance runs an image the class would not launch now.
	image := e.nodeClaim("drift-1").Status.ImageID
	require.NotEmpty(t, image)
	other := ""
	for _, a := range class.Status.AMIs {
		if a.ID != image {
			other = a.ID
		}
	}
	require.NotEmpty(t, other, "the alias resolves to more than one image")
	patch(&ec2v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "drift"}}, `{"spec":{"amiSelectorTerms":[{"id":"`+other+`"}]}}`)
	require.Eventually(t, drifted("AMIDrift"), 30*time.Second, 100*time.Millisecond, "drifted from its class's AMIs")
	assert.Contains(t, e.nodeClaim("drift-1").Condition(karpv1.ConditionTypeDrifted).Message, image)
	patch(&ec2v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "drift"}}, `{"spec":{"amiSelectorTerms":[{"alias":"al2023@latest"}]}}`)
	require.Eventually(t, notDrifted, 30*time.Second, 100*time.Millisecond, "the class as it was: no longer drifted")

	// The node class's spec changes (its user data): NodeClassDrift.
	patch(&ec2v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "drift"}}, `{"spec":{"userData":"#!/bin/bash\necho changed\n"}}`)
	require.Eventually(t, drifted("NodeClassDrift"), 30*time.Second, 100*time.Millisecond, "drifted from its class's spec")
}
