package karpmetrics

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// karpenterFamily is one of Karpenter's metric families as sigs.k8s.io/karpenter v1.14.1 and
// aws/karpenter-provider-aws v1.14.1 define it: its type and label names (sorted), the facts a
// dashboard or alert written for Karpenter depends on.
type karpenterFamily struct {
	name, typ string
	labels    []string
	make      func(Families) prometheus.Collector
}

var karpenterFamilies = []karpenterFamily{
	{"karpenter_nodeclaims_created_total", "COUNTER", []string{"min_values_relaxed", "nodepool", "reason"}, wrap(Families.NodeClaimsCreated)},
	{"karpenter_nodeclaims_terminated_total", "COUNTER", []string{"capacity_type", "nodepool", "zone"}, wrap(Families.NodeClaimsTerminated)},
	{"karpenter_nodeclaims_disrupted_total", "COUNTER", []string{"capacity_type", "nodepool", "reason"}, wrap(Families.NodeClaimsDisrupted)},
	{"karpenter_nodeclaims_termination_duration_seconds", "HISTOGRAM", []string{"nodepool"}, wrap(Families.NodeClaimsTerminationDuration)},
	{"karpenter_nodeclaims_instance_termination_duration_seconds", "HISTOGRAM", []string{"nodepool"}, wrap(Families.NodeClaimsInstanceTerminationDuration)},
	{"karpenter_nodes_created_total", "COUNTER", []string{"nodepool", "zone"}, wrap(Families.NodesCreated)},
	{"karpenter_nodes_terminated_total", "COUNTER", []string{"nodepool", "zone"}, wrap(Families.NodesTerminated)},
	{"karpenter_nodes_termination_duration_seconds", "SUMMARY", []string{"nodepool"}, wrap(Families.NodesTerminationDuration)},
	{"karpenter_nodes_lifetime_duration_seconds", "HISTOGRAM", []string{"nodepool"}, wrap(Families.NodesLifetimeDuration)},
	{"karpenter_nodes_drained_total", "COUNTER", []string{"nodepool"}, wrap(Families.NodesDrained)},
	{"karpenter_pods_drained_total", "COUNTER", []string{"reason"}, wrap(Families.PodsDrained)},
	{"karpenter_pods_eviction_requests_total", "COUNTER", []string{"code"}, wrap(Families.PodsEvictionRequests)},
	{"karpenter_pods_startup_duration_seconds", "SUMMARY", nil, wrap(Families.PodsStartupDuration)},
	{"karpenter_pods_bound_duration_seconds", "HISTOGRAM", nil, wrap(Families.PodsBoundDuration)},
	{"karpenter_pods_scheduling_decision_duration_seconds", "HISTOGRAM", nil, wrap(Families.PodsSchedulingDecisionDuration)},
	{"karpenter_scheduler_scheduling_duration_seconds", "HISTOGRAM", []string{"controller"}, wrap(Families.SchedulingDuration)},
	{"karpenter_scheduler_queue_depth", "GAUGE", []string{"controller", "scheduling_id"}, wrap(Families.SchedulerQueueDepth)},
	{"karpenter_scheduler_unschedulable_pods_count", "GAUGE", []string{"controller"}, wrap(Families.SchedulerUnschedulablePods)},
	{"karpenter_scheduler_ignored_pods_count", "GAUGE", nil, wrap(Families.SchedulerIgnoredPods)},
	{"karpenter_cluster_state_node_count", "GAUGE", nil, wrap(Families.ClusterStateNodeCount)},
	{"karpenter_cluster_state_synced", "GAUGE", nil, wrap(Families.ClusterStateSynced)},
	{"karpenter_cluster_state_unsynced_time_seconds", "GAUGE", nil, wrap(Families.ClusterStateUnsyncedTime)},
	{"karpenter_voluntary_disruption_decision_evaluation_duration_seconds", "HISTOGRAM", []string{"consolidation_type", "reason"},
		wrap(Families.DisruptionEvaluationDuration)},
	{"karpenter_voluntary_disruption_decisions_total", "COUNTER", []string{"consolidation_type", "decision", "reason"}, wrap(Families.DisruptionDecisions)},
	{"karpenter_voluntary_disruption_decisions_by_nodepool_total", "COUNTER", []string{"consolidation_type", "decision", "nodepool", "reason"},
		wrap(Families.DisruptionDecisionsByPool)},
	{"karpenter_voluntary_disruption_eligible_nodes", "GAUGE", []string{"reason"}, wrap(Families.DisruptionEligibleNodes)},
	{"karpenter_voluntary_disruption_consolidation_timeouts_total", "COUNTER", []string{"consolidation_type"}, wrap(Families.ConsolidationTimeouts)},
	{"karpenter_voluntary_disruption_failed_validations_total", "COUNTER", []string{"consolidation_type"}, wrap(Families.FailedValidations)},
	{"karpenter_voluntary_disruption_queue_failures_total", "COUNTER", []string{"consolidation_type", "decision", "reason"}, wrap(Families.QueueFailures)},
	{"karpenter_nodepools_allowed_disruptions", "GAUGE", []string{"nodepool", "reason"}, wrap(Families.AllowedDisruptions)},
	{"karpenter_nodepools_nodes_consuming_budgets", "GAUGE", []string{"nodepool", "reason"}, wrap(Families.NodesConsumingBudgets)},
	{"karpenter_cloudprovider_duration_seconds", "HISTOGRAM", []string{"controller", "method", "provider"}, wrap(Families.CloudProviderDuration)},
	{"karpenter_cloudprovider_errors_total", "COUNTER", []string{"controller", "error", "method", "provider"}, wrap(Families.CloudProviderErrors)},
	{"karpenter_cloudprovider_instance_launch_failures_total", "COUNTER", []string{"capacity_type", "reason", "zone", "zone_id"},
		wrap(Families.InstanceLaunchFailures)},
	{"karpenter_cloudprovider_instance_termination_failures_total", "COUNTER", []string{"zone", "zone_id"}, wrap(Families.InstanceTerminationFailures)},
	{"karpenter_interruption_received_messages_total", "COUNTER", []string{"message_type"}, wrap(Families.InterruptionReceived)},
	{"karpenter_interruption_deleted_messages_total", "COUNTER", nil, wrap(Families.InterruptionDeleted)},
	{"karpenter_interruption_message_queue_duration_seconds", "HISTOGRAM", nil, wrap(Families.InterruptionQueueDuration)},
}

func wrap[C prometheus.Collector](f func(Families) C) func(Families) prometheus.Collector {
	return func(fs Families) prometheus.Collector { return f(fs) }
}

// touch makes a vector family show one series (a vector with none is not gathered).
func touch(c prometheus.Collector, labels int) {
	values := make([]string, labels)
	switch v := c.(type) {
	case *prometheus.CounterVec:
		v.WithLabelValues(values...).Add(0)
	case *prometheus.GaugeVec:
		v.WithLabelValues(values...).Set(0)
	case *prometheus.HistogramVec:
		v.WithLabelValues(values...).Observe(0)
	case *prometheus.SummaryVec:
		v.WithLabelValues(values...).Observe(0)
	}
}

func TestFamiliesAreKarpenters(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := Families{Reg: reg}
	for _, k := range karpenterFamilies {
		touch(k.make(f), len(k.labels))
	}
	got := gather(t, reg)
	require.Len(t, got, len(karpenterFamilies), "one family per constructor, each registered once")
	for _, k := range karpenterFamilies {
		t.Run(k.name, func(t *testing.T) {
			fam, ok := got[k.name]
			require.True(t, ok, "not served")
			require.Equal(t, k.typ, fam.Type)
			require.Equal(t, k.labels, fam.labelNames())
			require.NotEmpty(t, fam.Help)
		})
	}
}

func TestHistogramBucketsAreKarpenters(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := Families{Reg: reg}
	f.SchedulingDuration().WithLabelValues("provisioner").Observe(1)
	f.NodesLifetimeDuration().WithLabelValues("default").Observe(1)
	f.NodeClaimsTerminationDuration().WithLabelValues("default").Observe(1)
	f.NodeClaimsInstanceTerminationDuration().WithLabelValues("default").Observe(1)
	f.CloudProviderDuration().WithLabelValues("nodeclaim.lifecycle", MethodCreate, Provider).Observe(1)
	got := gather(t, reg)

	duration := got["karpenter_scheduler_scheduling_duration_seconds"].Buckets
	require.Len(t, duration, 45)
	require.Equal(t, []float64{0.005, 0.01, 0.025}, duration[:3])
	require.Equal(t, []float64{60, 120, 150, 300, 450, 600}, duration[39:])

	lifetime := got["karpenter_nodes_lifetime_duration_seconds"].Buckets
	require.Len(t, lifetime, 21)
	require.Equal(t, 15*60.0, lifetime[0])
	require.Equal(t, 30*86400.0, lifetime[20])

	require.Equal(t, []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}, got["karpenter_nodeclaims_termination_duration_seconds"].Buckets)
	require.Equal(t, []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, got["karpenter_nodeclaims_instance_termination_duration_seconds"].Buckets)
	require.Equal(t, prometheus.DefBuckets, got["karpenter_cloudprovider_duration_seconds"].Buckets, "Karpenter sets none: the default")
}

func TestSummariesHaveKarpentersQuantiles(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	Families{Reg: reg}.PodsStartupDuration().Observe(3)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, 1)
	var quantiles []float64
	for _, q := range mfs[0].GetMetric()[0].GetSummary().GetQuantile() {
		quantiles = append(quantiles, q.GetQuantile())
	}
	slices.Sort(quantiles)
	require.Equal(t, []float64{0, 0.5, 0.9, 0.99, 1}, quantiles, "the quantiles Karpenter's performance dashboard reads")
}

var errFake = errors.New("reconcile failed")

func TestReconcilesServeControllerRuntimesSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := Families{Reg: reg}.Reconciles()
	r.Init(ControllerProvisioner)
	got := gather(t, reg)
	total := got["controller_runtime_reconcile_total"]
	require.Equal(t, "COUNTER", total.Type)
	require.Len(t, total.Samples, 4, "error, requeue, requeue_after and success, each at 0 from the start")
	for _, s := range total.Samples {
		require.Zero(t, s.Value)
	}

	r.Observe(ControllerProvisioner, time.Now(), nil)
	r.Observe(ControllerProvisioner, time.Now(), errFake)
	r.Observe(ControllerProvisioner, time.Now(), errFake)
	got = gather(t, reg)
	total = got["controller_runtime_reconcile_total"]
	require.Equal(t, 1.0, total.find(t, map[string]string{"controller": "provisioner", "result": "success"}).Value)
	require.Equal(t, 2.0, total.find(t, map[string]string{"controller": "provisioner", "result": "error"}).Value)
	require.Equal(t, 2.0, got["controller_runtime_reconcile_errors_total"].find(t, map[string]string{"controller": "provisioner"}).Value)
	timeSeconds := got["controller_runtime_reconcile_time_seconds"]
	require.Equal(t, "HISTOGRAM", timeSeconds.Type)
	require.Equal(t, 3.0, timeSeconds.find(t, map[string]string{"controller": "provisioner"}).Value)
	require.Len(t, timeSeconds.Buckets, 40, "controller-runtime's buckets end at 60 s")
	require.Equal(t, 60.0, timeSeconds.Buckets[39])
}
