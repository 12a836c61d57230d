package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

	families, err := reg.Gather()
	require.NoError(t, err)
	type seen struct {
		help, kind string
		labels     []string
		value      float64
		buckets    []float64
	}
	got := map[string]seen{}
	for _, mf := range families {
		m := mf.GetMetric()[0]
		s := seen{help: mf.GetHelp(), kind: mf.GetType().String()}
		for _, l := range m.GetLabel() {
			s.labels = append(s.labels, l.GetName()+"="+l.GetValue())
		}
		switch s.kind {
		case "COUNTER":
			s.value = m.GetCounter().GetValue()
		case "GAUGE":
			s.value = m.GetGauge().GetValue()
		case "HISTOGRAM":
			s.value = m.GetHistogram().GetSampleSum()
			for _, b := range m.GetHistogram().GetBucket() {
				s.buckets = append(s.buckets, b.GetUpperBound())
			}
		}
		got[mf.GetName()] = s
	}
	assert.Equal(t, map[string]seen{
		"c_total":    {help: "a counter", kind: "COUNTER", value: 1},
		"cv_total":   {help: "a counter by outcome", kind: "COUNTER", labels: []string{"outcome=ok"}, value: 2},
		"g":          {help: "a gauge", kind: "GAUGE", value: 3},
		"gv":         {help: "a gauge by pool and reason", kind: "GAUGE", labels: []string{"nodepool=p", "reason=r"}, value: 4},
		"h_seconds":  {help: "a histogram", kind: "HISTOGRAM", value: 1.5, buckets: []float64{1, 2}},
		"hv_seconds": {help: "a histogram by reason", kind: "HISTOGRAM", labels: []string{"reason=x"}, value: 6, buckets: []float64{5}},
	}, got)
	assert.Panics(t, func() { f.Counter("c_total", "again") }, "a name is registered once")
}
