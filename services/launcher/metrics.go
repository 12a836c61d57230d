package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"

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
	drifted     *prometheus.GaugeVec
	fleet       *fleetMetrics // pool usage and limits, node allocatable, claim prices
	karp        *karpenter    // Karpenter's families
}

// karpenter are the Karpenter metric families the launcher serves (pkg/karpmetrics): its
// cloud provider calls, the nodes it registers, and its loops as controller-runtime counts them.
type karpenter struct {
	nodesCreated *prometheus.CounterVec
	cpDuration   *prometheus.HistogramVec
	cpErrors     *prometheus.CounterVec
	reconciles   *karpmetrics.Reconciles
}

// cloudCall counts one cloud provider method as Karpenter's decorator does: its duration, and
// an error by Karpenter's error type ("" for one it does not name).
func (k *karpenter) cloudCall(method string, took time.Duration, err error) {
	k.cpDuration.WithLabelValues(karpmetrics.ControllerNodeClaimLifecycle, method, karpmetrics.Provider).Observe(took.Seconds())
	if err == nil {
		return
	}
	kind := ""
	if IsInsufficientCapacity(err) {
		kind = "InsufficientCapacityError"
	}
	k.cpErrors.WithLabelValues(karpmetrics.ControllerNodeClaimLifecycle, method, karpmetrics.Provider, kind).Inc()
}

// handleMeasured is handle as controller_runtime_reconcile_* counts it.
func (l *launcher) handleMeasured(ctx context.Context, intent *launchv1.LaunchIntent, d bus.Delivery) (err error) {
	defer func(start time.Time) {
		l.metrics.karp.reconciles.Observe(karpmetrics.ControllerNodeClaimLifecycle, start, err)
	}(time.Now())
	return l.handle(ctx, intent, d)
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
		drifted: f.GaugeVec("fleetwright_nodeclaims_drifted", "Launched NodeClaims that are drifted, by pool and drift reason "+
			"(NodePoolDrifted, RequirementsDrifted, NodeClassDrift, AMIDrift, SecurityGroupDrift, SubnetDrift).", "nodepool", "reason"),
	}
	k := karpmetrics.Families{Reg: reg}
	m.karp = &karpenter{nodesCreated: k.NodesCreated(), cpDuration: k.CloudProviderDuration(), cpErrors: k.CloudProviderErrors(),
		reconciles: k.Reconciles()}
	m.fleet = newFleetMetrics()
	reg.MustRegister(m.fleet)
	return m
}
