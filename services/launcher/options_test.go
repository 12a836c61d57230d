package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/catalog"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// A NodeClaim made by hand that names no instance types, zones or capacity types is launched as
// Karpenter launches one: as a type its requirements and requests allow, from the catalog,
// whatever the intent lists (the launcher launches from the claim; the intent only names it).
func TestHandMadeClaimLaunchesAsItsRequirementsAllow(t *testing.T) {
	e := start(t)
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "handmade"},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"m"}},
				{Key: "karpenter.k8s.aws/instance-generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}},
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
		},
	}
	require.NoError(t, e.kube.Create(e.ctx, nc))
	e.publish(&launchv1.LaunchIntent{NodeClaimName: nc.Name, NodeClaimUid: string(nc.UID),
		NodeClassRef: &commonv1.ObjectRef{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}}, nc.Name)
	e.claimWhen(nc.Name, 90*time.Second, hasInstance, "launched")
	insts := e.instancesFor(nc.Name)
	require.Len(t, insts, 1)
	ct, ok := catalog.Lookup(insts[0].Type)
	require.True(t, ok, insts[0].Type)
	assert.Equal(t, "m", ct.Category, insts[0].Type)
	assert.Greater(t, ct.Generation, 4, insts[0].Type)
	assert.GreaterOrEqual(t, ct.VCPU, 4, "%s: 3 CPUs must fit its allocatable", insts[0].Type)
	assert.Equal(t, "on-demand", insts[0].CapacityType)
}

// A claim is launched only with a class that says it is Ready, judged against its latest spec:
// Ready=False fails the launch for good (the claim is deleted, as Karpenter's: its "should
// delete a NodeClaim if it references a NodeClass that isn't Ready" launched one before); an
// unknown or not yet judged readiness is tried again; an AWSNodeTemplate's translation has no
// status and is not held.
func TestNodeClassReadiness(t *testing.T) {
	ready := func(status metav1.ConditionStatus, observed int64) *metav1.Condition {
		return &metav1.Condition{Type: "Ready", Status: status, ObservedGeneration: observed, Message: "SubnetsReady=False"}
	}
	cases := []struct {
		name      string
		spec      nodeClassSpec
		ok, final bool
	}{
		{"ready", nodeClassSpec{Name: "c", Ready: ready(metav1.ConditionTrue, 2), Generation: 2}, true, false},
		{"not ready", nodeClassSpec{Name: "c", Ready: ready(metav1.ConditionFalse, 2), Generation: 2}, false, true},
		{"no status yet", nodeClassSpec{Name: "c", Generation: 1}, false, false},
		{"unknown", nodeClassSpec{Name: "c", Ready: ready(metav1.ConditionUnknown, 1), Generation: 1}, false, false},
		{"judged against an older spec", nodeClassSpec{Name: "c", Ready: ready(metav1.ConditionTrue, 1), Generation: 2}, false, false},
		{"a translated AWSNodeTemplate", nodeClassSpec{Name: "t", Translated: true}, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.spec.readiness()
			if c.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, c.final, errors.Is(err, errNodeClassNotReady), "%v", err)
		})
	}
}
