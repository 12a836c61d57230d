package main

import (
	"fmt"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/bus"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// options are what the claim may launch as, from the published catalog, cheapest first, and
// the zones and capacity types it may launch in (none: any). A claim the scheduler planned names
// them all: its types with the offerings its zone and capacity-type requirements allow
// (offerings.Options). A claim made by hand may name none: it launches, as Karpenter launches
// one, as any type its requirements and requests allow, in the zones of the class's subnets
// (offerings.HandMade, as the scheduler's intent for it lists them). What is unavailable now is
// left out per try, by the fleet request.
func (l *launcher) options(claim claimState, subnets []subnet) (opts []*launchv1.InstanceTypeOption, zones, capacityTypes []string, err error) {
	names := claim.values(karpv1.LabelInstanceType)
	zones, capacityTypes = claim.values(karpv1.LabelTopologyZone), claim.values(karpv1.CapacityTypeLabelKey)
	if offerings.Named(names, zones, capacityTypes) {
		opts = offerings.Options(names, func(name string) ([]scheduling.Offering, bool) {
			it, ok := l.types.Lookup(name)
			if !ok {
				return nil, false
			}
			return offerings.CatalogOfferings(it), true
		}, zones, capacityTypes, nil)
		return opts, zones, capacityTypes, nil
	}
	cat, _, err := l.types.Catalog()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the instance catalog: %w", err)
	}
	zoneIDs := make(map[string]string, len(subnets))
	for _, s := range subnets {
		zoneIDs[s.Zone] = s.ZoneID
	}
	opts, zones, capacityTypes, err = offerings.HandMade(coreRequirements(claim.Requirements), podproj.CoreResources(claim.Requests),
		offerings.Types(cat), zoneIDs, nil, 0)
	if err != nil {
		return nil, nil, nil, bus.Permanent(fmt.Errorf("nodeclaim %s: %w", claim.Name, err))
	}
	return opts, zones, capacityTypes, nil
}

// coreRequirements are a claim's requirements as the scheduling core reads them.
func coreRequirements(rs []karpv1.NodeSelectorRequirementWithMinValues) []scheduling.Requirement {
	out := make([]scheduling.Requirement, 0, len(rs))
	for _, r := range rs {
		req := scheduling.Requirement{Key: r.Key, Operator: scheduling.Operator(r.Operator), Values: r.Values}
		if r.MinValues != nil {
			req.MinValues = *r.MinValues
		}
		out = append(out, req)
	}
	return out
}
