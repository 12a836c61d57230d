package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	podsv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/pods/v1"
)

// karpenter are the Karpenter metric families the scheduler serves (pkg/karpmetrics): what
// Karpenter's provisioner, disruption controller and cluster-state metrics controllers export.
// The cluster's gauges (cluster) come from the leader's disruption pass only; a replica that
// stops leading clears them, so sum() across replicas counts each node and pod once.
type karpenter struct {
	created, disrupted           *prometheus.CounterVec
	scheduling                   *prometheus.HistogramVec
	evaluation                   *prometheus.HistogramVec
	decisions, decisionsByPool   *prometheus.CounterVec
	eligible, allowed, consuming *prometheus.GaugeVec
	timeouts, failedValidations  *prometheus.CounterVec
	queueFailures                *prometheus.CounterVec
	nodeCount, synced, unsynced  prometheus.Gauge
	unschedulable                *prometheus.GaugeVec
	startup                      prometheus.Summary
	bound                        prometheus.Histogram
	firstDecisions               *karpmetrics.Decisions // pods_scheduling_decision_duration_seconds
	reconciles                   *karpmetrics.Reconciles
	cluster                      *karpmetrics.Cluster
	// startups counts from the first pass of this replica's leading (nil before it); the
	// election's callback clears it while a last pass may still be running, hence mu.
	mu       sync.Mutex
	startups *karpmetrics.Startups
}

func newKarpenter(reg prometheus.Registerer) *karpenter {
	f := karpmetrics.Families{Reg: reg}
	k := &karpenter{
		created: f.NodeClaimsCreated(), disrupted: f.NodeClaimsDisrupted(), scheduling: f.SchedulingDuration(),
		evaluation: f.DisruptionEvaluationDuration(), decisions: f.DisruptionDecisions(), decisionsByPool: f.DisruptionDecisionsByPool(),
		eligible: f.DisruptionEligibleNodes(), allowed: f.AllowedDisruptions(), consuming: f.NodesConsumingBudgets(),
		timeouts: f.ConsolidationTimeouts(), failedValidations: f.FailedValidations(), queueFailures: f.QueueFailures(),
		nodeCount: f.ClusterStateNodeCount(), synced: f.ClusterStateSynced(), unsynced: f.ClusterStateUnsyncedTime(),
		unschedulable: f.SchedulerUnschedulablePods(), startup: f.PodsStartupDuration(), bound: f.PodsBoundDuration(),
		reconciles: f.Reconciles(), cluster: karpmetrics.NewCluster(), firstDecisions: karpmetrics.NewDecisions(f.PodsSchedulingDecisionDuration()),
	}
	reg.MustRegister(k.cluster)
	k.reconciles.Init(karpmetrics.ControllerProvisioner, karpmetrics.ControllerDisruption)
	for _, t := range []string{consolidationSingle, consolidationMulti} {
		k.timeouts.WithLabelValues(t) // Karpenter serves both at 0 from the start
	}
	return k
}

// Karpenter's consolidation_type values.
const (
	consolidationEmpty  = "empty"
	consolidationSingle = "single"
	consolidationMulti  = "multi"
)

// consolidationType is Karpenter's consolidation_type of a command: empty for emptiness,
// single or multi for consolidation by how many nodes it removes, none for drift.
func consolidationType(reason karpv1.DisruptionReason, nodes int) string {
	switch reason {
	case karpv1.DisruptionReasonEmpty:
		return consolidationEmpty
	case karpv1.DisruptionReasonUnderutilized:
		if nodes > 1 {
			return consolidationMulti
		}
		return consolidationSingle
	}
	return ""
}

// lowerReason is Karpenter's reason label of its disruption metrics.
var lowerReason = karpmetrics.LowerReason

// decided counts a decision as Karpenter's disruption queue does when it starts a command.
func (k *karpenter) decided(d disruption.Decision, pools []string) {
	decision, reason, ct := strings.ToLower(string(d.Action)), lowerReason(d.Reason), consolidationType(d.Reason, len(d.Claims))
	k.decisions.WithLabelValues(decision, reason, ct).Inc()
	for _, p := range pools {
		k.decisionsByPool.WithLabelValues(p, decision, reason, ct).Inc()
	}
}

// claimDisrupted counts a claim the decision deletes.
func (k *karpenter) claimDisrupted(d disruption.Decision, nc *karpv1.NodeClaim) {
	k.disrupted.WithLabelValues(lowerReason(d.Reason), claimPool(nc), nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}

// abandoned counts a decision given up (Karpenter's failed command in its queue).
func (k *karpenter) abandoned(d disruption.Decision) {
	k.queueFailures.WithLabelValues(strings.ToLower(string(d.Action)), lowerReason(d.Reason), consolidationType(d.Reason, len(d.Claims))).Inc()
}

// observeDisruption sets the pass's gauges: eligible nodes by reason, each pool's budgets, and
// the cluster as the pass read it.
func (s *scheduler) observeDisruption(st *disruptionState) {
	k := s.metrics.karp
	eligible := map[karpv1.DisruptionReason]int{karpv1.DisruptionReasonEmpty: 0, karpv1.DisruptionReasonUnderutilized: 0, karpv1.DisruptionReasonDrifted: 0}
	for _, c := range st.cands {
		switch {
		case c.Drifted != "":
			eligible[karpv1.DisruptionReasonDrifted]++
		case c.Consolidatable && c.Empty():
			eligible[karpv1.DisruptionReasonEmpty]++
		case c.Consolidatable:
			eligible[karpv1.DisruptionReasonUnderutilized]++
		}
	}
	for r, n := range eligible {
		k.eligible.WithLabelValues(lowerReason(r)).Set(float64(n))
	}
	k.allowed.Reset()
	k.consuming.Reset()
	for _, pool := range st.ledger.Pools() {
		for r := range eligible {
			allowed, disrupting := st.ledger.Budget(pool, r)
			k.allowed.WithLabelValues(pool, string(r)).Set(float64(allowed))
			k.consuming.WithLabelValues(pool, string(r)).Set(float64(disrupting))
		}
	}
	s.observeCluster(st)
}

// observeCluster replaces the cluster's gauges with what the pass read, and observes the
// startup of the pods this replica saw unstarted that now run.
func (s *scheduler) observeCluster(st *disruptionState) {
	k := s.metrics.karp
	in := karpmetrics.ClusterInput{Now: st.now}
	for _, n := range s.cluster.AllNodes() {
		in.Nodes = append(in.Nodes, karpmetrics.ClusterNode{Node: n, Pods: s.cluster.PodsOn(n.Name)})
		in.Pods = append(in.Pods, s.cluster.PodsOn(n.Name)...)
	}
	in.Pods = append(in.Pods, s.cluster.Unbound()...)
	for _, p := range st.pools {
		in.Pools = append(in.Pools, karpmetrics.ClusterPool{Name: p.Name, Usage: corev1.ResourceList(p.Status.Resources),
			Limits: corev1.ResourceList(p.Spec.Limits)})
	}
	k.cluster.Observe(in)
	k.nodeCount.Set(float64(len(in.Nodes)))
	// The pass read from informers that have all listed (Ready), so the state it saw is the
	// API server's as of their last event: synced, for no time unsynced.
	k.synced.Set(1)
	k.unsynced.Set(0)
	present := make(map[string]bool, len(in.Pods))
	for _, p := range in.Pods {
		present[string(p.UID)] = true
	}
	k.firstDecisions.Forget(func(uid string) bool { return present[uid] })
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.startups == nil {
		k.startups = karpmetrics.NewStartups(k.startup, k.bound, st.now)
	}
	k.startups.Observe(in.Pods)
}

// solved records the first scheduling decision on each of a batch's pods: seen when the
// pod-watcher's window opened, or when the pod was made if later (Karpenter's ack is when its
// provisioner first took the pod into a batch).
func (k *karpenter) solved(pods []scheduling.Pod, windowOpen, now time.Time) {
	for _, p := range pods {
		seen := windowOpen
		if p.CreationTime.After(seen) {
			seen = p.CreationTime
		}
		k.firstDecisions.Decided(p.UID, seen, now)
	}
}

// stoppedLeading clears what only the leader serves.
func (k *karpenter) stoppedLeading() {
	k.cluster.Clear()
	k.eligible.Reset()
	k.allowed.Reset()
	k.consuming.Reset()
	k.nodeCount.Set(0)
	k.synced.Set(0)
	k.unsynced.Set(0)
	k.unschedulable.Reset()
	k.mu.Lock()
	k.startups = nil // a replica that leads again counts the pods that start from then on
	k.mu.Unlock()
}

// handleMeasured is handle as controller_runtime_reconcile_* counts it, Karpenter's
// provisioner.
func (s *scheduler) handleMeasured(ctx context.Context, batch *podsv1.PendingPodBatch, d bus.Delivery) (err error) {
	defer func(start time.Time) {
		s.metrics.karp.reconciles.Observe(karpmetrics.ControllerProvisioner, start, err)
	}(time.Now())
	return s.handle(ctx, batch, d)
}

// disruptMeasured is disrupt as Karpenter's disruption controller is counted.
func (s *scheduler) disruptMeasured(ctx context.Context) (err error) {
	defer func(start time.Time) { s.metrics.karp.reconciles.Observe(karpmetrics.ControllerDisruption, start, err) }(time.Now())
	return s.disrupt(ctx)
}
