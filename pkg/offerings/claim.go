package offerings

import (
	"maps"
	"slices"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// Named reports whether a claim's requirements name (In) its instance types, zones and capacity
// types, as those of every claim the scheduler plans do: such a claim launches as Options allow.
// A claim made by hand need name none of them; it launches as HandMade allows.
func Named(instanceTypes, zones, capacityTypes []string) bool {
	return instanceTypes != nil && zones != nil && capacityTypes != nil
}

// HandMade is what a NodeClaim made by hand, which does not name its types, zones and capacity
// types, may launch as, as Karpenter launches a NodeClaim of no NodePool: every type its
// requirements and requests allow, with the offerings they allow (scheduling.ClaimOptions), in
// Options' form; and the zones and capacity types (spot first) of those offerings. The
// scheduler puts them in the claim's intent, the launcher launches with them: both from the
// catalog (Types). An error is a requirement that does not compile.
func HandMade(reqs []scheduling.Requirement, requests scheduling.ResourceList, types []scheduling.InstanceType,
	zoneIDs map[string]string, unavailable []scheduling.OfferingKey, max int) (opts []*launchv1.InstanceTypeOption, zones, capacityTypes []string, err error) {
	allowed, err := scheduling.ClaimOptions(reqs, requests, types, zoneIDs, unavailable, max)
	if err != nil {
		return nil, nil, nil, err
	}
	inZone, ofType := map[string]bool{}, map[string]bool{}
	for _, t := range allowed {
		opt := &launchv1.InstanceTypeOption{Name: t.Name}
		for _, o := range t.Offerings {
			opt.Offerings = append(opt.Offerings, &catalogv1.Offering{Zone: o.Zone, CapacityType: CapacityType(o.CapacityType),
				PriceUsdPerHour: o.PriceUSDPerHour, Available: true})
			inZone[o.Zone], ofType[o.CapacityType] = true, true
		}
		opts = append(opts, opt)
	}
	for _, ct := range []string{scheduling.CapacityTypeSpot, scheduling.CapacityTypeOnDemand} {
		if ofType[ct] {
			capacityTypes = append(capacityTypes, ct)
		}
	}
	return opts, slices.Sorted(maps.Keys(inZone)), capacityTypes, nil
}

// Types reads a published catalog as the core's instance types: labels and capacity as the
// core derives them from pkg/catalog (scheduling.FromCatalog), offerings and prices as the
// launcher published them.
func Types(cat *catalogv1.Catalog) []scheduling.InstanceType {
	src := make([]catalog.InstanceType, 0, len(cat.GetInstanceTypes()))
	offers := make(map[string][]scheduling.Offering, len(cat.GetInstanceTypes()))
	for _, it := range cat.GetInstanceTypes() {
		src = append(src, catalogkv.Facts(it))
		for _, o := range it.GetOfferings() {
			ct := CapacityTypeName(o.GetCapacityType())
			if ct == "" {
				continue
			}
			offers[it.GetName()] = append(offers[it.GetName()], scheduling.Offering{
				Zone: o.GetZone(), CapacityType: ct, PriceUSDPerHour: o.GetPriceUsdPerHour(), Available: o.GetAvailable(),
			})
		}
	}
	out := scheduling.FromCatalog(src, nil)
	for i := range out {
		out[i].Offerings = offers[out[i].Name]
	}
	return out
}
