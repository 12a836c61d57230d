package karpmetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func startedAt(at time.Time) podOpt {
	return func(p *corev1.Pod) { s := metav1.NewTime(at); p.Status.StartTime = &s }
}

// observedStartups runs each snapshot through a tracker started at since and returns the
// startup summary's and bound histogram's counts and sums.
func observedStartups(t *testing.T, since time.Time, snapshots ...[]*corev1.Pod) (startups, bounds family, startupSum float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	f := Families{Reg: reg}
	startup := f.PodsStartupDuration()
	s := NewStartups(startup, f.PodsBoundDuration(), since)
	for _, pods := range snapshots {
		s.Observe(pods)
	}
	got := gather(t, reg)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "karpenter_pods_startup_duration_seconds" {
			startupSum = mf.GetMetric()[0].GetSummary().GetSampleSum()
		}
	}
	return got["karpenter_pods_startup_duration_seconds"], got["karpenter_pods_bound_duration_seconds"], startupSum
}

func TestStartupsCountsAPodSeenPendingOnceItIsReady(t *testing.T) {
	since := t0.Add(-time.Hour)
	pending := testPod("web-1")
	ready := testPod("web-1", on("n1", t0.Add(40*time.Second)), startedAt(t0.Add(-2*time.Hour))) // startTime says nothing here
	startups, bounds, sum := observedStartups(t, since, []*corev1.Pod{pending}, []*corev1.Pod{ready}, []*corev1.Pod{ready})
	require.Equal(t, 1.0, startups.Samples[0].Value, "counted once, however many snapshots see it Ready")
	require.Equal(t, 40.0, sum, "from creation to the Ready condition's transition, not to the snapshot")
	require.Equal(t, 1.0, bounds.Samples[0].Value)
}

func TestStartupsCountsAPodThatStartedBetweenSnapshots(t *testing.T) {
	since := t0.Add(-time.Minute)
	quick := testPod("web-1", on("n1", t0.Add(3*time.Second)), startedAt(t0.Add(2*time.Second)))
	startups, bounds, sum := observedStartups(t, since, []*corev1.Pod{quick})
	require.Equal(t, 1.0, startups.Samples[0].Value, "never seen pending, but it started after the tracker did")
	require.Equal(t, 3.0, sum)
	require.Equal(t, 1.0, bounds.Samples[0].Value)
}

func TestStartupsIgnoresPodsRunningBeforeItStarted(t *testing.T) {
	since := t0.Add(time.Hour)
	old := testPod("web-1", on("n1", t0.Add(3*time.Second)), startedAt(t0.Add(2*time.Second)))
	finished := testPod("job-1", on("n1", time.Time{}), phase(corev1.PodFailed))
	startups, bounds, _ := observedStartups(t, since, []*corev1.Pod{old, finished})
	require.Zero(t, startups.Samples[0].Value, "its start was before the tracker's: Karpenter would not have seen it pending")
	require.Zero(t, bounds.Samples[0].Value)
}
