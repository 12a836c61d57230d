package main

import "github.com/prometheus/client_golang/prometheus"

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
	takeoverPods          prometheus.Counter // pods offered at once on taking the lease
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		solveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetwright_scheduler_scheduling_duration_seconds",
			Help: "Time to gather the input and run the scheduling core for one batch.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_batches_total",
			Help: "Pending-pod batches by outcome (scheduled, nothing_to_do, unschedulable, error)."}, []string{"outcome"}),
		podsScheduled: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_pods_scheduled_total",
			Help: "Pods nominated to a new NodeClaim or placed on existing capacity."}),
		podsUnsched: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_pods_unschedulable_total",
			Help: "Pods no NodePool could take."}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_nodeclaims_created_total",
			Help: "NodeClaims created, by NodePool."}, []string{"nodepool"}),
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_scheduler_launch_intents_total",
			Help: "LaunchIntents published, by source (batch, reconcile)."}, []string{"source"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fleetwright_scheduler_leader",
			Help: "1 while this replica holds the scheduler Lease."}),
		nominationsEnded: prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_nominations_ended_total",
			Help: "Pods scheduled again because their nomination ended: the claim went away, or its node was ready without room for them."}),
	}
	m.nominationsEndedEarly = prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_nominations_ended_early_total",
		Help: "Nominations the scheduler ended because the claim's ready node had no room left for the pod (kube-scheduler placed others there)."})
	m.takeoverPods = prometheus.NewCounter(prometheus.CounterOpts{Name: "fleetwright_scheduler_takeover_pods_total",
		Help: "Pending pods without a live nomination that a replica offered at once on taking the lease."})
	reg.MustRegister(m.solveSeconds, m.batches, m.podsScheduled, m.podsUnsched, m.claims, m.intents, m.leader,
		m.nominationsEnded, m.nominationsEndedEarly, m.takeoverPods)
	return m
}
