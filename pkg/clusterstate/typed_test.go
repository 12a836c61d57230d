package clusterstate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
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
