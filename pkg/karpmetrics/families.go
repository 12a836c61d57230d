package karpmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Karpenter's label names.
const (
	LabelNodePool          = "nodepool"
	LabelReason            = "reason"
	LabelResourceType      = "resource_type"
	LabelCapacityType      = "capacity_type"
	LabelZone              = "zone"
	LabelMinValuesRelaxed  = "min_values_relaxed"
	LabelDecision          = "decision"
	LabelConsolidationType = "consolidation_type"
	LabelController        = "controller"
	LabelMethod            = "method"
	LabelProvider          = "provider"
	LabelError             = "error"
	LabelMessageType       = "message_type"
	LabelResult            = "result"
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

// Voluntary disruption.

// DisruptionEvaluationDuration is karpenter_voluntary_disruption_decision_evaluation_duration_seconds{reason, consolidation_type}.
func (f Families) DisruptionEvaluationDuration() *prometheus.HistogramVec {
	return f.histogram("karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
		"Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
		DurationBuckets(), LabelReason, LabelConsolidationType)
}

// DisruptionDecisions is karpenter_voluntary_disruption_decisions_total{decision, reason, consolidation_type}.
func (f Families) DisruptionDecisions() *prometheus.CounterVec {
	return f.counter("karpenter_voluntary_disruption_decisions_total",
		"Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
		LabelDecision, LabelReason, LabelConsolidationType)
}

// DisruptionDecisionsByPool is karpenter_voluntary_disruption_decisions_by_nodepool_total.
func (f Families) DisruptionDecisionsByPool() *prometheus.CounterVec {
	return f.counter("karpenter_voluntary_disruption_decisions_by_nodepool_total",
		"Number of disruption decisions performed per nodepool. Labeled by nodepool, disruption decision, reason, and consolidation type.",
		LabelNodePool, LabelDecision, LabelReason, LabelConsolidationType)
}

// DisruptionEligibleNodes is karpenter_voluntary_disruption_eligible_nodes{reason}.
func (f Families) DisruptionEligibleNodes() *prometheus.GaugeVec {
	return f.gauge("karpenter_voluntary_disruption_eligible_nodes",
		"Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.", LabelReason)
}

// ConsolidationTimeouts is karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type}.
func (f Families) ConsolidationTimeouts() *prometheus.CounterVec {
	return f.counter("karpenter_voluntary_disruption_consolidation_timeouts_total",
		"Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.", LabelConsolidationType)
}

// FailedValidations is karpenter_voluntary_disruption_failed_validations_total{consolidation_type}.
func (f Families) FailedValidations() *prometheus.CounterVec {
	return f.counter("karpenter_voluntary_disruption_failed_validations_total",
		"Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.", LabelConsolidationType)
}

// QueueFailures is karpenter_voluntary_disruption_queue_failures_total{decision, reason, consolidation_type}.
func (f Families) QueueFailures() *prometheus.CounterVec {
	return f.counter("karpenter_voluntary_disruption_queue_failures_total",
		"The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
		LabelDecision, LabelReason, LabelConsolidationType)
}

// AllowedDisruptions is karpenter_nodepools_allowed_disruptions{nodepool, reason}; reason is the
// budget's (Empty, Drifted, Underutilized).
func (f Families) AllowedDisruptions() *prometheus.GaugeVec {
	return f.gauge("karpenter_nodepools_allowed_disruptions",
		"The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
		LabelNodePool, LabelReason)
}

// NodesConsumingBudgets is karpenter_nodepools_nodes_consuming_budgets{nodepool, reason}.
func (f Families) NodesConsumingBudgets() *prometheus.GaugeVec {
	return f.gauge("karpenter_nodepools_nodes_consuming_budgets",
		"The number of nodes for a given NodePool that are currently consuming disruption budgets. Labeled by NodePool and reason.",
		LabelNodePool, LabelReason)
}

// Cloud provider.

// CloudProviderDuration is karpenter_cloudprovider_duration_seconds{controller, method, provider}
// (Prometheus' default buckets, as Karpenter sets none).
func (f Families) CloudProviderDuration() *prometheus.HistogramVec {
	return f.histogram("karpenter_cloudprovider_duration_seconds",
		"Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
		prometheus.DefBuckets, LabelController, LabelMethod, LabelProvider)
}

// CloudProviderErrors is karpenter_cloudprovider_errors_total{controller, method, provider, error}.
func (f Families) CloudProviderErrors() *prometheus.CounterVec {
	return f.counter("karpenter_cloudprovider_errors_total", "Total number of errors returned from CloudProvider calls.",
		LabelController, LabelMethod, LabelProvider, LabelError)
}

// Interruption.

// InterruptionReceived is karpenter_interruption_received_messages_total{message_type}.
func (f Families) InterruptionReceived() *prometheus.CounterVec {
	return f.counter("karpenter_interruption_received_messages_total",
		"Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.", LabelMessageType)
}

// InterruptionDeleted is karpenter_interruption_deleted_messages_total.
func (f Families) InterruptionDeleted() prometheus.Counter {
	return reg(f, prometheus.NewCounter(prometheus.CounterOpts{Name: "karpenter_interruption_deleted_messages_total",
		Help: "Count of messages deleted from the SQS queue."}))
}

// InterruptionQueueDuration is karpenter_interruption_message_queue_duration_seconds.
func (f Families) InterruptionQueueDuration() prometheus.Histogram {
	return reg(f, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "karpenter_interruption_message_queue_duration_seconds",
		Help: "Amount of time an interruption message is on the queue before it is processed by karpenter.", Buckets: DurationBuckets()}))
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
