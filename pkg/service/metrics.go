package service

import "github.com/prometheus/client_golang/prometheus"

// Metrics makes Prometheus collectors registered on Reg as they are made, so a service names
// each of its metrics once: name, help and labels. A name registered twice panics, as with
// MustRegister.
type Metrics struct{ Reg prometheus.Registerer }

// Counter is a registered counter.
func (m Metrics) Counter(name, help string) prometheus.Counter {
	return register(m, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec is a registered counter by labels.
func (m Metrics) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(m, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge is a registered gauge.
func (m Metrics) Gauge(name, help string) prometheus.Gauge {
	return register(m, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// GaugeVec is a registered gauge by labels.
func (m Metrics) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Histogram is a registered histogram with buckets.
func (m Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(m, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// HistogramVec is a registered histogram with buckets, by labels.
func (m Metrics) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(m, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

func register[C prometheus.Collector](m Metrics, c C) C {
	m.Reg.MustRegister(c)
	return c
}
