package main

import (
	"sync"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
)

// instanceTypes turns the launcher's catalog (KV bucket) into the core's instance types,
// converting again only when the bucket changed.
type instanceTypes struct {
	watch *catalogkv.Watcher

	mu      sync.Mutex
	version uint64
	types   []scheduling.InstanceType
	byName  map[string]*scheduling.InstanceType
}

// current returns the instance types and an index by name; both are shared, read-only.
func (c *instanceTypes) current() ([]scheduling.InstanceType, map[string]*scheduling.InstanceType, error) {
	cat, version, err := c.watch.Catalog()
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.types != nil && version == c.version {
		return c.types, c.byName, nil
	}
	c.types = fromCatalog(cat)
	c.byName = make(map[string]*scheduling.InstanceType, len(c.types))
	for i := range c.types {
		c.byName[c.types[i].Name] = &c.types[i]
	}
	c.version = version
	return c.types, c.byName, nil
}

// fromCatalog converts each catalog type into the core's type: labels and capacity the way the
// core derives them from pkg/catalog, offerings and prices as the launcher published them.
func fromCatalog(cat *catalogv1.Catalog) []scheduling.InstanceType {
	src := make([]catalog.InstanceType, 0, len(cat.GetInstanceTypes()))
	offers := make(map[string][]scheduling.Offering, len(cat.GetInstanceTypes()))
	for _, it := range cat.GetInstanceTypes() {
		src = append(src, catalogkv.Facts(it))
		for _, o := range it.GetOfferings() {
			ct := offerings.CapacityTypeName(o.GetCapacityType())
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
