package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
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
	_, err := dynamicClient(t, kubeconfig).Resource(nodeClaimsGVR).Create(ctx, nc, metav1.CreateOptions{})
	require.NoError(t, err)
}

func deleteNodeClaim(t *testing.T, ctx context.Context, _ kubernetes.Interface, kubeconfig, name string) {
	t.Helper()
	require.NoError(t, dynamicClient(t, kubeconfig).Resource(nodeClaimsGVR).Delete(ctx, name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := dynamicClient(t, kubeconfig).Resource(nodeClaimsGVR).Get(ctx, name, metav1.GetOptions{})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond)
}
