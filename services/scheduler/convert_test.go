package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// These tests cover the pure conversions around the core; the service tests run the rest
// against a real control plane and NATS.

func TestLaunchMessage(t *testing.T) {
	many := []string{"c6a.2xlarge", "m6a.2xlarge", "c6i.2xlarge", "m6i.2xlarge", "c7a.2xlarge", "r6a.2xlarge", "r6i.2xlarge"}
	tests := []struct {
		name     string
		pods     int
		requests scheduling.ResourceList
		types    []string
		want     string
	}{
		{"Karpenter's line, quantities in Kubernetes notation", 5,
			scheduling.ResourceList{"cpu": 5125, "pods": 7, "memory": 512 * scheduling.MiB}, many,
			`launching nodeclaim with 5 pods requesting {"cpu":"5125m","memory":"512Mi","pods":"7"} from types c6a.2xlarge, m6a.2xlarge, c6i.2xlarge, m6i.2xlarge, c7a.2xlarge ... and 2 other(s)`},
		{"few types are all named", 1, scheduling.ResourceList{"cpu": 1000, "pods": 1}, []string{"t4g.medium", "t4g.large"},
			`launching nodeclaim with 1 pods requesting {"cpu":"1","pods":"1"} from types t4g.medium, t4g.large`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, launchMessage(tt.pods, tt.requests, tt.types))
		})
	}
}

func TestInstanceTypeOptions(t *testing.T) {
	offer := func(zone, ct string, price float64) scheduling.Offering {
		return scheduling.Offering{Zone: zone, CapacityType: ct, PriceUSDPerHour: price, Available: true}
	}
	types := map[string]*scheduling.InstanceType{
		"small": {Name: "small", Offerings: []scheduling.Offering{offer("z1", "on-demand", 0.10), offer("z1", "spot", 0.04), offer("z2", "spot", 0.01)}},
		"large": {Name: "large", Offerings: []scheduling.Offering{offer("z1", "on-demand", 0.20), offer("z1", "spot", 0.03)}},
		"gone":  {Name: "gone", Offerings: []scheduling.Offering{offer("z2", "on-demand", 0.01)}},
	}
	unavailable := []scheduling.OfferingKey{{InstanceType: "small", Zone: "z1", CapacityType: "spot"}}
	got := instanceTypeOptions([]string{"small", "large", "gone", "unknown"}, types, []string{"z1"},
		[]string{"spot", "on-demand"}, unavailable)
	require.Len(t, got, 2, "a type with no allowed offering, or not in the catalog, is left out")
	assert.Equal(t, "large", got[0].GetName(), "ordered by cheapest allowed offering")
	assert.Equal(t, []float64{0.03, 0.20}, prices(got[0]))
	assert.Equal(t, "small", got[1].GetName())
	assert.Equal(t, []float64{0.10}, prices(got[1]), "the unavailable spot offering and the other zone are dropped")
}

func prices(o *launchv1.InstanceTypeOption) []float64 {
	var out []float64
	for _, off := range o.GetOfferings() {
		out = append(out, off.GetPriceUsdPerHour())
	}
	return out
}

func TestClaimRequirements(t *testing.T) {
	c := scheduling.NodeClaim{
		Requirements: []scheduling.Requirement{
			{Key: scheduling.LabelNodePool, Operator: scheduling.OpIn, Values: []string{"default"}},
			{Key: scheduling.LabelZone, Operator: scheduling.OpIn, Values: []string{"z1", "z2"}},
			{Key: scheduling.LabelArch, Operator: scheduling.OpIn, Values: []string{"arm64"}},
			{Key: scheduling.LabelInstanceGeneration, Operator: scheduling.OpGt, Values: []string{"2"}},
		},
		InstanceTypes: []string{"b", "a"}, Zones: []string{"z2"}, CapacityTypes: []string{"spot"},
	}
	assert.Equal(t, []scheduling.Requirement{
		{Key: scheduling.LabelInstanceGeneration, Operator: scheduling.OpGt, Values: []string{"2"}},
		{Key: scheduling.LabelArch, Operator: scheduling.OpIn, Values: []string{"arm64"}},
		{Key: scheduling.LabelInstanceType, Operator: scheduling.OpIn, Values: []string{"b", "a"}},
		{Key: scheduling.LabelZone, Operator: scheduling.OpIn, Values: []string{"z2"}},
		{Key: scheduling.LabelCapacityType, Operator: scheduling.OpIn, Values: []string{"spot"}},
	}, claimRequirements(c), "pool key dropped, final zone/capacity type/types once, in that order")
}

func TestOptionBounds(t *testing.T) {
	types := map[string]*scheduling.InstanceType{
		"a": {Name: "a", Capacity: scheduling.ResourceList{"cpu": 2000, "memory": 4 * scheduling.GiB, "pods": 10}},
		"b": {Name: "b", Capacity: scheduling.ResourceList{"cpu": 4000, "memory": 2 * scheduling.GiB, "pods": 20}},
	}
	alloc, capacity := optionBounds([]string{"a", "b", "unknown"}, types, nil)
	assert.Equal(t, scheduling.ResourceList{"cpu": 4000, "memory": 4 * scheduling.GiB, "pods": 20}, capacity, "largest capacity")
	assert.Equal(t, types["a"].Allocatable()["cpu"], alloc["cpu"], "smallest allocatable cpu")
	assert.Equal(t, types["b"].Allocatable()["memory"], alloc["memory"], "smallest allocatable memory")
}

// A pod that binds while the cluster is read is counted at most once: the nodes (with their
// pods) are read before the pending pods, as Karpenter does. Read the other way round, the pod
// would be pending and on its node both, and capacity would be planned for it again.
func TestGatherReadsNodesBeforePendingPods(t *testing.T) {
	bound := false // the pod binds to n1 right after whichever read comes first
	var order []string
	readNodes := func() map[string][]string {
		order = append(order, "nodes")
		defer func() { bound = true }()
		if bound {
			return map[string][]string{"n1": {"p"}}
		}
		return map[string][]string{"n1": nil}
	}
	readPending := func() []string {
		order = append(order, "pending")
		defer func() { bound = true }()
		if bound {
			return nil
		}
		return []string{"p"}
	}
	nodes, pending := gather(readNodes, readPending)
	assert.Equal(t, []string{"nodes", "pending"}, order)
	counted := len(nodes["n1"]) + len(pending)
	assert.LessOrEqual(t, counted, 1, "the pod is on its node or pending, never both: nodes %v, pending %v", nodes, pending)
}

// What a replica remembers of its own nominations and announcements is forgotten after
// recentMemoryTTL even when no claim is created (every write prunes, at most once a minute).
func TestRecentForgetsWithoutNewClaims(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	r := newRecent(func() time.Time { return now })
	r.addNomination("uid-1", nomination{namespace: "ns", name: "p1", claim: "c1", at: now})
	assert.True(t, r.announce("uid-1", "c1", now))
	assert.False(t, r.announce("uid-1", "c1", now), "told once")
	now = now.Add(recentMemoryTTL + 2*time.Minute)
	r.addNomination("uid-2", nomination{namespace: "ns", name: "p2", claim: "c2", at: now})
	_, remembered := r.nomination("uid-1")
	assert.False(t, remembered)
	assert.Empty(t, r.nominatedTo("c1"))
	assert.Len(t, r.announced, 0, "the old announcement is forgotten")
}
