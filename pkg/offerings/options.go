package offerings

import (
	"slices"
	"sort"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// Options are what a NodeClaim may launch as: each of the named instance types (a claim's
// instance-type requirement) with its offerings in the allowed zones and capacity types (none
// given: any) that are available and not unavailable now, cheapest first, and the types ordered
// by their cheapest offering; a type with no such offering is left out. offered gives a type's
// offerings from the catalog; false for a type it does not have. The scheduler plans with it,
// the launcher launches with it, each from the catalog it reads.
func Options(names []string, offered func(name string) ([]scheduling.Offering, bool), zones, capacityTypes []string,
	unavailable map[scheduling.OfferingKey]bool) []*launchv1.InstanceTypeOption {
	allowed := func(list []string, v string) bool { return len(list) == 0 || slices.Contains(list, v) }
	var out []*launchv1.InstanceTypeOption
	for _, name := range names {
		offs, ok := offered(name)
		if !ok {
			continue
		}
		opt := &launchv1.InstanceTypeOption{Name: name}
		for _, o := range offs {
			if !o.Available || !allowed(zones, o.Zone) || !allowed(capacityTypes, o.CapacityType) ||
				unavailable[scheduling.OfferingKey{InstanceType: name, Zone: o.Zone, CapacityType: o.CapacityType}] {
				continue
			}
			opt.Offerings = append(opt.Offerings, &catalogv1.Offering{Zone: o.Zone, CapacityType: CapacityType(o.CapacityType),
				PriceUsdPerHour: o.PriceUSDPerHour, Available: true})
		}
		if len(opt.Offerings) == 0 {
			continue
		}
		sort.SliceStable(opt.Offerings, func(i, j int) bool { return opt.Offerings[i].PriceUsdPerHour < opt.Offerings[j].PriceUsdPerHour })
		out = append(out, opt)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Offerings[0].PriceUsdPerHour < out[j].Offerings[0].PriceUsdPerHour })
	return out
}

// CatalogOfferings reads a published instance type's offerings for Options.
func CatalogOfferings(it *catalogv1.InstanceType) []scheduling.Offering {
	out := make([]scheduling.Offering, 0, len(it.GetOfferings()))
	for _, o := range it.GetOfferings() {
		out = append(out, scheduling.Offering{Zone: o.GetZone(), CapacityType: CapacityTypeName(o.GetCapacityType()),
			PriceUSDPerHour: o.GetPriceUsdPerHour(), Available: o.GetAvailable()})
	}
	return out
}
