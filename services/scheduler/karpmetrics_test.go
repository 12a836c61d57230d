package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/disruption"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
)

func TestKarpenterFamiliesRegisterBesideOurs(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := newMetrics(reg)
	m.claimCreated(createdForProvisioning, createdProvisioned, "default")
	m.claimCreated(createdForDisruption, karpmetrics.LowerReason(karpv1.DisruptionReasonDrifted), "default")
	_, err := reg.Gather()
	require.NoError(t, err)
	require.Equal(t, 1.0, testutil.ToFloat64(m.claims.WithLabelValues("provisioning", "default")), "ours keeps its reasons")
	require.Equal(t, 1.0, testutil.ToFloat64(m.karp.created.WithLabelValues("provisioned", "default", "false")), "Karpenter's says provisioned")
	require.Equal(t, 2, testutil.CollectAndCount(m.karp.timeouts), "single and multi served at 0 from the start, as Karpenter")
}

func TestKarpenterDisruptionLabels(t *testing.T) {
	for _, c := range []struct {
		d                          disruption.Decision
		decision, reason, consType string
	}{
		{disruption.Decision{Action: disruption.ActionDelete, Reason: karpv1.DisruptionReasonEmpty, Claims: []string{"a", "b"}}, "delete", "empty", "empty"},
		{disruption.Decision{Action: disruption.ActionReplace, Reason: karpv1.DisruptionReasonUnderutilized, Claims: []string{"a"}}, "replace", "underutilized", "single"},
		{disruption.Decision{Action: disruption.ActionDelete, Reason: karpv1.DisruptionReasonUnderutilized, Claims: []string{"a", "b"}}, "delete", "underutilized", "multi"},
		{disruption.Decision{Action: disruption.ActionReplace, Reason: karpv1.DisruptionReasonDrifted, Claims: []string{"a"}}, "replace", "drifted", ""},
	} {
		m := newMetrics(prometheus.NewPedanticRegistry())
		m.karp.decided(c.d, []string{"default", "gpu"})
		m.karp.abandoned(c.d)
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: "spot"}}}
		m.karp.claimDisrupted(c.d, nc)
		require.Equal(t, 1.0, testutil.ToFloat64(m.karp.decisions.WithLabelValues(c.decision, c.reason, c.consType)), "%+v", c.d)
		require.Equal(t, 2, testutil.CollectAndCount(m.karp.decisionsByPool), "one per pool the command takes nodes from")
		require.Equal(t, 1.0, testutil.ToFloat64(m.karp.queueFailures.WithLabelValues(c.decision, c.reason, c.consType)))
		require.Equal(t, 1.0, testutil.ToFloat64(m.karp.disrupted.WithLabelValues(c.reason, "default", "spot")))
	}
}
