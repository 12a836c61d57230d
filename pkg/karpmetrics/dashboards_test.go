package karpmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// dashboardFamilies are the families Karpenter's own Grafana dashboards read, from
// aws/karpenter-provider-aws v1.14.1's
// website/content/en/docs/getting-started/getting-started-with-karpenter/
// karpenter-{capacity,performance}-dashboard.json (every metric name in their queries, with a
// histogram's _bucket and _count taken back to the family).
var dashboardFamilies = []string{
	// capacity dashboard
	"karpenter_nodeclaims_disrupted_total", "karpenter_nodepools_limit", "karpenter_nodepools_usage", "karpenter_nodes_allocatable",
	"karpenter_nodes_created_total", "karpenter_nodes_terminated_total", "karpenter_nodes_total_daemon_requests",
	"karpenter_nodes_total_pod_requests", "karpenter_pods_state", "karpenter_voluntary_disruption_decisions_total",
	"karpenter_voluntary_disruption_eligible_nodes",
	// performance dashboard
	"controller_runtime_reconcile_time_seconds", "controller_runtime_reconcile_total",
	"karpenter_nodes_termination_duration_seconds", "karpenter_pods_startup_duration_seconds",
}

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
	for _, name := range dashboardFamilies {
		require.True(t, described[name], "%s, which Karpenter's dashboards read, is not made here", name)
	}
}
