package main

import (
	"sync"

	"github.com/fleetwright/fleetwright/pkg/catalogkv"
	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
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
	c.types = offerings.Types(cat)
	c.byName = make(map[string]*scheduling.InstanceType, len(c.types))
	for i := range c.types {
		c.byName[c.types[i].Name] = &c.types[i]
	}
	c.version = version
	return c.types, c.byName, nil
}
