package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetwright/fleetwright/pkg/clusterstate"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

func natsConnect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

func dynamicClient(t *testing.T, kubeconfig string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	dc, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return dc
}

func createNodeClaim(t *testing.T, ctx context.Context, kubeconfig, name string) {
	t.Helper()
	nc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
			"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}},
		},
	}}
	_, err := dynamicClient(t, kubeconfig).Resource(clusterstate.NodeClaims).Create(ctx, nc, metav1.CreateOptions{})
	require.NoError(t, err)
}

func deleteNodeClaim(t *testing.T, ctx context.Context, _ kubernetes.Interface, kubeconfig, name string) {
	t.Helper()
	require.NoError(t, dynamicClient(t, kubeconfig).Resource(clusterstate.NodeClaims).Delete(ctx, name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := dynamicClient(t, kubeconfig).Resource(clusterstate.NodeClaims).Get(ctx, name, metav1.GetOptions{})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond)
}

// markInitialized sets the claim's node name and Initialized condition, as the launcher does
// once the claim's node is ready.
func markInitialized(t *testing.T, ctx context.Context, kubeconfig, name, node string) {
	t.Helper()
	res := dynamicClient(t, kubeconfig).Resource(clusterstate.NodeClaims)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	u.Object["status"] = map[string]any{"nodeName": node, "conditions": []any{map[string]any{
		"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	_, err = res.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// startDeleting deletes a claim that carries a finalizer, so it stays, being deleted.
func startDeleting(t *testing.T, ctx context.Context, kubeconfig, name string) {
	t.Helper()
	res := dynamicClient(t, kubeconfig).Resource(clusterstate.NodeClaims)
	_, err := res.Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":["fleetwright.io/test-hold"]}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, res.Delete(ctx, name, metav1.DeleteOptions{}))
	t.Cleanup(func() {
		_, _ = res.Patch(context.Background(), name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
}

// nominate records a pod's nomination on the claim, as the scheduler does.
func nominate(t *testing.T, ctx context.Context, kubeconfig, claim string, at time.Time, pod *podsv1.PodProjection) {
	t.Helper()
	patch := podproj.NominationPatch([]podproj.PodNomination{{UID: pod.GetUid(), Pod: pod.GetNamespace() + "/" + pod.GetName(), At: at}})
	_, err := dynamicClient(t, kubeconfig).Resource(clusterstate.NodeClaims).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}
