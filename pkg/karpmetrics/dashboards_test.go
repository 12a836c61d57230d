package karpmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestDashboardFamiliesAreServable checks this package makes every family Karpenter's
// dashboards read (which service serves each is docs/operations.md's table).
func TestDashboardFamiliesAreServable(t *testing.T) {
	described := map[string]bool{}
	for _, k := range karpenterFamilies {
		described[k.name] = true
	}
	reg := prometheus.NewPedanticRegistry()
	Families{Reg: reg}.Reconciles().Observe(ControllerProvisioner, t0, nil)
	cluster := NewCluster()
	reg.MustRegister(cluster)
	pods := []*corev1.Pod{testPod("web-1", requesting("1", "1Gi"), on("n1", t0)),
		testPod("agent-1", requesting("100m", "64Mi"), ownedBy("DaemonSet", "agent"), on("n1", t0))}
	cluster.Observe(ClusterInput{Now: t0, Nodes: []ClusterNode{{Node: testNode("n1"), Pods: pods}}, Pods: pods,
		Pools: []ClusterPool{{Name: "default", Usage: resources("4", "16Gi"), Limits: resources("100", "400Gi")}}})
	for name := range gather(t, reg) {
		described[name] = true
	}
	for _, name := range DashboardFamilies {
		require.True(t, described[name], "%s, which Karpenter's dashboards read, is not made here", name)
	}
}
