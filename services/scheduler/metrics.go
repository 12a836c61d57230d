package main

import "github.com/prometheus/client_golang/prometheus"

// Reasons of fleetwright_scheduler_nodeclaims_created_total, Karpenter's values of
// karpenter_nodeclaims_created_total's reason.
const (
	createdForProvisioning = "provisioning"
	createdForDisruption   = "disruption"
)

type metrics struct {
	solveSeconds  prometheus.Histogram
	batches       *prometheus.CounterVec
	podsScheduled prometheus.Counter
	podsUnsched   prometheus.Counter
	claims        *prometheus.CounterVec
	intents       *prometheus.CounterVec
	leader        prometheus.Gauge
	// nominationsEnded counts pods scheduled again because their nomination ended;
	// nominationsEndedEarly the nominations this replica ended because the node had no room.
	nominationsEnded      prometheus.Counter
	nominationsEndedEarly prometheus.Counter
	takeoverPods          prometheus.Counter     // pods offered at once on taking the lease
	fenced                *prometheus.CounterVec // writes not made: the lease's hold was gone or stale, by write
	// Disruption (consolidation and drift).
	disruptionSeconds prometheus.Histogram
	decisions         *prometheus.CounterVec // by reason and action
	abandoned         *prometheus.CounterVec // by reason
	eligible          prometheus.Gauge
	blocked           *prometheus.GaugeVec // by cause
	savings           prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		solveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetwright_scheduler_scheduling_duration_seconds",
			Help: "Time to gather the input and run the scheduling core for one batch.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_batches_total",
			Help: "Pending-pod batches by outcome (scheduled, nothing_to_do, unschedulable, error, fenced)."}, []string{"outcome"}),
		podsScheduled: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_pods_scheduled_total",
			Help: "Pods nominated to a new NodeClaim or placed on existing capacity."}),
		podsUnsched: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_pods_unschedulable_total",
			Help: "Pods no NodePool could take."}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_nodeclaims_created_total",
			Help: "NodeClaims created, by reason (provisioning: for pending pods; disruption: a consolidation's replacement) and NodePool."},
			[]string{"reason", "nodepool"}),
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_launch_intents_total",
			Help: "LaunchIntents published, by source (batch, reconcile, takeover, ...)."}, []string{"source"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetwright_scheduler_leader",
			Help: "1 while this replica holds the scheduler Lease."}),
		nominationsEnded: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_nominations_ended_total",
			Help: "Pods scheduled again because their nomination ended: the claim went away, or its node was ready without room for them."}),
	}
	m.nominationsEndedEarly = prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_nominations_ended_early_total",
		Help: "Nominations the scheduler ended because the claim's ready node had no room left for the pod (kube-scheduler placed others there)."})
	m.takeoverPods = prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_takeover_pods_total",
		Help: "Pending pods without a live nomination that a replica offered at once on taking the lease."})
	m.fenced = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_fenced_writes_total",
		Help: "Writes not made because this replica no longer held the scheduler Lease, or its last renewal was too old to be sure, by write."}, []string{"write"})
	m.disruptionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetwright_disruption_decision_duration_seconds",
		Help: "Time of one disruption pass: reading the cluster, consolidation and drift decisions.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_disruption_decisions_total",
		Help: "Disruption decisions, by reason (Underutilized, Drifted) and action (Delete, Replace)."}, []string{"reason", "action"})
	m.abandoned = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_disruption_decisions_abandoned_total",
		Help: "Disruption decisions given up because a replacement failed or was too slow, by reason."}, []string{"reason"})
	m.eligible = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetwright_disruption_eligible_nodes",
		Help: "Nodes consolidation considered in its last pass."})
	m.blocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetwright_disruption_blocked_nodes",
		Help: "Nodes consolidation could not take in its last pass, by cause (do-not-disrupt, pdb, budget, savings-threshold, pods-would-not-fit, no-cheaper-replacement, spot, other)."}, []string{"cause"})
	m.savings = prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_disruption_savings_usd_per_hour_total",
		Help: "Hourly price saved by consolidations carried out (the replaced nodes' price less their replacement's), summed."})
	reg.MustRegister(m.disruptionSeconds, m.decisions, m.abandoned, m.eligible, m.blocked, m.savings)
	reg.MustRegister(m.solveSeconds, m.batches, m.podsScheduled, m.podsUnsched, m.claims, m.intents, m.leader,
		m.nominationsEnded, m.nominationsEndedEarly, m.takeoverPods, m.fenced)
	return m
}
