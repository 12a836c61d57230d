package karpmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

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

// Karpenter's error label values of karpenter_cloudprovider_errors_total; any other error is "".
const (
	ErrorInsufficientCapacity = "InsufficientCapacityError"
	ErrorNodeClaimNotFound    = "NodeClaimNotFoundError"
	ErrorNodeClassNotReady    = "NodeClassNotReadyError"
)

// Karpenter's method label values of karpenter_cloudprovider_* that a Fleetwright call does
// the job of.
const (
	MethodCreate           = "Create"
	MethodDelete           = "Delete"
	MethodGet              = "Get"
	MethodList             = "List"
	MethodGetInstanceTypes = "GetInstanceTypes"
	MethodIsDrifted        = "IsDrifted"
)

// InstanceLaunchFailures is karpenter_cloudprovider_instance_launch_failures_total{zone,
// zone_id, capacity_type, reason}: each offering CreateFleet could not launch, reason its
// error code (InsufficientInstanceCapacity, ...).
func (f Families) InstanceLaunchFailures() *prometheus.CounterVec {
	return f.counter("karpenter_cloudprovider_instance_launch_failures_total",
		"Number of instance launch (CreateFleet offering) failures, dimensioned by availability zone, zone ID, capacity type, and launch failure reason.",
		LabelZone, "zone_id", LabelCapacityType, LabelReason)
}

// InstanceTerminationFailures is karpenter_cloudprovider_instance_termination_failures_total{zone, zone_id}.
func (f Families) InstanceTerminationFailures() *prometheus.CounterVec {
	return f.counter("karpenter_cloudprovider_instance_termination_failures_total",
		"Number of instance termination (TerminateInstances) failures, dimensioned by availability zone and zone ID.",
		LabelZone, "zone_id")
}

// Karpenter's message_type values of karpenter_interruption_received_messages_total (the AWS
// provider's message kinds); a message of no kind it acts on is NoOp.
const (
	MessageRebalanceRecommendation         = "rebalance_recommendation"
	MessageScheduledChange                 = "scheduled_change"
	MessageSpotInterrupted                 = "spot_interrupted"
	MessageInstanceStopped                 = "instance_stopped"
	MessageInstanceTerminated              = "instance_terminated"
	MessageCapacityReservationInterruption = "capacity_reservation_interrupted"
	MessageNoOp                            = "no_op"
)
