package clusterstate

import (
	"slices"
	"sync"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/podproj"
)

// nominationRecords keeps each cached NodeClaim's nomination records parsed, by the claim's
// resource version: the passes that read every claim's records every few seconds (the
// scheduler's nomination check, pod-watcher's judging of each pending pod) parse a claim's
// records once per change of the claim instead of once per read. Only the version the informer
// holds is kept (a claim deleted from it is dropped), so the memory follows the cache's.
type nominationRecords struct {
	mu      sync.Mutex
	byClaim map[string]parsedRecords // by claim name
	sweepAt int                      // the size of byClaim at which it is swept next
}

type parsedRecords struct {
	version string
	byUID   map[string]podproj.PodNomination
	sorted  []podproj.PodNomination // podproj.NominationsOn's order
}

// records returns the claim's parsed records, from memory when the claim has not changed.
func (c *Cache) records(nc *karpv1.NodeClaim) parsedRecords {
	c.noms.mu.Lock()
	p, ok := c.noms.byClaim[nc.Name]
	c.noms.mu.Unlock()
	if ok && p.version == nc.ResourceVersion && nc.ResourceVersion != "" {
		return p
	}
	p = parsedRecords{version: nc.ResourceVersion, sorted: podproj.NominationsOn(nc)}
	p.byUID = make(map[string]podproj.PodNomination, len(p.sorted))
	for _, n := range p.sorted {
		p.byUID[n.UID] = n
	}
	if nc.ResourceVersion == "" || !c.holds(nc) {
		return p // not the informer's object (a deleted claim's last state, a test's): not kept
	}
	c.noms.mu.Lock()
	defer c.noms.mu.Unlock()
	if c.noms.byClaim == nil {
		c.noms.byClaim = map[string]parsedRecords{}
	}
	c.noms.byClaim[nc.Name] = p
	if len(c.noms.byClaim) > c.noms.sweepAt {
		// Claims deleted between a read and its keeping: drop what the informer no longer holds,
		// whenever the memory has doubled since the last sweep.
		for name := range c.noms.byClaim {
			if _, ok := c.Claim(name); !ok {
				delete(c.noms.byClaim, name)
			}
		}
		c.noms.sweepAt = 2*len(c.noms.byClaim) + 64
	}
	return p
}

// holds reports whether the informer holds this version of the claim.
func (c *Cache) holds(nc *karpv1.NodeClaim) bool {
	if c.NodeClaims == nil {
		return false
	}
	cur, ok := c.Claim(nc.Name)
	return ok && cur.ResourceVersion == nc.ResourceVersion
}

// forgetRecords drops a deleted claim's parsed records.
func (c *Cache) forgetRecords(name string) {
	c.noms.mu.Lock()
	defer c.noms.mu.Unlock()
	delete(c.noms.byClaim, name)
}

// NominationsOn is podproj.NominationsOn, parsed once per version of the claim.
func (c *Cache) NominationsOn(nc *karpv1.NodeClaim) []podproj.PodNomination {
	return slices.Clone(c.records(nc).sorted)
}

// NominationOn is podproj.NominationOn, parsed once per version of the claim.
func (c *Cache) NominationOn(nc *karpv1.NodeClaim, uid string) (podproj.PodNomination, bool) {
	n, ok := c.records(nc).byUID[uid]
	return n, ok
}
