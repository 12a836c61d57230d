package scheduling

import (
	"fmt"
	"math"
	"strings"
)

// explain says in words why a pod was left unplaced, one reason per pool, each naming the pool
// and the constraint that stopped it.
func (s *solver) explain(ps *podState) string {
	sh := ps.shape
	if sh.err != nil {
		return "invalid node requirements: " + sh.err.Error()
	}
	if len(s.pools) == 0 {
		return "no nodepool, and no existing node can take it"
	}
	reasons := make([]string, 0, len(s.pools))
	for _, p := range s.pools {
		reasons = append(reasons, s.explainPool(ps, p))
	}
	return strings.Join(reasons, "; ")
}

// explainPool runs the pool's filters in order and reports the first that rejects the pod.
func (s *solver) explainPool(ps *podState, p *pool) string {
	sh := ps.shape
	incompatible := func(why string) string {
		return fmt.Sprintf("incompatible with nodepool %s: %s", p.np.Name, why)
	}
	if tt, bad := untolerated(p.np.Taints, sh.tols, sh.tolPNS); bad {
		return incompatible("did not tolerate " + tt.String())
	}
	if err := p.reqs.Compatible(sh.reqs); err != nil {
		return incompatible("incompatible requirements, " + err.Error())
	}
	mask := sh.mask & p.mask
	if mask == 0 {
		return incompatible(fmt.Sprintf("no zone and capacity type both allow (pod: %s; nodepool: %s)",
			offeringReqs(sh.reqs), offeringReqs(p.reqs)))
	}
	bits := newBitset(len(s.types))
	bits.and(p.typeBits, sh.typeBits)
	bits.each(func(i int) {
		if s.types[i].offerMask&mask == 0 {
			bits[i>>6] &^= 1 << (uint(i) & 63)
		}
	})
	if bits.empty() {
		why := "no instance type satisfies the requirements"
		if len(sh.creqs) > 0 {
			why += " (" + sh.creqs.String() + ")"
		}
		if len(s.in.Unavailable) > 0 {
			why += " with an available offering"
		}
		return incompatible(why)
	}
	if why := explainDaemonPorts(ps, p, bits); why != "" {
		return incompatible(why)
	}
	if why := s.explainResources(ps, p, bits); why != "" {
		return incompatible(why)
	}
	if why := s.explainLimits(ps, p, bits); why != "" {
		return why
	}
	c := &target{id: len(s.targets), pool: p, reqID: p.reqID, mask: p.mask, options: p.typeBits,
		used: make(vec, len(s.ix.names))}
	if _, ok, why := s.checkClaim(ps, c, true); !ok && why != "" {
		return incompatible(why)
	}
	return incompatible("no instance type fits it together with the claim's other constraints")
}

// explainDaemonPorts names the DaemonSet whose host port keeps the pod off every allowed type.
func explainDaemonPorts(ps *podState, p *pool, bits bitset) string {
	if len(ps.shape.ports) == 0 {
		return ""
	}
	first, free := "", false
	bits.each(func(i int) {
		why, blocked := p.daemonOn(i).portBlocked(ps.shape.ports)
		if !blocked {
			free = true
		} else if first == "" {
			first = why
		}
	})
	if free {
		return ""
	}
	return first + " on every instance type that fits its requirements"
}

// explainResources names the resources no allowed type has enough of.
func (s *solver) explainResources(ps *podState, p *pool, bits bitset) string {
	n := len(s.ix.names)
	best := make(vec, n) // the most any type leaves for pods beside its DaemonSets
	for i := range best {
		best[i] = math.MinInt64
	}
	anyFits := false
	bits.each(func(i int) {
		left := p.alloc[i].clone()
		left.sub(p.daemonOn(i).req)
		for d := range best {
			best[d] = max(best[d], left[d])
		}
		if fits(make(vec, n), ps.req, left) {
			anyFits = true
		}
	})
	need := ps.req
	var short []string
	for d := range need {
		if need[d] > best[d] {
			short = append(short, formatQuantity(s.ix.names[d], ps.req[d])+" "+s.ix.names[d])
		}
	}
	if len(short) > 0 {
		why := "no instance type has " + strings.Join(short, " and ")
		if !isZero(p.daemon) {
			why += " (after daemonset overhead " + FormatResources(s.ix.list(p.daemon)) + ")"
		}
		return why
	}
	if !anyFits {
		var asked []string
		for d, q := range ps.req {
			if q != 0 && d != slotPods {
				asked = append(asked, formatQuantity(s.ix.names[d], q)+" "+s.ix.names[d])
			}
		}
		return "no instance type has " + strings.Join(asked, " and ") + " together"
	}
	return ""
}

// explainLimits reports the limit that stops every type that would fit.
func (s *solver) explainLimits(ps *podState, p *pool, bits bitset) string {
	if len(p.limited) == 0 {
		return ""
	}
	n := len(s.ix.names)
	room := make(vec, n)
	s.limitRoom(p, nil, room)
	blocking := -1
	ok := false
	bits.each(func(i int) {
		need := ps.req.clone()
		need.add(p.daemonOn(i).req)
		if ok || !fits(make(vec, n), need, p.alloc[i]) {
			return
		}
		if withinLimit(p, p.capacity[i], room) {
			ok = true
			return
		}
		if blocking < 0 {
			for _, d := range p.limited {
				if p.capacity[i][d] > room[d] {
					blocking = d
					break
				}
			}
		}
	})
	if ok || blocking < 0 {
		return ""
	}
	name := s.ix.names[blocking]
	return fmt.Sprintf("nodepool %s would exceed its %s limit of %s", p.np.Name, name, formatQuantity(name, p.limits[blocking]))
}

func isZero(v vec) bool {
	for _, q := range v {
		if q != 0 {
			return false
		}
	}
	return true
}

// offeringReqs renders the zone and capacity-type requirements, or "any".
func offeringReqs(r Requirements) string {
	var parts []string
	for _, ks := range r {
		if ks.key == LabelZone || ks.key == LabelZoneID || ks.key == LabelCapacityType {
			parts = append(parts, ks.key+" "+ks.set.String())
		}
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, ", ")
}
