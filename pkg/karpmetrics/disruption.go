package karpmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

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
		"Number of disruption decisions performed by nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type.",
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
// budget's as the API spells it (Empty, Drifted, Underutilized), not lower case: Karpenter's.
func (f Families) AllowedDisruptions() *prometheus.GaugeVec {
	return f.gauge("karpenter_nodepools_allowed_disruptions",
		"The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
		LabelNodePool, LabelReason)
}

// NodesConsumingBudgets is karpenter_nodepools_nodes_consuming_budgets{nodepool, reason}.
func (f Families) NodesConsumingBudgets() *prometheus.GaugeVec {
	return f.gauge("karpenter_nodepools_nodes_consuming_budgets",
		"The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
		LabelNodePool, LabelReason)
}
