package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetwright/fleetwright/pkg/service"
)

type metrics struct {
	terminated    *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	drain         *prometheus.HistogramVec
	evictions     *prometheus.CounterVec
	interruptions *prometheus.CounterVec
	decisions     *prometheus.CounterVec
	orphans       prometheus.Counter
	orphansKept   prometheus.Gauge
	karp          *karpenter // Karpenter's families (karpmetrics.go)
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := service.Metrics{Reg: reg}
	return &metrics{
		terminated: f.CounterVec("fleetwright_nodes_terminated_total",
			"Nodes whose instance was terminated and whose Node and NodeClaim were deleted, by reason and pool.", "reason", "nodepool"),
		outcomes: f.CounterVec("fleetwright_terminator_intents_finished_total", "Termination intents carried out, by reason and outcome "+
			"(terminated, already_gone, abandoned; superseded: a resumed intent another intent was already carrying out).", "reason", "outcome"),
		drain: f.HistogramVec("fleetwright_terminator_drain_seconds", "Time from cordon until the node held no evictable pods, by reason.",
			drainBuckets, "reason"),
		evictions: f.CounterVec("fleetwright_terminator_evictions_total", "Eviction API calls by outcome: evicted, retried (429, a PodDisruptionBudget said no), "+
			"error (any other refusal, retried with backoff), forced (deleted after the grace period), "+
			"completed (deleted: a PodDisruptionBudget had granted its eviction, whose client died before the deletion).", "outcome"),
		interruptions: f.CounterVec("fleetwright_interruption_messages_total",
			"SQS interruption messages by kind (spot_interruption, rebalance_recommendation, scheduled_change, state_change, unknown).", "kind"),
		decisions: f.CounterVec("fleetwright_terminator_decisions_total", "Termination intents published, by reason.", "reason"),
		karp:      newKarpenter(reg),
		orphans:   f.Counter("fleetwright_terminator_orphans_terminated_total", "Instances tagged as this cluster's that no NodeClaim owned, terminated."),
		orphansKept: f.Gauge("fleetwright_terminator_orphans_kept", "Instances tagged as this cluster's that no NodeClaim owns, kept at the last garbage collection because "+
			"a registered Node runs on them (delete the Node to end one)."),
	}
}

// drainBuckets reach 1024 s (0.25 s doubling): a drain waits out pods' terminationGracePeriod,
// often 10 minutes, and one that long must land in a bucket, not in +Inf, for a quantile to
// say how long it took.
var drainBuckets = prometheus.ExponentialBuckets(0.25, 2, 13)
