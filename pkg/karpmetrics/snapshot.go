package karpmetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// snapshot is a collector of gauges computed whole in one pass (Karpenter's metrics.Store
// ReplaceAll): each pass replaces every series, so what is gone from the cluster has no series
// left behind, and a scrape never sees half a pass.
type snapshot struct {
	descs   []*prometheus.Desc
	mu      sync.Mutex
	samples []prometheus.Metric
}

func (s *snapshot) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

func (s *snapshot) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	samples := s.samples
	s.mu.Unlock()
	for _, m := range samples {
		ch <- m
	}
}

// replace swaps the series for a pass's.
func (s *snapshot) replace(samples []prometheus.Metric) {
	s.mu.Lock()
	s.samples = samples
	s.mu.Unlock()
}

// Clear drops every series (a replica that stops leading serves none, so sum() across
// replicas counts each object once).
func (s *snapshot) Clear() { s.replace(nil) }

// gauges collects one pass's samples.
type gauges []prometheus.Metric

func (g *gauges) set(d *prometheus.Desc, v float64, labels ...string) {
	*g = append(*g, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
}
