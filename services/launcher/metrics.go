package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetwright/fleetwright/pkg/service"
)

type metrics struct {
	launches    *prometheus.CounterVec
	createFleet prometheus.Histogram
	fleetErrors *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	registered  *prometheus.CounterVec
	initialized *prometheus.CounterVec
	catalog     *prometheus.CounterVec
	unpriced    prometheus.Gauge
	priced      *prometheus.GaugeVec
	drifted     *prometheus.GaugeVec
	fleet       *fleetMetrics // pool usage and limits, node allocatable, claim prices
	karp        *karpenter    // Karpenter's families
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := service.Metrics{Reg: reg}
	m := &metrics{
		launches:    f.CounterVec("fleetwright_nodeclaims_launched_total", "Launch attempts by pool and outcome (launched, retry, failed).", "nodepool", "outcome"),
		createFleet: f.Histogram("fleetwright_launcher_create_fleet_seconds", "CreateFleet call duration.", prometheus.ExponentialBuckets(0.005, 2, 12)),
		fleetErrors: f.CounterVec("fleetwright_launcher_create_fleet_errors_total", "CreateFleet failures by error code.", "code"),
		unavailable: f.CounterVec("fleetwright_unavailable_offerings_total", "Offerings marked unavailable after a capacity error.", "instance_type", "zone", "capacity_type"),
		registered:  f.CounterVec("fleetwright_nodeclaims_registered_total", "NodeClaims whose node registered, by pool.", "nodepool"),
		initialized: f.CounterVec("fleetwright_nodeclaims_initialized_total", "NodeClaims whose node became ready and initialized, by pool.", "nodepool"),
		catalog:     f.CounterVec("fleetwright_launcher_catalog_refreshes_total", "Catalog refreshes by outcome.", "outcome"),
		unpriced: f.Gauge("fleetwright_launcher_catalog_types_unpriced",
			"Instance types EC2 offers that the last catalog refresh left out for want of an on-demand price (neither the Pricing API nor the embedded table has one)."),
		priced: f.GaugeVec("fleetwright_launcher_catalog_types_priced",
			"Instance types in the last published catalog by where their on-demand price came from (pricing-api, embedded).", "source"),
		drifted: f.GaugeVec("fleetwright_nodeclaims_drifted", "Launched NodeClaims that are drifted, by pool and drift reason "+
			"(NodePoolDrifted, RequirementsDrifted, NodeClassDrift, AMIDrift, SecurityGroupDrift, SubnetDrift).", "nodepool", "reason"),
	}
	m.karp = newKarpenter(reg)
	m.fleet = newFleetMetrics()
	reg.MustRegister(m.fleet)
	return m
}
