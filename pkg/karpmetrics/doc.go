// Package karpmetrics holds Karpenter's metric families as Karpenter v1.14 defines them (the
// names, types, help, label names, buckets and summary objectives of sigs.k8s.io/karpenter and
// of controller-runtime's reconcile metrics), so each service exports the ones that belong to
// its job beside its own fleetwright_* metrics, and Karpenter's dashboards and alerts work
// unchanged. The facts are Karpenter's; the code is this project's. Which service serves which
// family is docs/operations.md's table:
//
//	pod-watcher  karpenter_pods_startup_duration_seconds (its pending pods becoming Running)
//	scheduler    the cluster's gauges, from its leader only (nodes_*, pods_state,
//	             nodepools_usage/limit/allowed_disruptions, cluster_state_*), provisioning
//	             (scheduler_*, nodeclaims_created_total) and voluntary disruption
//	             (voluntary_disruption_*, nodeclaims_disrupted_total)
//	launcher     the cloud provider (cloudprovider_*), nodes_created_total
//	terminator   termination (nodes_terminated_total, nodeclaims_terminated_total,
//	             nodes_termination_duration_seconds, nodes_drained_total, pods_drained_total),
//	             interruption (interruption_*)
//
// Every service serves controller_runtime_reconcile_total and _time_seconds for its loops,
// named as Karpenter names the controller that does the same job.
package karpmetrics
