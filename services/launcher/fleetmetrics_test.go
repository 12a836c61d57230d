package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// The pool gauges say what the pool's status and spec say, each launched claim has its
// catalog price and each registered one its node's allocatable; a claim that goes takes its
// series with it.
func TestFleetMetrics(t *testing.T) {
	m := newFleetMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	pool.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("100"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	claim := func(name, node string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			karpv1.NodePoolLabelKey: "general", karpv1.LabelInstanceType: "m5.large",
			karpv1.CapacityTypeLabelKey: "spot", karpv1.LabelTopologyZone: "us-east-1a"}}}
		nc.Status.ProviderID = "aws:///us-east-1a/i-" + name
		nc.Status.NodeName = node
		nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourcePods: resource.MustParse("29")}
		return nc
	}
	pending := claim("pending", "")
	pending.Status.ProviderID = ""
	catalog := map[string]*catalogv1.InstanceType{"m5.large": {Name: "m5.large", Offerings: []*catalogv1.Offering{
		{Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, PriceUsdPerHour: 0.096},
		{Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, PriceUsdPerHour: 0.035},
	}}}
	price := catalogPrice(func(n string) (*catalogv1.InstanceType, bool) { it, ok := catalog[n]; return it, ok })
	launched := map[string]corev1.ResourceList{"general": {corev1.ResourceCPU: resource.MustParse("4"), nodesResource: resource.MustParse("2")}}

	m.observe([]*karpv1.NodePool{pool}, launched, []*karpv1.NodeClaim{claim("a", "ip-10-0-0-1"), claim("b", ""), pending}, price)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fleetwright_node_allocatable Allocatable resources of each registered NodeClaim's node (the claim's status.allocatable), by resource type.
# TYPE fleetwright_node_allocatable gauge
fleetwright_node_allocatable{capacity_type="spot",instance_type="m5.large",node_name="ip-10-0-0-1",nodeclaim="a",nodepool="general",resource_type="cpu",zone="us-east-1a"} 1.93
fleetwright_node_allocatable{capacity_type="spot",instance_type="m5.large",node_name="ip-10-0-0-1",nodeclaim="a",nodepool="general",resource_type="pods",zone="us-east-1a"} 29
# HELP fleetwright_nodeclaim_price_usd_per_hour Hourly price of each launched NodeClaim's offering (instance type, zone, capacity type) in the current catalog.
# TYPE fleetwright_nodeclaim_price_usd_per_hour gauge
fleetwright_nodeclaim_price_usd_per_hour{capacity_type="spot",instance_type="m5.large",nodeclaim="a",nodepool="general",zone="us-east-1a"} 0.035
fleetwright_nodeclaim_price_usd_per_hour{capacity_type="spot",instance_type="m5.large",nodeclaim="b",nodepool="general",zone="us-east-1a"} 0.035
# HELP fleetwright_nodepool_limit The NodePool's spec.limits, by pool and resource type; a resource without a limit has no series.
# TYPE fleetwright_nodepool_limit gauge
fleetwright_nodepool_limit{nodepool="general",resource_type="cpu"} 100
fleetwright_nodepool_limit{nodepool="general",resource_type="memory"} 1.073741824e+09
# HELP fleetwright_nodepool_usage Resources the NodePool's launched NodeClaims provide (its status.resources; nodes counts them), by pool and resource type.
# TYPE fleetwright_nodepool_usage gauge
fleetwright_nodepool_usage{nodepool="general",resource_type="cpu"} 4
fleetwright_nodepool_usage{nodepool="general",resource_type="nodes"} 2
`)))

	// Claim a is gone: its price and allocatable series are too.
	m.observe([]*karpv1.NodePool{pool}, launched, []*karpv1.NodeClaim{claim("b", "")}, price)
	require.Equal(t, 1, testutil.CollectAndCount(m, "fleetwright_nodeclaim_price_usd_per_hour"))
	require.Equal(t, 0, testutil.CollectAndCount(m, "fleetwright_node_allocatable"))
}
