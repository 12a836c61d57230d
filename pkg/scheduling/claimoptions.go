package scheduling

import (
	"fmt"
	"sort"
)

// ClaimOptions lists what a NodeClaim made by hand may launch as, as Karpenter launches one:
// the types whose labels meet its requirements and whose allocatable fits its requests, each
// with the available offerings its zone, zone-id and capacity-type requirements allow (others
// left out), cheapest first; the types ordered by their cheapest offering, at most max (0: 60).
// A claim the scheduler planned names its types; this is for the others.
func ClaimOptions(reqs []Requirement, requests ResourceList, types []InstanceType, zoneIDs map[string]string,
	unavailable []OfferingKey, max int) ([]InstanceType, error) {
	r, err := NewRequirements(reqs...)
	if err != nil {
		return nil, fmt.Errorf("compiling the claim's requirements: %w", err)
	}
	if max <= 0 {
		max = 60
	}
	avoid := make(map[OfferingKey]bool, len(unavailable))
	for _, k := range unavailable {
		avoid[k] = true
	}
	zones, zok := r.get(LabelZone)
	ids, idok := r.get(LabelZoneID)
	cts, cok := r.get(LabelCapacityType)
	var out []InstanceType
	for _, t := range types {
		if !typeMeets(r, t) || !fitsList(requests, t.Allocatable()) {
			continue
		}
		opt := t
		opt.Offerings = nil
		for _, o := range t.Offerings {
			id, known := zoneIDs[o.Zone]
			if !o.Available || avoid[OfferingKey{InstanceType: t.Name, Zone: o.Zone, CapacityType: o.CapacityType}] ||
				zok && !zones.has(o.Zone) || idok && !ids.matches(id, known) || cok && !cts.has(o.CapacityType) {
				continue
			}
			opt.Offerings = append(opt.Offerings, o)
		}
		if len(opt.Offerings) == 0 {
			continue
		}
		sort.SliceStable(opt.Offerings, func(i, j int) bool { return opt.Offerings[i].PriceUSDPerHour < opt.Offerings[j].PriceUSDPerHour })
		out = append(out, opt)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Offerings[0].PriceUSDPerHour < out[j].Offerings[0].PriceUSDPerHour })
	return out[:min(len(out), max)], nil
}

// typeMeets reports whether the type's labels meet the requirements on the keys a type decides.
func typeMeets(r Requirements, t InstanceType) bool {
	for _, ks := range r {
		if !isTypeLabel(ks.key) {
			continue
		}
		v, ok := t.Labels[ks.key]
		if !ks.set.matches(v, ok) {
			return false
		}
	}
	return true
}

// fitsList reports whether every request is within the allocatable.
func fitsList(requests, allocatable ResourceList) bool {
	for n, q := range requests {
		if q > allocatable[n] {
			return false
		}
	}
	return true
}
