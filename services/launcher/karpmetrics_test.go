package main

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

func TestKarpenterCloudProviderErrors(t *testing.T) {
	k := newMetrics(prometheus.NewPedanticRegistry()).karp
	k.cloudCall("Create", time.Second, nil)
	k.cloudCall("Create", time.Second, fmt.Errorf("launching: %w", errNodeClassInvalid))
	k.cloudCall("Create", time.Second, errors.New("throttled"))
	errs := func(kind string) float64 {
		return testutil.ToFloat64(k.cpErrors.WithLabelValues("nodeclaim.lifecycle", "Create", "aws", kind))
	}
	require.Equal(t, 1.0, errs("NodeClassNotReadyError"))
	require.Equal(t, 1.0, errs(""), "an error Karpenter names no type for")
	require.Equal(t, 1, testutil.CollectAndCount(k.cpDuration), "one series: controller, method, provider")

	k.launchFailed(Offering{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}, "usw2-az1")
	require.Equal(t, 1.0, testutil.ToFloat64(k.launchFailures.WithLabelValues("us-west-2a", "usw2-az1", "spot", "InsufficientInstanceCapacity")))

	claim := claimState{NodePool: "default", Labels: map[string]string{"karpenter.sh/capacity-type": "spot"}}
	k.launchAbandoned(claim, "InsufficientCapacity")
	k.launchAbandoned(claim, "NodeClassInvalid")
	k.launchAbandoned(claim, "LaunchFailed") // Karpenter retries this one: no claim disrupted
	require.Equal(t, 1.0, testutil.ToFloat64(k.disrupted.WithLabelValues("insufficient_capacity", "default", "spot")))
	require.Equal(t, 1.0, testutil.ToFloat64(k.disrupted.WithLabelValues("nodeclass_not_ready", "default", "spot")))
	require.Equal(t, 2, testutil.CollectAndCount(k.disrupted))
}

func TestKarpenterCatalogRebuiltOnlyWhenItChanges(t *testing.T) {
	k := newMetrics(prometheus.NewPedanticRegistry()).karp
	offering := func(ct commonv1.CapacityType) *catalogv1.Offering {
		return &catalogv1.Offering{Zone: "us-west-2a", CapacityType: ct, PriceUsdPerHour: 0.1, Available: true}
	}
	cat := &catalogv1.Catalog{InstanceTypes: []*catalogv1.InstanceType{{Name: "m5.large", Vcpu: 2, MemoryMib: 8192,
		Offerings: []*catalogv1.Offering{offering(commonv1.CapacityType_CAPACITY_TYPE_SPOT), offering(commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND)}}}}
	k.observeCatalog(cat, 1)
	require.Equal(t, 6, testutil.CollectAndCount(k.catalog), "cpu, memory, and available and price per capacity type")

	k.observeCatalog(&catalogv1.Catalog{}, 1)
	require.Equal(t, 6, testutil.CollectAndCount(k.catalog), "the same version is not rebuilt")
	k.observeCatalog(&catalogv1.Catalog{}, 2)
	require.Zero(t, testutil.CollectAndCount(k.catalog), "a type the catalog dropped has no series left")
}
