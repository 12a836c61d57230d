package main

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	terminated    *prometheus.CounterVec
	outcomes      *prometheus.CounterVec
	drain         *prometheus.HistogramVec
	evictions     *prometheus.CounterVec
	interruptions *prometheus.CounterVec
	decisions     *prometheus.CounterVec
	orphans       prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		terminated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_nodes_terminated_total",
			Help: "Nodes whose instance was terminated and whose Node and NodeClaim were deleted, by reason and pool."}, []string{"reason", "nodepool"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_terminator_intents_finished_total",
			Help: "Termination intents carried out, by reason and outcome (terminated, already_gone, abandoned; superseded: a resumed intent another intent was already carrying out)."}, []string{"reason", "outcome"}),
		drain: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleetwright_terminator_drain_seconds",
			Help: "Time from cordon until the node held no evictable pods, by reason.", Buckets: drainBuckets}, []string{"reason"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_terminator_evictions_total",
			Help: "Eviction API calls by outcome: evicted, retried (429, a PodDisruptionBudget said no), error (any other refusal, retried with backoff), forced (deleted after the grace period)."}, []string{"outcome"}),
		interruptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_interruption_messages_total",
			Help: "SQS interruption messages by kind (spot_interruption, rebalance_recommendation, scheduled_change, state_change, unknown)."}, []string{"kind"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_terminator_decisions_total",
			Help: "Termination intents published, by reason."}, []string{"reason"}),
	}
	m.orphans = prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_terminator_orphans_terminated_total",
		Help: "Instances tagged as this cluster's that no NodeClaim owned, terminated."})
	reg.MustRegister(m.terminated, m.outcomes, m.drain, m.evictions, m.interruptions, m.decisions, m.orphans)
	return m
}

// drainBuckets reach 1024 s (0.25 s doubling): a drain waits out pods' terminationGracePeriod,
// often 10 minutes, and one that long must land in a bucket, not in +Inf, for a quantile to
// say how long it took.
var drainBuckets = prometheus.ExponentialBuckets(0.25, 2, 13)
