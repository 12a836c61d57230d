// Package karpmetrics holds Karpenter's metric families as sigs.k8s.io/karpenter v1.14.1 and
// aws/karpenter-provider-aws v1.14.1 define them (names, types, help, label names, buckets and
// summary objectives, and controller-runtime's reconcile metrics), so each service exports the
// ones that belong to its job beside its own fleetwright_* metrics, and Karpenter's dashboards
// and alerts work unchanged. The facts are Karpenter's (families_test.go lists them); the code
// is this project's.
//
// Families registers one family per method, so a service registers only what it serves.
// Cluster and Catalog are collectors of gauges computed whole in one pass (snapshot.go);
// Startups turns snapshots of pods into the startup and binding histograms. Which service
// serves which family (docs/operations.md has the table):
//
//	scheduler   from its leader only: the cluster's gauges (nodes_*, cluster_utilization_percent,
//	            pods_state/unstarted/unbound, pods_startup/bound_duration, nodepools_usage/
//	            limit/allowed_disruptions/nodes_consuming_budgets, cluster_state_*);
//	            provisioning (scheduler_scheduling_duration_seconds, scheduler_unschedulable_
//	            pods_count, pods_scheduling_decision_duration_seconds, nodeclaims_created_total);
//	            voluntary disruption
//	            (voluntary_disruption_*, nodeclaims_disrupted_total)
//	launcher    cloudprovider_* of Create, instance_launch_failures_total, instance_type_*;
//	            nodes_created_total
//	terminator  termination (nodes_terminated_total, nodes_termination_duration_seconds,
//	            nodes_lifetime_duration_seconds, nodes_drained_total, pods_drained_total,
//	            pods_eviction_requests_total, nodeclaims_terminated_total,
//	            nodeclaims_termination_duration_seconds, cloudprovider_* of Delete,
//	            instance_termination_failures_total); interruption (interruption_*,
//	            nodeclaims_disrupted_total of interruptions)
//	pod-watcher controller_runtime_reconcile_* of provisioner.trigger.pod only
//
// Every service serves controller_runtime_reconcile_{total,errors_total,time_seconds} for its
// loops, under the name of the Karpenter controller doing the same job (reconcile.go).
package karpmetrics
