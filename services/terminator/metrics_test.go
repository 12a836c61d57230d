package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// A drain that waits out a 10-minute terminationGracePeriod lands in a finite bucket, with
// margin, so the dashboard's drain quantiles can say it took ten minutes.
func TestDrainBucketsCoverTenMinuteGracePeriods(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.drain.WithLabelValues("Underutilized").Observe(660)
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "fleetwright_terminator_drain_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		buckets := h.GetBucket()
		top := buckets[len(buckets)-1]
		require.GreaterOrEqual(t, top.GetUpperBound(), 900.0, "the largest bucket covers 10 minutes and a half again")
		require.Equal(t, uint64(1), top.GetCumulativeCount(), "an 11-minute drain is in a finite bucket, not only +Inf")
		return
	}
	t.Fatal("no fleetwright_terminator_drain_seconds")
}
