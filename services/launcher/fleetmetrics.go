package main

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
)

// fleetMetrics exports the fleet as the last status pass saw it: each NodePool's usage (the
// capacity of its launched claims, as status.resources) and limits, each registered claim's
// allocatable resources and each launched claim's hourly price. A series exists only while its
// pool or claim does: every scrape reads the last pass's snapshot, so a deleted claim's price
// is gone at the next pass, with no stale series left behind.
type fleetMetrics struct {
	usage, limit, allocatable, price *prometheus.Desc

	mu      sync.Mutex
	samples []prometheus.Metric
}

func newFleetMetrics() *fleetMetrics {
	return &fleetMetrics{
		usage: prometheus.NewDesc("fleetwright_nodepool_usage",
			"Resources the NodePool's launched NodeClaims provide (its status.resources; nodes counts them), by pool and resource type.",
			[]string{"nodepool", "resource_type"}, nil),
		limit: prometheus.NewDesc("fleetwright_nodepool_limit",
			"The NodePool's spec.limits, by pool and resource type; a resource without a limit has no series.",
			[]string{"nodepool", "resource_type"}, nil),
		allocatable: prometheus.NewDesc("fleetwright_node_allocatable",
			"Allocatable resources of each registered NodeClaim's node (the claim's status.allocatable), by resource type.",
			[]string{"node_name", "nodeclaim", "nodepool", "resource_type", "instance_type", "capacity_type", "zone"}, nil),
		price: prometheus.NewDesc("fleetwright_nodeclaim_price_usd_per_hour",
			"Hourly price of each launched NodeClaim's offering (instance type, zone, capacity type) in the current catalog.",
			[]string{"nodeclaim", "nodepool", "instance_type", "capacity_type", "zone"}, nil),
	}
}

func (m *fleetMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.usage
	ch <- m.limit
	ch <- m.allocatable
	ch <- m.price
}

func (m *fleetMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	samples := m.samples
	m.mu.Unlock()
	for _, s := range samples {
		ch <- s
	}
}

// priceOf returns the catalog price of an offering, false when the catalog has none.
type priceOf func(instanceType, zone, capacityType string) (float64, bool)

// catalogPrice looks offerings up in the launcher's catalog.
func catalogPrice(lookup func(string) (*catalogv1.InstanceType, bool)) priceOf {
	return func(instanceType, zone, capacityType string) (float64, bool) {
		it, ok := lookup(instanceType)
		if !ok {
			return 0, false
		}
		for _, o := range it.GetOfferings() {
			if o.GetZone() == zone && offerings.CapacityTypeName(o.GetCapacityType()) == capacityType && o.GetPriceUsdPerHour() > 0 {
				return o.GetPriceUsdPerHour(), true
			}
		}
		return 0, false
	}
}

// observe replaces the snapshot with the given pools (and their launched capacity, as
// launchedByPool sums it) and claims.
func (m *fleetMetrics) observe(pools []*karpv1.NodePool, launched map[string]corev1.ResourceList, claims []*karpv1.NodeClaim, price priceOf) {
	var out []prometheus.Metric
	for _, np := range pools {
		use := launched[np.Name]
		if use == nil {
			use = corev1.ResourceList{nodesResource: {}}
		}
		for _, name := range slices.Sorted(maps.Keys(use)) {
			q := use[name]
			out = append(out, prometheus.MustNewConstMetric(m.usage, prometheus.GaugeValue, q.AsApproximateFloat64(), np.Name, string(name)))
		}
		limits := corev1.ResourceList(np.Spec.Limits)
		for _, name := range slices.Sorted(maps.Keys(limits)) {
			q := limits[name]
			out = append(out, prometheus.MustNewConstMetric(m.limit, prometheus.GaugeValue, q.AsApproximateFloat64(), np.Name, string(name)))
		}
	}
	for _, nc := range claims {
		if nc.Status.ProviderID == "" {
			continue // not launched: no instance, no price
		}
		pool, it := nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.LabelInstanceType]
		ct, zone := nc.Labels[karpv1.CapacityTypeLabelKey], nc.Labels[karpv1.LabelTopologyZone]
		if p, ok := price(it, zone, ct); ok {
			out = append(out, prometheus.MustNewConstMetric(m.price, prometheus.GaugeValue, p, nc.Name, pool, it, ct, zone))
		}
		if nc.Status.NodeName == "" {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(nc.Status.Allocatable)) {
			q := nc.Status.Allocatable[name]
			out = append(out, prometheus.MustNewConstMetric(m.allocatable, prometheus.GaugeValue, q.AsApproximateFloat64(),
				nc.Status.NodeName, nc.Name, pool, string(name), it, ct, zone))
		}
	}
	m.mu.Lock()
	m.samples = out
	m.mu.Unlock()
}
