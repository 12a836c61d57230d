package crdtest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
)

// table runs kubectl get and returns its header and rows split into columns.
func (e *env) table(t *testing.T, args ...string) ([]string, [][]string) {
	t.Helper()
	out, stderr, err := e.kubectl(t, "", append([]string{"get"}, args...)...)
	require.NoError(t, err, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return strings.Fields(lines[0]), rows
}

// updateStatus writes obj's status through the status subresource.
func (e *env) updateStatus(t *testing.T, gvr schema.GroupVersionResource, obj runtime.Object) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	_, err = e.dynamic.Resource(gvr).UpdateStatus(context.Background(), &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{FieldValidation: "Strict"})
	require.NoError(t, err)
}

func condition(typ string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: typ + string(status), Message: ""}
}

// kubectl get nodeclaims shows Karpenter's columns (Type, Capacity, Zone, Node, Ready, Age),
// -o wide adds ImageID, ID, NodePool, NodeClass and Drifted; the status written through the
// Go type reads back; the spec cannot change.
func TestNodeClaimColumns(t *testing.T) {
	e := cluster(t)
	nc := &karpv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "default-x7k2p", Labels: map[string]string{
			karpv1.NodePoolLabelKey:     "default",
			karpv1.LabelInstanceType:    "m5.large",
			karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot,
			karpv1.LabelTopologyZone:    "us-east-1a",
		}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5a.large"}},
			},
			Resources:    karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			ExpireAfter:  karpv1.MustParseNillableDuration("720h"),
		},
	}
	created, err := e.create(t, gvrNodeClaim, nc, false)
	require.NoError(t, err)
	e.deleteLater(t, gvrNodeClaim, nc.Name)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, nc))

	nc.Status = karpv1.NodeClaimStatus{
		NodeName:    "ip-10-0-1-23.ec2.internal",
		ProviderID:  "aws:///us-east-1a/i-0123456789abcdef0",
		ImageID:     "ami-0abcdef1234567890",
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m")},
	}
	for _, typ := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady} {
		nc.SetCondition(condition(typ, metav1.ConditionTrue))
	}
	nc.SetCondition(condition(karpv1.ConditionTypeDrifted, metav1.ConditionFalse))
	e.updateStatus(t, gvrNodeClaim, nc)

	header, rows := e.table(t, "nodeclaims", nc.Name)
	require.Equal(t, []string{"NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"}, header)
	require.Len(t, rows, 1)
	require.Equal(t, []string{nc.Name, "m5.large", "spot", "us-east-1a", "ip-10-0-1-23.ec2.internal", "True"}, rows[0][:6])

	header, rows = e.table(t, "nodeclaims", nc.Name, "-o", "wide")
	require.Equal(t, []string{"NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE", "IMAGEID", "ID", "NODEPOOL", "NODECLASS", "DRIFTED"}, header)
	require.Len(t, rows, 1)
	require.Len(t, rows[0], len(header))
	require.Equal(t, []string{"ami-0abcdef1234567890", "aws:///us-east-1a/i-0123456789abcdef0", "default", "default", "False"}, rows[0][7:])

	var back karpv1.NodeClaim
	e.get(t, gvrNodeClaim, nc.Name, &back)
	require.True(t, back.IsTrue(karpv1.ConditionTypeReady))
	require.False(t, back.IsTrue(karpv1.ConditionTypeDrifted))
	require.Equal(t, "aws:///us-east-1a/i-0123456789abcdef0", back.Status.ProviderID)
	capCPU := back.Status.Capacity[corev1.ResourceCPU]
	require.Equal(t, int64(2), capCPU.Value())
	require.Equal(t, 720*60*60, int(back.Spec.ExpireAfter.Duration.Seconds()))

	// The category lists it.
	out, stderr, err := e.kubectl(t, "", "get", "karpenter", "-o", "name")
	require.NoError(t, err, stderr)
	require.Contains(t, out, "nodeclaim.karpenter.sh/"+nc.Name)

	// The spec is the record of a decision: it does not change.
	back.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&back)
	require.NoError(t, err)
	_, err = e.dynamic.Resource(gvrNodeClaim).Update(context.Background(), &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
	require.ErrorContains(t, err, "spec is immutable")
}

// kubectl get nodepools shows NodeClass, Nodes, Ready and Age; -o wide adds Weight, CPU and
// Memory. EC2NodeClasses answer to their short name.
func TestNodePoolColumns(t *testing.T) {
	e := cluster(t)
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: "columns"},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				},
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "columns-class"},
				ExpireAfter:  karpv1.MustParseNillableDuration("Never"),
			}},
			Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.MustParseNillableDuration("5m")},
			Weight:     ptrTo[int32](42),
		},
	}
	created, err := e.create(t, gvrNodePool, np, false)
	require.NoError(t, err)
	e.deleteLater(t, gvrNodePool, np.Name)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, np))
	require.Equal(t, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized, np.Spec.Disruption.ConsolidationPolicy, "schema default")
	require.True(t, np.Spec.Template.Spec.ExpireAfter.IsNever())

	np.Status.Resources = corev1.ResourceList{
		karpv1.ResourceNodes: resource.MustParse("3"), corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("48Gi"),
	}
	ready := condition(karpv1.ConditionTypeReady, metav1.ConditionTrue)
	ready.LastTransitionTime = metav1.Now()
	np.Status.Conditions = []metav1.Condition{ready}
	e.updateStatus(t, gvrNodePool, np)

	header, rows := e.table(t, "nodepools", np.Name, "-o", "wide")
	require.Equal(t, []string{"NAME", "NODECLASS", "NODES", "READY", "AGE", "WEIGHT", "CPU", "MEMORY"}, header)
	require.Len(t, rows, 1)
	require.Equal(t, []string{"columns", "columns-class", "3", "True"}, rows[0][:4])
	require.Equal(t, []string{"42", "12", "48Gi"}, rows[0][5:])

	header, _ = e.table(t, "nodepools", np.Name)
	require.Equal(t, []string{"NAME", "NODECLASS", "NODES", "READY", "AGE"}, header)

	out, stderr, err := e.kubectl(t, "", "get", "ec2nc")
	require.NoError(t, err, "short name ec2nc: %s", stderr)
	require.NotContains(t, out+stderr, "the server doesn't have a resource type")
}

func ptrTo[T any](v T) *T { return &v }
