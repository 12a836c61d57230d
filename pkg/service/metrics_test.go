package service

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsAreRegisteredAsMade makes one collector of each kind and reads them back from the
// registry: each is registered, with its help, labels and buckets; a name made twice panics.
func TestMetricsAreRegisteredAsMade(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := Metrics{Reg: reg}
	f.Counter("c_total", "a counter").Inc()
	f.CounterVec("cv_total", "a counter by outcome", "outcome").WithLabelValues("ok").Add(2)
	f.Gauge("g", "a gauge").Set(3)
	f.GaugeVec("gv", "a gauge by pool and reason", "nodepool", "reason").WithLabelValues("p", "r").Set(4)
	f.Histogram("h_seconds", "a histogram", []float64{1, 2}).Observe(1.5)
	f.HistogramVec("hv_seconds", "a histogram by reason", []float64{5}, "reason").WithLabelValues("x").Observe(6)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP c_total a counter
# TYPE c_total counter
c_total 1
# HELP cv_total a counter by outcome
# TYPE cv_total counter
cv_total{outcome="ok"} 2
# HELP g a gauge
# TYPE g gauge
g 3
# HELP gv a gauge by pool and reason
# TYPE gv gauge
gv{nodepool="p",reason="r"} 4
# HELP h_seconds a histogram
# TYPE h_seconds histogram
h_seconds_bucket{le="1"} 0
h_seconds_bucket{le="2"} 1
h_seconds_bucket{le="+Inf"} 1
h_seconds_sum 1.5
h_seconds_count 1
# HELP hv_seconds a histogram by reason
# TYPE hv_seconds histogram
hv_seconds_bucket{reason="x",le="5"} 0
hv_seconds_bucket{reason="x",le="+Inf"} 1
hv_seconds_sum{reason="x"} 6
hv_seconds_count{reason="x"} 1
`)))
	assert.Panics(t, func() { f.Counter("c_total", "again") }, "a name is registered once")
}
