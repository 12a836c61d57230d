package main

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/karpmetrics"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// karpenter are the Karpenter metric families the launcher serves (pkg/karpmetrics): its
// cloud provider calls (Karpenter's decorator of Create, as nodeclaim.lifecycle calls it), the
// offerings CreateFleet could not launch, the catalog it launches from, the nodes it
// registers, and its loops as controller-runtime counts them.
type karpenter struct {
	nodesCreated   *prometheus.CounterVec
	cpDuration     *prometheus.HistogramVec
	cpErrors       *prometheus.CounterVec
	launchFailures *prometheus.CounterVec
	disrupted      *prometheus.CounterVec // claims deleted for a launch that cannot succeed
	catalog        *karpmetrics.Catalog
	catalogVersion uint64 // of the catalog the gauges show: a pass rebuilds them only when it changed
	reconciles     *karpmetrics.Reconciles
}

func newKarpenter(reg prometheus.Registerer) *karpenter {
	f := karpmetrics.Families{Reg: reg}
	k := &karpenter{nodesCreated: f.NodesCreated(), cpDuration: f.CloudProviderDuration(), cpErrors: f.CloudProviderErrors(),
		launchFailures: f.InstanceLaunchFailures(), disrupted: f.NodeClaimsDisrupted(), catalog: karpmetrics.NewCatalog(), reconciles: f.Reconciles()}
	reg.MustRegister(k.catalog)
	k.reconciles.Init(karpmetrics.ControllerNodeClaimLifecycle, karpmetrics.ControllerNodeClaimStatus, karpmetrics.ControllerNodeClaimDisruption)
	return k
}

// cloudCall counts one cloud provider method as Karpenter's decorator does: its duration, and
// an error by Karpenter's error type ("" for one it does not name).
func (k *karpenter) cloudCall(method string, took time.Duration, err error) {
	k.cpDuration.WithLabelValues(karpmetrics.ControllerNodeClaimLifecycle, method, karpmetrics.Provider).Observe(took.Seconds())
	if err == nil {
		return
	}
	kind := ""
	switch {
	case IsInsufficientCapacity(err):
		kind = karpmetrics.ErrorInsufficientCapacity
	case errors.Is(err, errNodeClassInvalid):
		kind = karpmetrics.ErrorNodeClassNotReady
	}
	k.cpErrors.WithLabelValues(karpmetrics.ControllerNodeClaimLifecycle, method, karpmetrics.Provider, kind).Inc()
}

// launchFailed counts an offering CreateFleet had no capacity for, as the AWS provider's
// karpenter_cloudprovider_instance_launch_failures_total does.
func (k *karpenter) launchFailed(o Offering, zoneID string) {
	k.launchFailures.WithLabelValues(o.Zone, zoneID, o.CapacityType, "InsufficientInstanceCapacity").Inc()
}

// launchAbandoned counts a claim deleted because its launch failed for good, as Karpenter's
// nodeclaim.lifecycle counts the two failures it deletes a claim for in
// karpenter_nodeclaims_disrupted_total; it retries any other (so counts none).
func (k *karpenter) launchAbandoned(claim claimState, reason string) {
	var why string
	switch reason {
	case "InsufficientCapacity":
		why = "insufficient_capacity"
	case "NodeClassNotFound", "NodeClassInvalid":
		why = "nodeclass_not_ready"
	default:
		return
	}
	k.disrupted.WithLabelValues(why, claim.NodePool, claim.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}

// observeCatalog replaces the catalog's gauges (karpenter_cloudprovider_instance_type_*) if
// the catalog changed since: some thousand types by zone and capacity type, too many to rebuild
// on every status pass. Only the status pass calls it.
func (k *karpenter) observeCatalog(cat *catalogv1.Catalog, version uint64) {
	if version == k.catalogVersion {
		return
	}
	k.catalogVersion = version
	types := make([]karpmetrics.CatalogType, 0, len(cat.GetInstanceTypes()))
	for _, it := range cat.GetInstanceTypes() {
		t := karpmetrics.CatalogType{Name: it.GetName(), VCPU: it.GetVcpu(), MemoryMiB: it.GetMemoryMib()}
		for _, o := range it.GetOfferings() {
			t.Offerings = append(t.Offerings, karpmetrics.CatalogOffering{Zone: o.GetZone(),
				CapacityType: offerings.CapacityTypeName(o.GetCapacityType()), PriceUSDPerHour: o.GetPriceUsdPerHour(), Available: o.GetAvailable()})
		}
		types = append(types, t)
	}
	k.catalog.Observe(types)
}

// handleMeasured is handle as controller_runtime_reconcile_* counts it.
func (l *launcher) handleMeasured(ctx context.Context, intent *launchv1.LaunchIntent, d bus.Delivery) (err error) {
	defer func(start time.Time) {
		l.metrics.karp.reconciles.Observe(karpmetrics.ControllerNodeClaimLifecycle, start, err)
	}(time.Now())
	return l.handle(ctx, intent, d)
}
