package clusterstate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

func TestTypedConvertsOnceAndDropsManagedFields(t *testing.T) {
	transform := Typed[karpv1.NodeClaim]()
	good := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": "default-abc", "managedFields": []any{map[string]any{"manager": "kubectl"}}},
		"status":   map[string]any{"nodeName": "n1"},
	}}
	out, err := transform(good)
	require.NoError(t, err)
	nc, ok := out.(*karpv1.NodeClaim)
	require.True(t, ok, "typed as it enters the cache")
	assert.Equal(t, "n1", nc.Status.NodeName)
	assert.Empty(t, nc.ManagedFields)

	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": "broken"}, "status": map[string]any{"nodeName": 42},
	}}
	out, err = transform(bad)
	require.NoError(t, err, "a transform error would stall the watch")
	_, stillUnstructured := out.(*unstructured.Unstructured)
	assert.True(t, stillUnstructured)

	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	inf := &fakeInformer{SharedIndexInformer: nil, store: store}
	require.NoError(t, store.Add(nc))
	require.NoError(t, store.Add(out))
	var reported []string
	list := List[karpv1.NodeClaim](inf, func(name string, err error) {
		assert.Error(t, err)
		reported = append(reported, name)
	})
	require.Len(t, list, 1)
	assert.Equal(t, "default-abc", list[0].Name)
	assert.Equal(t, []string{"broken"}, reported, "what did not convert is reported, not dropped silently")
	got, ok := Get[karpv1.NodeClaim](inf, "default-abc")
	require.True(t, ok)
	assert.Same(t, nc, got)
}

func TestStripManagedFields(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler"}}}}
	out, err := StripManagedFields(p)
	require.NoError(t, err)
	assert.Empty(t, out.(*corev1.Pod).ManagedFields)
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p"}
	out, err = StripManagedFields(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, out, "anything else passes through")
}

// fakeInformer serves a store, which is all List and Get read.
type fakeInformer struct {
	cache.SharedIndexInformer
	store cache.Indexer
}

func (f *fakeInformer) GetStore() cache.Store { return f.store }

func TestSlimPodKeepsWhatSchedulingReads(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: "{...}", "karpenter.sh/do-not-disrupt": "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Command: []string{"sleep"}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			Ports:     []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 80}}, LivenessProbe: &corev1.Probe{}}},
			InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Args: []string{"-v"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	want := podproj.Project(p.DeepCopy(), podproj.Listers{})
	out, err := SlimPod(p)
	require.NoError(t, err)
	slim := out.(*corev1.Pod)
	assert.NotContains(t, slim.Annotations, corev1.LastAppliedConfigAnnotation)
	assert.Equal(t, "true", slim.Annotations["karpenter.sh/do-not-disrupt"])
	assert.Nil(t, slim.Spec.Containers[0].Env)
	assert.Nil(t, slim.Spec.Containers[0].LivenessProbe)
	assert.Nil(t, slim.Status.ContainerStatuses)
	assert.True(t, proto.Equal(want, podproj.Project(slim, podproj.Listers{})), "the scheduling projection is unchanged")
	pending, _ := podproj.Pending(slim)
	assert.True(t, pending)

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"pause"}}},
		Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}}}
	out, err = SlimNode(n)
	require.NoError(t, err)
	assert.Nil(t, out.(*corev1.Node).Status.Images)
	assert.Equal(t, "110", out.(*corev1.Node).Status.Allocatable.Pods().String())
}
