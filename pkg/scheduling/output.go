package scheduling

import (
	"math"
	"sort"
	"strconv"
)

// plan turns the solver's state into the Plan.
func (s *solver) plan() Plan {
	out := Plan{CreatedAt: s.clock(), Relaxations: s.relaxations}
	for _, p := range s.pools {
		switch {
		case p.typeBits.empty():
			out.PoolsWithoutTypes = append(out.PoolsWithoutTypes, PoolWithoutTypes{NodePool: p.np.Name})
		case !s.minValuesHold(p, p.typeBits):
			out.PoolsWithoutTypes = append(out.PoolsWithoutTypes, PoolWithoutTypes{NodePool: p.np.Name, MinValues: true})
		}
	}
	sort.Slice(out.PoolsWithoutTypes, func(a, b int) bool { return out.PoolsWithoutTypes[a].NodePool < out.PoolsWithoutTypes[b].NodePool })
	for _, c := range s.claims {
		if c.deleted || len(c.pods) == 0 {
			continue
		}
		out.NodeClaims = append(out.NodeClaims, s.nodeClaim(c))
	}
	for _, ps := range s.pods {
		switch {
		case ps.target != nil && ps.target.node != nil:
			out.Placements = append(out.Placements, Placement{PodUID: ps.pod.UID, Node: ps.target.name})
		case ps.target == nil:
			out.Unschedulable = append(out.Unschedulable, Unschedulable{PodUID: ps.pod.UID, Reason: s.unplaced[ps]})
		}
	}
	return out
}

// claimPrice is the cheapest offering of type i the claim allows.
func (s *solver) claimPrice(c *target, i int) float64 {
	t := &s.types[i]
	best := math.Inf(1)
	m := c.mask & t.offerMask
	for b := 0; m != 0; b++ {
		if m&1 != 0 {
			best = min(best, t.prices[b])
		}
		m >>= 1
	}
	return best
}

// rankedOptions lists a claim's types cheapest first, cut to MaxInstanceTypes while keeping
// the pool's minValues satisfied.
func (s *solver) rankedOptions(c *target) []int {
	limit := s.in.MaxInstanceTypes
	if limit <= 0 {
		limit = 60
	}
	return s.rankedOptionsN(c, limit)
}

// rankedOptionsN is rankedOptions cut to limit.
func (s *solver) rankedOptionsN(c *target, limit int) []int {
	var opts []int
	c.options.each(func(i int) { opts = append(opts, i) })
	prices := make(map[int]float64, len(opts))
	for _, i := range opts {
		prices[i] = s.claimPrice(c, i)
	}
	sort.SliceStable(opts, func(a, b int) bool {
		if prices[opts[a]] != prices[opts[b]] {
			return prices[opts[a]] < prices[opts[b]]
		}
		return s.types[opts[a]].t.Name < s.types[opts[b]].t.Name
	})
	if len(opts) <= limit {
		return opts
	}
	chosen := map[int]bool{}
	for _, ks := range c.pool.minValues {
		seen := map[string]bool{}
		for _, i := range opts {
			if v, ok := s.types[i].t.Labels[ks.key]; ok && !seen[v] && len(seen) < ks.minValues {
				seen[v] = true
				chosen[i] = true
			}
		}
	}
	for _, i := range opts {
		if len(chosen) >= limit {
			break
		}
		chosen[i] = true
	}
	kept := opts[:0]
	for _, i := range opts {
		if chosen[i] {
			kept = append(kept, i)
		}
	}
	return kept
}

func (s *solver) nodeClaim(c *target) NodeClaim { return s.nodeClaimOf(c, s.rankedOptions(c)) }

// nodeClaimOf renders a claim with the given options (solver type indexes, cheapest first).
func (s *solver) nodeClaimOf(c *target, opts []int) NodeClaim {
	nc := NodeClaim{Name: c.name, NodePool: c.pool.np.Name, Taints: c.pool.np.Taints,
		StartupTaints: c.pool.np.StartupTaints, Labels: map[string]string{}}
	for _, ps := range c.pods {
		nc.PodUIDs = append(nc.PodUIDs, ps.pod.UID)
	}
	for _, i := range opts {
		nc.InstanceTypes = append(nc.InstanceTypes, s.types[i].t.Name)
	}
	if len(opts) > 0 {
		nc.PriceUSDPerHour = s.claimPrice(c, opts[0])
	}
	for zi, z := range s.zones {
		if c.mask&(3<<uint(zi*2)) != 0 {
			nc.Zones = append(nc.Zones, z)
		}
	}
	for ci, ct := range capacityTypes {
		for zi := range s.zones {
			if c.mask&(1<<uint(zi*2+ci)) != 0 {
				nc.CapacityTypes = append(nc.CapacityTypes, ct)
				break
			}
		}
	}
	reqs := s.reqs.list[c.reqID]
	for _, ks := range reqs {
		nc.Requirements = append(nc.Requirements, ks.requirements()...)
		if vs, fin := ks.set.finite(); fin && len(vs) == 1 && !ks.set.absent {
			nc.Labels[ks.key] = vs[0]
		}
	}
	if ids := s.zoneIDs(nc.Zones); ids != nil {
		nc.Requirements = append(nc.Requirements, Requirement{Key: LabelZoneID, Operator: OpIn, Values: ids})
	}
	nc.Requirements = append(nc.Requirements,
		Requirement{Key: LabelZone, Operator: OpIn, Values: nc.Zones},
		Requirement{Key: LabelCapacityType, Operator: OpIn, Values: nc.CapacityTypes},
		Requirement{Key: LabelInstanceType, Operator: OpIn, Values: nc.InstanceTypes})
	for k, v := range c.pool.np.Labels {
		nc.Labels[k] = v
	}
	nc.Labels[LabelNodePool] = c.pool.np.Name
	used := c.used.clone()
	daemon := make(vec, len(s.ix.names))
	for _, i := range opts {
		for d, q := range c.pool.daemonOn(i).req {
			daemon[d] = max(daemon[d], q)
		}
	}
	used.add(daemon)
	nc.Requests = s.ix.list(used)
	nc.Overhead = s.ix.list(daemon)
	return nc
}

// requirements renders a compiled set back as node selector requirements.
func (ks keyedSet) requirements() []Requirement {
	s := ks.set
	r := func(op Operator, vals ...string) Requirement {
		return Requirement{Key: ks.key, Operator: op, Values: vals, MinValues: ks.minValues}
	}
	if !s.complement {
		switch {
		case len(s.values) == 0 && s.absent:
			return []Requirement{r(OpDoesNotExist)}
		default:
			return []Requirement{r(OpIn, s.values...)}
		}
	}
	var out []Requirement
	switch {
	case s.absent:
		out = append(out, r(OpNotIn, s.values...))
	case len(s.values) > 0:
		out = append(out, r(OpExists), r(OpNotIn, s.values...))
	case !s.bounded():
		out = append(out, r(OpExists))
	}
	if s.hasGt {
		out = append(out, r(OpGt, strconv.FormatInt(s.gt, 10)))
	}
	if s.hasLt {
		out = append(out, r(OpLt, strconv.FormatInt(s.lt, 10)))
	}
	return out
}
