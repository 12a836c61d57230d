package karpmetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestDecisionsCountAPodsFirstDecisionOnly(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d := NewDecisions(Families{Reg: reg}.PodsSchedulingDecisionDuration())
	d.Decided("a", t0, t0.Add(2*time.Second))
	d.Decided("a", t0, t0.Add(30*time.Second)) // a retried batch: not a first decision
	d.Decided("b", t0, t0.Add(time.Second))
	got := gather(t, reg)["karpenter_pods_scheduling_decision_duration_seconds"]
	require.Equal(t, "HISTOGRAM", got.Type)
	require.Equal(t, 2.0, got.Samples[0].Value)

	d.Forget(func(uid string) bool { return uid == "b" })
	d.Decided("a", t0, t0.Add(time.Minute)) // forgotten once gone (a UID is never reused)
	require.Equal(t, 3.0, gather(t, reg)["karpenter_pods_scheduling_decision_duration_seconds"].Samples[0].Value)
}
