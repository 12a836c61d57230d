package scheduling

import (
	"slices"
	"sort"
)

// groupCheck is one topology rule a pod must pass: a term it owns (use != nil), or another
// pod's anti-affinity that selects it (inverse).
type groupCheck struct {
	g       *tgroup
	use     *groupUse
	inverse bool
}

func buildChecks(sh *shape) []groupCheck {
	var out []groupCheck
	for i := range sh.owned {
		out = append(out, groupCheck{g: sh.owned[i].g, use: &sh.owned[i]})
	}
	for _, g := range sh.inverse {
		out = append(out, groupCheck{g: g, inverse: true})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].g.key < out[b].g.key })
	return out
}

// domains lists a target's possible domains for a key into buf: one for an existing node (or
// none when it lacks the label); for a claim, those its offerings or requirements still allow.
func (s *solver) domains(t *target, w *claimWork, sp *domainSpace, buf []int) []int {
	buf = buf[:0]
	if sp.hostname {
		return append(buf, t.id)
	}
	if t.node != nil {
		if d, ok := s.existingDomain(t, sp); ok {
			buf = append(buf, d)
		}
		return buf
	}
	switch sp.key {
	case LabelZone:
		for zi, z := range s.zones {
			if w.mask&(3<<uint(zi*2)) != 0 {
				if d, ok := sp.ids[z]; ok {
					buf = append(buf, d)
				}
			}
		}
		return buf
	case LabelCapacityType:
		for ci, c := range capacityTypes {
			var bits uint64
			for zi := range s.zones {
				bits |= 1 << uint(zi*2+ci)
			}
			if w.mask&bits != 0 {
				if d, ok := sp.ids[c]; ok {
					buf = append(buf, d)
				}
			}
		}
		return buf
	}
	if set, ok := s.reqs.list[w.reqID].get(sp.key); ok {
		if vs, fin := set.finite(); fin {
			for _, v := range vs {
				if d, ok := sp.ids[v]; ok {
					buf = append(buf, d)
				}
			}
			return buf
		}
	}
	if isTypeLabel(sp.key) {
		seen := map[int]bool{}
		t.options.each(func(i int) {
			if w.typeFilter != nil && !w.typeFilter.has(i) {
				return
			}
			if v, ok := s.types[i].t.Labels[sp.key]; ok {
				if d, ok := sp.ids[v]; ok && !seen[d] {
					seen[d] = true
					buf = append(buf, d)
				}
			}
		})
		sort.Ints(buf)
	}
	return buf
}

// topoCheck applies every topology rule of the pod to the target. On a claim (w != nil) it
// narrows the claim's domains the way Karpenter does: a spread picks the least-loaded allowed
// domain, affinity the domains holding matching pods, anti-affinity the domains without them.
func (s *solver) topoCheck(ps *podState, t *target, w *claimWork, explain bool) (bool, string) {
	checks := ps.shape.checks
	for i := 0; i < len(checks); {
		sp := checks[i].g.space
		cur := s.domains(t, w, sp, s.domBuf)
		before := len(cur)
		j := i
		for ; j < len(checks) && checks[j].g.space == sp; j++ {
			cur = filterDomains(checks[j], t, cur)
			if len(cur) == 0 {
				s.domBuf = cur
				if explain {
					return false, "would violate " + checks[j].g.describe()
				}
				return false, ""
			}
		}
		if w != nil && !sp.hostname && len(cur) < before {
			s.narrow(w, sp, cur)
		}
		s.domBuf = cur
		i = j
	}
	return true, ""
}

// filterDomains keeps the domains in cur that one rule allows, reusing cur's storage.
func filterDomains(c groupCheck, t *target, cur []int) []int {
	g := c.g
	out := cur[:0]
	switch {
	case c.inverse:
		for _, d := range cur {
			if g.ownerCount(d) == 0 {
				out = append(out, d)
			}
		}
	case g.kind == kAnti:
		for _, d := range cur {
			if g.count(d) == 0 {
				out = append(out, d)
			}
		}
	case g.kind == kSpread:
		self := int32(0)
		if c.use.self {
			self = 1
		}
		if g.space.hostname {
			if g.count(t.id)+self <= g.maxSkew {
				out = append(out, t.id)
			}
			return out
		}
		globalMin := int32(0)
		if int32(len(c.use.eligible)) >= g.minDomains {
			globalMin = int32(1 << 30)
			for _, d := range c.use.eligible {
				globalMin = min(globalMin, g.count(d))
			}
		}
		best, bestCount := -1, int32(1<<30)
		for _, d := range cur {
			if !slices.Contains(c.use.eligible, d) {
				continue
			}
			if n := g.count(d); n+self-globalMin <= g.maxSkew && n < bestCount {
				best, bestCount = d, n
			}
		}
		if best >= 0 {
			out = append(out, best)
		}
	case g.kind == kAffinity:
		if g.space.hostname {
			if g.count(t.id) > 0 || (g.total == 0 && c.use.self) {
				out = append(out, t.id)
			}
			return out
		}
		anyMatch := false
		for _, d := range c.use.eligible {
			if g.count(d) > 0 {
				anyMatch = true
				break
			}
		}
		for _, d := range cur {
			if !slices.Contains(c.use.eligible, d) {
				continue
			}
			if g.count(d) > 0 || (!anyMatch && c.use.self) {
				out = append(out, d)
				if !anyMatch {
					break // bootstrap: pick one domain
				}
			}
		}
	}
	return out
}

// narrow restricts a claim being tried to the domains kept for a key.
func (s *solver) narrow(w *claimWork, sp *domainSpace, keep []int) {
	switch sp.key {
	case LabelZone:
		var m uint64
		for _, d := range keep {
			for zi, z := range s.zones {
				if z == sp.values[d] {
					m |= 3 << uint(zi*2)
				}
			}
		}
		w.mask &= m
		return
	case LabelCapacityType:
		var m uint64
		for _, d := range keep {
			for ci, c := range capacityTypes {
				if c == sp.values[d] {
					for zi := range s.zones {
						m |= 1 << uint(zi*2+ci)
					}
				}
			}
		}
		w.mask &= m
		return
	}
	vals := make([]string, len(keep))
	for i, d := range keep {
		vals[i] = sp.values[d]
	}
	r := Requirements{{key: sp.key, set: valueSet{values: sortedUnique(vals)}}}
	w.reqID = s.reqs.intern(s.reqs.list[w.reqID].Intersect(r))
	if isTypeLabel(sp.key) {
		f := s.typeBits(r)
		if w.typeFilter != nil {
			f.and(f, w.typeFilter)
		}
		w.typeFilter = f
	}
}

// record counts a placed pod in every group that selects it, and as an owner of its required
// anti-affinity terms (its preferred ones bind only itself, as in Karpenter). A claim still open across several domains counts for anti-affinity in
// all of them, to be safe, and not at all for spread and affinity (as Karpenter does).
func (s *solver) record(ps *podState, t *target) {
	sh := ps.shape
	if len(sh.selected) == 0 && len(sh.owned) == 0 {
		return
	}
	w := &claimWork{reqID: t.reqID, mask: t.mask}
	for _, g := range sh.selected {
		doms := s.domains(t, w, g.space, s.domBuf)
		if len(doms) == 1 || (g.kind == kAnti && len(doms) > 0) {
			for _, d := range doms {
				g.counts = bump(g.counts, d)
			}
			g.total++
		}
		s.domBuf = doms
	}
	for _, u := range sh.owned {
		if u.g.kind != kAnti || !u.required {
			continue
		}
		doms := s.domains(t, w, u.g.space, s.domBuf)
		for _, d := range doms {
			u.g.owners = bump(u.g.owners, d)
		}
		s.domBuf = doms
	}
}
