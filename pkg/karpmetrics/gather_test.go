package karpmetrics

import (
	"maps"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// family is one gathered metric family, as a scrape would show it.
type family struct {
	Type    string // COUNTER, GAUGE, HISTOGRAM, SUMMARY
	Help    string
	Samples []sample
	Buckets []float64 // a histogram's upper bounds, from its first sample
}

type sample struct {
	Labels map[string]string
	Value  float64 // a counter's or gauge's value; a histogram's or summary's count
}

// gather scrapes reg (a pedantic registry: it checks each collector's series against what it
// described) into families by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]family {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{Type: mf.GetType().String(), Help: mf.GetHelp()}
		for _, m := range mf.GetMetric() {
			s := sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.Value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.Value = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				s.Value = float64(m.GetHistogram().GetSampleCount())
				if f.Buckets == nil {
					for _, b := range m.GetHistogram().GetBucket() {
						f.Buckets = append(f.Buckets, b.GetUpperBound())
					}
				}
			case m.GetSummary() != nil:
				s.Value = float64(m.GetSummary().GetSampleCount())
			}
			f.Samples = append(f.Samples, s)
		}
		out[mf.GetName()] = f
	}
	return out
}

// labelNames are a family's label names (of its first sample), sorted.
func (f family) labelNames() []string {
	if len(f.Samples) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(f.Samples[0].Labels))
}

// find returns the family's one sample whose labels include want; it fails if none or several do.
func (f family) find(t *testing.T, want map[string]string) sample {
	t.Helper()
	var found []sample
	for _, s := range f.Samples {
		match := true
		for k, v := range want {
			if s.Labels[k] != v {
				match = false
				break
			}
		}
		if match {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "samples matching %v", want)
	return found[0]
}
