package main

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	launches    *prometheus.CounterVec
	createFleet prometheus.Histogram
	fleetErrors *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	registered  *prometheus.CounterVec
	initialized *prometheus.CounterVec
	catalog     *prometheus.CounterVec
	drifted     *prometheus.GaugeVec
	fleet       *fleetMetrics // pool usage and limits, node allocatable, claim prices
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_nodeclaims_launched_total",
			Help: "Launch attempts by pool and outcome (launched, retry, failed)."}, []string{"nodepool", "outcome"}),
		createFleet: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fleetwright_launcher_create_fleet_seconds",
			Help: "CreateFleet call duration.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		fleetErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_launcher_create_fleet_errors_total",
			Help: "CreateFleet failures by error code."}, []string{"code"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_unavailable_offerings_total",
			Help: "Offerings marked unavailable after a capacity error."}, []string{"instance_type", "zone", "capacity_type"}),
		registered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_nodeclaims_registered_total",
			Help: "NodeClaims whose node registered, by pool."}, []string{"nodepool"}),
		initialized: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_nodeclaims_initialized_total",
			Help: "NodeClaims whose node became ready and initialized, by pool."}, []string{"nodepool"}),
		catalog: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetwright_launcher_catalog_refreshes_total",
			Help: "Catalog refreshes by outcome."}, []string{"outcome"}),
		drifted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetwright_nodeclaims_drifted",
			Help: "Launched NodeClaims that are drifted, by pool and drift reason (NodePoolDrifted, RequirementsDrifted, NodeClassDrift, AMIDrift, SecurityGroupDrift, SubnetDrift)."},
			[]string{"nodepool", "reason"}),
	}
	m.fleet = newFleetMetrics()
	reg.MustRegister(m.fleet)
	reg.MustRegister(m.launches, m.createFleet, m.fleetErrors, m.unavailable, m.registered, m.initialized, m.catalog, m.drifted)
	return m
}
