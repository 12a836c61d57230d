package main

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

func TestMessageTypesAreTheAWSProviders(t *testing.T) {
	for _, c := range []struct {
		kind  commonv1.InterruptionKind
		state string
		want  string
	}{
		{commonv1.InterruptionKind_INTERRUPTION_KIND_SPOT_INTERRUPTION, "", "spot_interrupted"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_REBALANCE_RECOMMENDATION, "", "rebalance_recommendation"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_SCHEDULED_CHANGE, "", "scheduled_change"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, "stopping", "instance_stopped"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, "Stopped", "instance_stopped"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, "shutting-down", "instance_terminated"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, "terminated", "instance_terminated"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_STATE_CHANGE, "running", "no_op"},
		{commonv1.InterruptionKind_INTERRUPTION_KIND_UNSPECIFIED, "", "no_op"},
	} {
		require.Equal(t, c.want, messageType(c.kind, c.state), "%v %q", c.kind, c.state)
	}
}

func deletingClaim(deleted time.Time, conds ...metav1.Condition) *karpv1.NodeClaim {
	d := metav1.NewTime(deleted)
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abc", DeletionTimestamp: &d, Labels: map[string]string{
			karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: "spot", karpv1.LabelTopologyZone: "us-west-2a"}},
		Status: karpv1.NodeClaimStatus{Conditions: conds},
	}
}

func TestDrainReasonIsTheClaimsDisruptionReason(t *testing.T) {
	decided := deletingClaim(epoch, metav1.Condition{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: "Underutilized"})
	require.Equal(t, "Underutilized", drainReason(decided))
	require.Equal(t, "Forceful Termination", drainReason(deletingClaim(epoch)), "deleted by hand: no decision's reason")
	require.Equal(t, "Forceful Termination", drainReason(nil))
}

func TestKarpenterTerminationFamilies(t *testing.T) {
	m := newMetrics(prometheus.NewPedanticRegistry())
	k := m.karp

	k.evicted(nil, "Drifted")
	k.evicted(apierrors.NewTooManyRequests("budget", 10), "Drifted")
	k.evicted(errors.New("connection refused"), "Drifted")
	require.Equal(t, 1.0, testutil.ToFloat64(k.evictionRequests.WithLabelValues("200")))
	require.Equal(t, 1.0, testutil.ToFloat64(k.evictionRequests.WithLabelValues("429")))
	require.Equal(t, 2, testutil.CollectAndCount(k.evictionRequests), "an error without a status is no request answered")
	require.Equal(t, 1.0, testutil.ToFloat64(k.podsDrained.WithLabelValues("Drifted")), "only the granted eviction drains a pod")

	claim := deletingClaim(epoch)
	k.drained(claim)
	claim.Status.Conditions = append(claim.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeDrained, Status: metav1.ConditionTrue})
	k.drained(claim) // a redelivery after the drain finished
	require.Equal(t, 1.0, testutil.ToFloat64(k.nodesDrained.WithLabelValues("default")))

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(epoch.Add(-2 * time.Hour)),
		Labels: map[string]string{karpv1.NodePoolLabelKey: "default", corev1.LabelTopologyZone: "us-west-2a"}}}
	k.nodeDeleted(node, claim, epoch.Add(90*time.Second))
	k.claimDeleted(claim, epoch.Add(100*time.Second))
	require.Equal(t, 1.0, testutil.ToFloat64(k.nodesTerminated.WithLabelValues("default", "us-west-2a")))
	require.Equal(t, 1.0, testutil.ToFloat64(k.claimsTerminated.WithLabelValues("default", "spot", "us-west-2a")))
	require.Equal(t, 1, testutil.CollectAndCount(k.nodeTermination), "timed from the claim's deletion")
	require.Equal(t, 1, testutil.CollectAndCount(k.nodeLifetime))
	require.Equal(t, 1, testutil.CollectAndCount(k.claimTermination))

	k.instanceTerminated(claim, node, time.Second, apierrors.NewServiceUnavailable("throttled"))
	require.Equal(t, 1.0, testutil.ToFloat64(k.cpErrors.WithLabelValues("nodeclaim.lifecycle", "Delete", "aws", "")))
	require.Equal(t, 1.0, testutil.ToFloat64(k.terminationFailures.WithLabelValues("us-west-2a", "")))

	k.interrupted(claimRef{Pool: "default", CapacityType: "spot"}, "spot_interrupted")
	require.Equal(t, 1.0, testutil.ToFloat64(k.disrupted.WithLabelValues("spot_interrupted", "default", "spot")))
}
