package karpmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Provider is the provider label of karpenter_cloudprovider_*: the AWS provider's name.
const Provider = "aws"

// DurationBuckets are Karpenter's buckets for duration histograms (controller-runtime's, and
// more above 60 s for its singleton controllers).
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
		1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}
}

// reconcileBuckets are controller-runtime's for controller_runtime_reconcile_time_seconds.
func reconcileBuckets() []float64 { return DurationBuckets()[:40] }

// SummaryObjectives are Karpenter's summary quantiles (0, 0.5, 0.9, 0.99, 1), each within 0.01.
func SummaryObjectives() map[float64]float64 {
	out := map[float64]float64{}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
		out[q] = 0.01
	}
	return out
}

// Families makes Karpenter's families on one registry; each method registers the family it
// names, so a service registers only the ones it serves.
type Families struct{ Reg prometheus.Registerer }

func reg[C prometheus.Collector](f Families, c C) C {
	f.Reg.MustRegister(c)
	return c
}

func (f Families) counter(name, help string, labels ...string) *prometheus.CounterVec {
	return reg(f, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

func (f Families) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return reg(f, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

func (f Families) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return reg(f, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func (f Families) summary(name, help string, labels ...string) *prometheus.SummaryVec {
	return reg(f, prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: name, Help: help, Objectives: SummaryObjectives()}, labels))
}

// NodeClaimsCreated is karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}.
func (f Families) NodeClaimsCreated() *prometheus.CounterVec {
	return f.counter("karpenter_nodeclaims_created_total",
		"Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
		LabelReason, LabelNodePool, LabelMinValuesRelaxed)
}

// NodeClaimsTerminated is karpenter_nodeclaims_terminated_total{nodepool, capacity_type, zone}.
func (f Families) NodeClaimsTerminated() *prometheus.CounterVec {
	return f.counter("karpenter_nodeclaims_terminated_total",
		"Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone.",
		LabelNodePool, LabelCapacityType, LabelZone)
}

// NodeClaimsDisrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type};
// reason is Karpenter's lower-case one (empty, underutilized, drifted, expired, interrupted).
func (f Families) NodeClaimsDisrupted() *prometheus.CounterVec {
	return f.counter("karpenter_nodeclaims_disrupted_total",
		"Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool.",
		LabelReason, LabelNodePool, LabelCapacityType)
}

// NodesCreated is karpenter_nodes_created_total{nodepool, zone}.
func (f Families) NodesCreated() *prometheus.CounterVec {
	return f.counter("karpenter_nodes_created_total",
		"Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone.", LabelNodePool, LabelZone)
}

// NodesTerminated is karpenter_nodes_terminated_total{nodepool, zone}.
func (f Families) NodesTerminated() *prometheus.CounterVec {
	return f.counter("karpenter_nodes_terminated_total",
		"Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone.", LabelNodePool, LabelZone)
}

// NodesTerminationDuration is the summary karpenter_nodes_termination_duration_seconds{nodepool}.
func (f Families) NodesTerminationDuration() *prometheus.SummaryVec {
	return f.summary("karpenter_nodes_termination_duration_seconds",
		"The time taken between a node's deletion request and the removal of its finalizer", LabelNodePool)
}

// NodesDrained is karpenter_nodes_drained_total{nodepool}.
func (f Families) NodesDrained() *prometheus.CounterVec {
	return f.counter("karpenter_nodes_drained_total", "The total number of nodes drained by Karpenter", LabelNodePool)
}

// PodsDrained is karpenter_pods_drained_total{reason}.
func (f Families) PodsDrained() *prometheus.CounterVec {
	return f.counter("karpenter_pods_drained_total",
		"The total number of pods drained during node termination by Karpenter, labeled by reason", LabelReason)
}

// PodsStartupDuration is the summary karpenter_pods_startup_duration_seconds (no labels).
func (f Families) PodsStartupDuration() prometheus.Summary {
	return reg(f, prometheus.NewSummary(prometheus.SummaryOpts{Name: "karpenter_pods_startup_duration_seconds",
		Help: "The time from pod creation until the pod is running.", Objectives: SummaryObjectives()}))
}

// SchedulingDuration is karpenter_scheduler_scheduling_duration_seconds{controller}.
func (f Families) SchedulingDuration() *prometheus.HistogramVec {
	return f.histogram("karpenter_scheduler_scheduling_duration_seconds",
		"Duration of scheduling simulations used for deprovisioning and provisioning in seconds.", DurationBuckets(), LabelController)
}

// Cluster state.

// ClusterStateNodeCount is karpenter_cluster_state_node_count.
func (f Families) ClusterStateNodeCount() prometheus.Gauge {
	return reg(f, prometheus.NewGauge(prometheus.GaugeOpts{Name: "karpenter_cluster_state_node_count", Help: "Current count of nodes in cluster state"}))
}

// ClusterStateSynced is karpenter_cluster_state_synced.
func (f Families) ClusterStateSynced() prometheus.Gauge {
	return reg(f, prometheus.NewGauge(prometheus.GaugeOpts{Name: "karpenter_cluster_state_synced",
		Help: "Returns 1 if cluster state is synced and 0 otherwise. Synced checks that nodeclaims and nodes that are stored in the APIServer have the same representation as Karpenter's cluster state"}))
}

// ClusterStateUnsyncedTime is karpenter_cluster_state_unsynced_time_seconds.
func (f Families) ClusterStateUnsyncedTime() prometheus.Gauge {
	return reg(f, prometheus.NewGauge(prometheus.GaugeOpts{Name: "karpenter_cluster_state_unsynced_time_seconds",
		Help: "The time for which cluster state is not synced"}))
}

// Termination of nodes and claims.

// NodesLifetimeDuration is karpenter_nodes_lifetime_duration_seconds{nodepool}, observed when
// a node is deleted.
func (f Families) NodesLifetimeDuration() *prometheus.HistogramVec {
	return f.histogram("karpenter_nodes_lifetime_duration_seconds", "The lifetime duration of the nodes since creation.",
		lifetimeBuckets(), LabelNodePool)
}

// lifetimeBuckets are Karpenter's for a node's lifetime: 15 minutes to 30 days.
func lifetimeBuckets() []float64 {
	const minute, hour, day = 60.0, 3600.0, 86400.0
	return []float64{15 * minute, 30 * minute, 45 * minute, hour, 2 * hour, 4 * hour, 6 * hour, 8 * hour, 10 * hour, 12 * hour,
		16 * hour, 20 * hour, day, 2 * day, 3 * day, 5 * day, 10 * day, 15 * day, 20 * day, 25 * day, 30 * day}
}

// NodeClaimsTerminationDuration is karpenter_nodeclaims_termination_duration_seconds{nodepool}:
// from the claim's deletion until its finalizer goes (buckets 1 s doubling to 2048 s).
func (f Families) NodeClaimsTerminationDuration() *prometheus.HistogramVec {
	return f.histogram("karpenter_nodeclaims_termination_duration_seconds", "Duration of NodeClaim termination in seconds.",
		prometheus.ExponentialBuckets(1, 2, 12), LabelNodePool)
}

// NodeClaimsInstanceTerminationDuration is
// karpenter_nodeclaims_instance_termination_duration_seconds{nodepool}: from the claim's
// InstanceTerminating condition until the cloud says the instance is gone (1 s to 1024 s).
func (f Families) NodeClaimsInstanceTerminationDuration() *prometheus.HistogramVec {
	return f.histogram("karpenter_nodeclaims_instance_termination_duration_seconds", "Duration of CloudProvider Instance termination in seconds.",
		prometheus.ExponentialBuckets(1, 2, 11), LabelNodePool)
}

// PodsEvictionRequests is karpenter_pods_eviction_requests_total{code}: each Eviction API call
// by its HTTP status ("200" when it was granted).
func (f Families) PodsEvictionRequests() *prometheus.CounterVec {
	return f.counter("karpenter_pods_eviction_requests_total",
		"The total number of pod eviction requests made by Karpenter, labeled by response code", LabelCode)
}

// Pods and provisioning.

// PodsBoundDuration is the histogram karpenter_pods_bound_duration_seconds (no labels).
func (f Families) PodsBoundDuration() prometheus.Histogram {
	return reg(f, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_bound_duration_seconds",
		Help: "The time from pod creation until the pod is bound.", Buckets: DurationBuckets()}))
}

// PodsSchedulingDecisionDuration is karpenter_pods_scheduling_decision_duration_seconds: from
// a pod seen pending until the scheduler first tries to place it.
func (f Families) PodsSchedulingDecisionDuration() prometheus.Histogram {
	return reg(f, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_pods_scheduling_decision_duration_seconds",
		Help: "The time it takes for Karpenter to first try to schedule a pod after it's been seen.", Buckets: DurationBuckets()}))
}

// SchedulerQueueDepth is karpenter_scheduler_queue_depth{controller, scheduling_id}.
func (f Families) SchedulerQueueDepth() *prometheus.GaugeVec {
	return f.gauge("karpenter_scheduler_queue_depth", "The number of pods currently waiting to be scheduled.", LabelController, "scheduling_id")
}

// SchedulerUnschedulablePods is karpenter_scheduler_unschedulable_pods_count{controller}.
func (f Families) SchedulerUnschedulablePods() *prometheus.GaugeVec {
	return f.gauge("karpenter_scheduler_unschedulable_pods_count", "The number of unschedulable Pods.", LabelController)
}

// SchedulerIgnoredPods is karpenter_scheduler_ignored_pods_count (no labels).
func (f Families) SchedulerIgnoredPods() prometheus.Gauge {
	return reg(f, prometheus.NewGauge(prometheus.GaugeOpts{Name: "karpenter_scheduler_ignored_pods_count",
		Help: "Number of pods ignored during scheduling by Karpenter"}))
}
