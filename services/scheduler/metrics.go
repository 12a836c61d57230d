package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetwright/fleetwright/pkg/service"
)

// Reasons of fleetwright_scheduler_nodeclaims_created_total. Karpenter's
// karpenter_nodeclaims_created_total says createdProvisioned for the first, and the decision's
// reason in lower case (underutilized, drifted, empty) for the second (claimCreated).
const (
	createdForProvisioning = "provisioning"
	createdForDisruption   = "disruption"
	createdProvisioned     = "provisioned" // Karpenter's metrics.ProvisionedReason
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
	takeoverPods          prometheus.Counter // pods offered at once on taking the lease
	// The launch-loop breaker: pods offered while their workload was held, and nodes found not to
	// hold what their claim was launched for.
	launchLoopHeld prometheus.Counter
	misfits        prometheus.Counter
	fenced         *prometheus.CounterVec // writes not made: the lease's hold was gone or stale, by write
	// Disruption (consolidation and drift).
	disruptionSeconds prometheus.Histogram
	decisions         *prometheus.CounterVec // by reason and action
	abandoned         *prometheus.CounterVec // by reason
	invalidated       *prometheus.CounterVec // by reason: commands that did not survive validation
	eligible          prometheus.Gauge
	blocked           *prometheus.GaugeVec // by cause
	savings           prometheus.Counter
	karp              *karpenter // Karpenter's families (karpmetrics.go)
}

// claimCreated counts a NodeClaim created, in ours (reason) and Karpenter's (karpReason)
// families; min_values_relaxed is always false: Fleetwright's minValues are Strict.
func (m *metrics) claimCreated(reason, karpReason, pool string) {
	m.claims.WithLabelValues(reason, pool).Inc()
	m.karp.created.WithLabelValues(karpReason, pool, "false").Inc()
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := service.Metrics{Reg: reg}
	return &metrics{
		solveSeconds: f.Histogram("fleetwright_scheduler_scheduling_duration_seconds",
			"Time to gather the input and run the scheduling core for one batch.", prometheus.ExponentialBuckets(0.001, 2, 14)),
		batches:       f.CounterVec("fleetwright_scheduler_batches_total", "Pending-pod batches by outcome (scheduled, nothing_to_do, unschedulable, error, fenced).", "outcome"),
		podsScheduled: f.Counter("fleetwright_scheduler_pods_scheduled_total", "Pods nominated to a new NodeClaim or placed on existing capacity."),
		podsUnsched:   f.Counter("fleetwright_scheduler_pods_unschedulable_total", "Pods no NodePool could take."),
		claims: f.CounterVec("fleetwright_scheduler_nodeclaims_created_total",
			"NodeClaims created, by reason (provisioning: for pending pods; disruption: a consolidation's replacement) and NodePool.", "reason", "nodepool"),
		intents: f.CounterVec("fleetwright_scheduler_launch_intents_total", "LaunchIntents published, by source (batch, reconcile, takeover, ...).", "source"),
		leader:  f.Gauge("fleetwright_scheduler_leader", "1 while this replica holds the scheduler Lease."),
		nominationsEnded: f.Counter("fleetwright_scheduler_nominations_ended_total",
			"Pods scheduled again because their nomination ended: the claim went away, or its node was ready without room for them."),
		nominationsEndedEarly: f.Counter("fleetwright_scheduler_nominations_ended_early_total",
			"Nominations the scheduler ended because the claim's ready node had no room left for the pod (kube-scheduler placed others there)."),
		takeoverPods: f.Counter("fleetwright_scheduler_takeover_pods_total", "Pending pods without a live nomination that a replica offered at once on taking the lease."),
		launchLoopHeld: f.Counter("fleetwright_scheduler_launch_loop_held_pods_total",
			"Pending pods offered while the launch-loop breaker held their workload: nodes launched for it kept coming up without room for it, so no new one was launched."),
		misfits: f.Counter("fleetwright_scheduler_launch_misfits_total",
			"NodeClaims whose ready node did not hold a pod it was launched for, though no other workload took the room (the node registered less than planned, or admission grew its DaemonSet pods)."),
		fenced: f.CounterVec("fleetwright_scheduler_fenced_writes_total",
			"Writes not made because this replica no longer held the scheduler Lease, or its last renewal was too old to be sure, by write.", "write"),
		disruptionSeconds: f.Histogram("fleetwright_disruption_decision_duration_seconds",
			"Time of one disruption pass: reading the cluster, consolidation and drift decisions.", prometheus.ExponentialBuckets(0.001, 2, 14)),
		decisions: f.CounterVec("fleetwright_disruption_decisions_total", "Disruption decisions, by reason (Underutilized, Drifted) and action (Delete, Replace).", "reason", "action"),
		abandoned: f.CounterVec("fleetwright_disruption_decisions_abandoned_total", "Disruption decisions given up because a replacement failed or was too slow, by reason.", "reason"),
		invalidated: f.CounterVec("fleetwright_disruption_decisions_invalidated_total",
			"Emptiness and consolidation commands not acted on because they no longer held when validated again, by reason.", "reason"),
		eligible: f.Gauge("fleetwright_disruption_eligible_nodes", "Nodes consolidation considered in its last pass."),
		blocked: f.GaugeVec("fleetwright_disruption_blocked_nodes", "Nodes consolidation could not take in its last pass, by cause "+
			"(do-not-disrupt, pdb, budget, savings-threshold, pods-would-not-fit, no-cheaper-replacement, spot, other).", "cause"),
		karp: newKarpenter(reg),
		savings: f.Counter("fleetwright_disruption_savings_usd_per_hour_total",
			"Hourly price saved by consolidations carried out (the replaced nodes' price less their replacement's), summed."),
	}
}
