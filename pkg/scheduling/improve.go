package scheduling

import (
	"math"
	"sort"
)

// improve lowers the plan's cost without breaking a constraint. First-fit-decreasing lets a
// claim grow to the largest type, which locks it into whatever family is biggest, not
// cheapest. For claims whose pods carry no topology terms, are selected by none, and bind no
// host ports (so moving them changes no count any other pod relies on), improve solves the
// LP relaxation for their pods over the types they all allow, repacks them first-fit
// decreasing into bins of the LP's types, re-chooses each bin's cheapest fitting type, and
// keeps the repacking only if it is cheaper and within the pool's limits.
func (s *solver) improve() {
	type groupKey struct {
		pool  *pool
		reqID int32
		mask  uint64
	}
	groups := map[groupKey][]*target{}
	var order []groupKey
	for _, c := range s.claims {
		if c.deleted || !s.movable(c) {
			continue
		}
		k := groupKey{c.pool, c.reqID, c.mask}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	for _, k := range order {
		s.repack(groups[k])
	}
}

// movable reports whether every pod on the claim can move without touching topology.
func (s *solver) movable(c *target) bool {
	for _, ps := range c.pods {
		sh := ps.shape
		if sh.hasTopo || len(sh.selected) > 0 || len(sh.ports) > 0 {
			return false
		}
	}
	return true
}

// bin is a repacked claim in the making.
type bin struct {
	used vec
	cap  vec // allocatable less DaemonSet overhead of the type the bin was opened as
	pods []*podState
}

func (s *solver) repack(claims []*target) {
	p := claims[0].pool
	w := claimWork{reqID: claims[0].reqID, mask: claims[0].mask}
	var pods []*podState
	oldCost := 0.0
	allowed := p.typeBits.clone()
	for _, c := range claims {
		oldCost += s.claimPrice(c, s.rankedOptions(c)[0])
		pods = append(pods, c.pods...)
		for _, ps := range c.pods {
			allowed.and(allowed, ps.shape.typeBits)
		}
	}
	allowed.each(func(i int) {
		if s.types[i].offerMask&w.mask == 0 {
			allowed[i>>6] &^= 1 << (uint(i) & 63)
		}
	})
	sort.SliceStable(pods, func(a, b int) bool { return podLess(pods[a], pods[b]) })
	var best []*target
	bestCost := oldCost
	for _, balanced := range []bool{true, false} {
		built, cost := s.buildBins(p, w, allowed, s.lpPack(p, w, allowed, pods, balanced))
		if built != nil && cost < bestCost-1e-9 {
			best, bestCost = built, cost
		}
	}
	if best == nil {
		return
	}
	s.replaceClaims(p, claims, best)
}

// buildBins turns bins into claims with their fitting options; nil if any bin cannot be built.
func (s *solver) buildBins(p *pool, w claimWork, allowed bitset, bins []*bin) ([]*target, float64) {
	if bins == nil {
		return nil, 0
	}
	newCost := 0.0
	built := make([]*target, 0, len(bins))
	for _, b := range bins {
		c := &target{pool: p, reqID: w.reqID, mask: w.mask, used: b.used, options: allowed}
		opts := allowed.clone()
		var offered uint64
		left := 0
		committed := make(vec, len(s.ix.names))
		opts.each(func(i int) {
			t := &s.types[i]
			if !fits(b.used, p.daemonOn(i).req, p.alloc[i]) {
				opts[i>>6] &^= 1 << (uint(i) & 63)
				return
			}
			left++
			offered |= t.offerMask
			for d := range committed {
				committed[d] = max(committed[d], p.capacity[i][d])
			}
		})
		if left == 0 || !s.minValuesHold(p, opts) {
			return nil, 0
		}
		c.options, c.mask, c.committed, c.pods = opts, w.mask&offered, committed, b.pods
		newCost += s.claimPrice(c, s.rankedOptions(c)[0])
		built = append(built, c)
	}
	return built, newCost
}

// replaceClaims swaps old claims for repacked ones if the pool's limits allow.
func (s *solver) replaceClaims(p *pool, claims, built []*target) {
	// Limits: the new claims' charge replaces the old ones'.
	if len(p.limited) > 0 {
		total := p.committed.clone()
		for _, c := range claims {
			total.sub(c.committed)
		}
		for _, c := range built {
			total.add(c.committed)
		}
		for _, d := range p.limited {
			if total[d] > p.limits[d] {
				return
			}
		}
	}
	for _, c := range claims {
		c.deleted = true
		p.committed.sub(c.committed)
	}
	for _, c := range built {
		c.id = len(s.targets)
		c.name = s.newID()
		p.committed.add(c.committed)
		s.claims = append(s.claims, c)
		s.targets = append(s.targets, c)
		for _, ps := range c.pods {
			ps.target = c
		}
		c.maxAlloc = nil
	}
}

// lpPack packs pods first-fit decreasing into bins opened as the LP relaxation's types, each
// new bin of the type whose LP share is least used so far. Pods too big for those types get a
// bin of the cheapest type that holds them.
//
// When balanced, the LP's bins (rounded up) are opened first and each pod goes to the bin it
// leaves least full in its fullest dimension, so bins end up with the mix the LP assumed.
func (s *solver) lpPack(p *pool, w claimWork, allowed bitset, pods []*podState, balanced bool) []*bin {
	dims := []int{slotCPU, slotMemory, slotPods}
	demand := make(vec, len(s.ix.names))
	for _, ps := range pods {
		demand.add(ps.req)
	}
	for d := slotPods + 1; d < len(demand); d++ {
		if demand[d] > 0 {
			dims = append(dims, d)
		}
	}
	var idx []int
	var cols [][]float64
	var cost []float64
	allowed.each(func(i int) {
		t := &s.types[i]
		price := math.Inf(1)
		for b, pr := range t.prices {
			if w.mask&(1<<uint(b)) != 0 {
				price = min(price, pr)
			}
		}
		col := make([]float64, len(dims))
		for k, d := range dims {
			col[k] = max(0, float64(p.alloc[i][d]-p.daemonOn(i).req[d]))
		}
		idx, cols, cost = append(idx, i), append(cols, col), append(cost, price)
	})
	if len(idx) == 0 {
		return nil
	}
	b := make([]float64, len(dims))
	for k, d := range dims {
		b[k] = float64(demand[d])
		for j := range cols {
			cols[j][k] /= max(b[k], 1)
		}
		b[k] = 1
		if demand[d] == 0 {
			b[k] = 0
		}
	}
	_, x, ok := minCover(cols, cost, b)
	if !ok {
		return nil
	}
	type share struct {
		ti     int
		want   float64
		opened float64
	}
	var shares []*share
	for j, v := range x {
		if v > 1e-9 {
			shares = append(shares, &share{ti: idx[j], want: v})
		}
	}
	capOf := func(ti int) vec {
		c := p.alloc[ti].clone()
		c.sub(p.daemonOn(ti).req)
		return c
	}
	var bins []*bin
	if balanced {
		for _, sh := range shares {
			for ; sh.opened < math.Ceil(sh.want-1e-9); sh.opened++ {
				bins = append(bins, &bin{used: make(vec, len(demand)), cap: capOf(sh.ti)})
			}
		}
	}
	for _, ps := range pods {
		var into *bin
		bestScore := math.Inf(1)
		for _, bn := range bins {
			if !fits(bn.used, ps.req, bn.cap) {
				continue
			}
			if !balanced {
				into = bn
				break
			}
			if sc := fullness(bn.used, ps.req, bn.cap); sc < bestScore {
				into, bestScore = bn, sc
			}
		}
		if into != nil {
			into.used.add(ps.req)
			into.pods = append(into.pods, ps)
			continue
		}
		var pick *share
		for _, sh := range shares {
			if fits(make(vec, len(demand)), ps.req, capOf(sh.ti)) && (pick == nil || sh.want-sh.opened > pick.want-pick.opened) {
				pick = sh
			}
		}
		var c vec
		if pick != nil {
			pick.opened++
			c = capOf(pick.ti)
		} else {
			found := false
			allowed.each(func(i int) {
				if !found && fits(make(vec, len(demand)), ps.req, capOf(i)) {
					c, found = capOf(i), true
				}
			})
			if !found {
				return nil
			}
		}
		bn := &bin{used: make(vec, len(demand)), cap: c}
		bn.used.add(ps.req)
		bn.pods = append(bn.pods, ps)
		bins = append(bins, bn)
	}
	kept := bins[:0]
	for _, bn := range bins {
		if len(bn.pods) > 0 {
			kept = append(kept, bn)
		}
	}
	return kept
}

// fullness is the largest share of any dimension the bin would use with req added.
func fullness(used, req, capacity vec) float64 {
	worst := 0.0
	for d, c := range capacity {
		if c > 0 {
			worst = max(worst, float64(used[d]+req[d])/float64(c))
		}
	}
	return worst
}
