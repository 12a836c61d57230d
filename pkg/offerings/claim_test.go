package offerings

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// A claim made by hand launches as HandMade allows: the types its requirements and requests
// allow, from the published catalog, with the zones and capacity types (spot first) of their
// offerings; a claim that names its types, zones and capacity types is Options' instead.
func TestHandMade(t *testing.T) {
	var cat catalogv1.Catalog
	for _, name := range []string{"m5.large", "m5.xlarge", "c5.xlarge"} {
		ct, ok := catalog.Lookup(name)
		require.True(t, ok, name)
		cat.InstanceTypes = append(cat.InstanceTypes, &catalogv1.InstanceType{Name: name, Family: ct.Family, Generation: int32(ct.Generation),
			Category: ct.Category, Size: ct.Size, Vcpu: int32(ct.VCPU), MemoryMib: ct.MemoryMiB, Architecture: ct.Arch, MaxPods: int32(ct.MaxPods),
			Offerings: []*catalogv1.Offering{
				{Zone: "us-east-1b", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND, PriceUsdPerHour: ct.OnDemandPriceUSDPerHour, Available: true},
				{Zone: "us-east-1a", CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT, PriceUsdPerHour: ct.OnDemandPriceUSDPerHour / 3, Available: true},
			}})
	}
	types := Types(&cat)
	require.Len(t, types, 3)

	reqs := []scheduling.Requirement{{Key: scheduling.LabelInstanceCategory, Operator: scheduling.OpIn, Values: []string{"m"}}}
	opts, zones, capacityTypes, err := HandMade(reqs, scheduling.ResourceList{scheduling.ResourceCPU: 3000}, types, nil, nil, 0)
	require.NoError(t, err)
	require.Len(t, opts, 1, "m5.large has 2 CPUs, c5.xlarge is of category c")
	assert.Equal(t, "m5.xlarge", opts[0].GetName())
	assert.Equal(t, []string{"us-east-1a", "us-east-1b"}, zones)
	assert.Equal(t, []string{scheduling.CapacityTypeSpot, scheduling.CapacityTypeOnDemand}, capacityTypes)
	assert.Equal(t, "us-east-1a", opts[0].GetOfferings()[0].GetZone(), "cheapest first")

	_, _, _, err = HandMade([]scheduling.Requirement{{Key: "x", Operator: scheduling.OpGt, Values: []string{"a"}}}, nil, types, nil, nil, 0)
	assert.Error(t, err, "a requirement that does not compile")

	assert.True(t, Named([]string{"m5.large"}, []string{"us-east-1a"}, []string{"spot"}))
	assert.False(t, Named(nil, []string{"us-east-1a"}, []string{"spot"}), "no instance types named: made by hand")
}
