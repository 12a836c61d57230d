package karpmetrics

// DashboardFamilies are the families Karpenter's own Grafana dashboards read, from
// aws/karpenter-provider-aws v1.14.1's
// website/content/en/docs/getting-started/getting-started-with-karpenter/
// karpenter-{capacity,performance}-dashboard.json (every metric name in their queries, with a
// histogram's _bucket and _count taken back to the family).
var DashboardFamilies = []string{
	// capacity dashboard
	"karpenter_nodeclaims_disrupted_total", "karpenter_nodepools_limit", "karpenter_nodepools_usage", "karpenter_nodes_allocatable",
	"karpenter_nodes_created_total", "karpenter_nodes_terminated_total", "karpenter_nodes_total_daemon_requests",
	"karpenter_nodes_total_pod_requests", "karpenter_pods_state", "karpenter_voluntary_disruption_decisions_total",
	"karpenter_voluntary_disruption_eligible_nodes",
	// performance dashboard
	"controller_runtime_reconcile_time_seconds", "controller_runtime_reconcile_total",
	"karpenter_nodes_termination_duration_seconds", "karpenter_pods_startup_duration_seconds",
}
