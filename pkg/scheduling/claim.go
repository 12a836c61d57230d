package scheduling

import "math"

// target is somewhere a pod can go: an existing node (node != nil) or a new claim.
type target struct {
	id   int
	name string

	// Existing nodes.
	node   *Node
	labels map[string]string
	taints []Taint
	alloc  vec
	// removed: a node a consolidation trial takes away; it takes no pods.
	removed bool

	used  vec // requests of the pods on it (without DaemonSet overhead for claims)
	ports []HostPort
	pods  []*podState

	// New claims.
	pool      *pool
	reqID     int32
	mask      uint64 // offerings still allowed (and offered by some option)
	options   bitset
	maxAlloc  vec // the most any option leaves for pods, per dimension
	committed vec // charged against the pool's limits: the largest option's capacity
	deleted   bool
}

// claimWork is a claim's state while a pod is being tried on it.
type claimWork struct {
	reqID      int32
	mask       uint64
	typeFilter bitset // non-nil when topology pinned a type label
}

// tryExisting places a pod on an existing node or in-flight claim if everything holds.
func (s *solver) tryExisting(ps *podState, t *target) bool {
	if ok, _ := s.checkExisting(ps, t, false); !ok {
		return false
	}
	t.used.add(ps.req)
	s.nodeTree.update(t.id, t)
	s.commonCommit(ps, t)
	return true
}

func (s *solver) checkExisting(ps *podState, t *target, explain bool) (bool, string) {
	sh := ps.shape
	if t.node.MarkedForDeletion {
		return false, "marked for deletion"
	}
	if t.removed {
		return false, "being removed"
	}
	if !fits(t.used, ps.req, t.alloc) {
		return false, "not enough room"
	}
	if tt, bad := untolerated(t.taints, sh.tols, sh.tolPNS); bad {
		return false, "did not tolerate " + tt.String()
	}
	if !sh.reqs.Matches(t.labels) {
		if explain {
			return false, sh.reqs.explainMismatch(t.labels)
		}
		return false, ""
	}
	if portsConflict(t.ports, sh.ports) {
		return false, "host port conflict"
	}
	return s.topoCheck(ps, t, nil, explain)
}

// tryClaim adds a pod to an open claim if every constraint holds and some option still fits.
func (s *solver) tryClaim(ps *podState, c *target) bool {
	if !fits(c.used, ps.req, c.maxAlloc) {
		return false
	}
	w, ok, _ := s.checkClaim(ps, c, false)
	return ok && s.commitClaim(ps, c, w)
}

// checkClaim checks requirements, taints, ports and topology, returning the claim's state
// with the pod on it.
func (s *solver) checkClaim(ps *podState, c *target, explain bool) (claimWork, bool, string) {
	sh := ps.shape
	w := claimWork{mask: c.mask & sh.mask}
	if w.mask == 0 {
		return w, false, "no allowed zone and capacity type in common"
	}
	if tt, bad := untolerated(c.pool.np.Taints, sh.tols, sh.tolPNS); bad {
		return w, false, "did not tolerate " + tt.String()
	}
	if w.reqID = s.reqs.combine(c.reqID, sh); w.reqID < 0 {
		if explain {
			return w, false, "incompatible requirements, " + s.reqs.list[c.reqID].Compatible(sh.creqs).Error()
		}
		return w, false, ""
	}
	if portsConflict(c.ports, sh.ports) {
		return w, false, "host port conflict"
	}
	if !sh.hasTopo {
		return w, true, ""
	}
	ok, why := s.topoCheck(ps, c, &w, explain)
	return w, ok, why
}

// openClaim opens a new claim from pool p for the pod.
func (s *solver) openClaim(ps *podState, p *pool) (string, bool) {
	c := &target{id: len(s.targets), pool: p, reqID: p.reqID, mask: p.mask, options: p.typeBits,
		used: make(vec, len(s.ix.names))}
	w, ok, why := s.checkClaim(ps, c, false)
	if !ok || !s.commitClaim(ps, c, w) {
		return why, false
	}
	c.name = s.newID()
	s.claims = append(s.claims, c)
	s.targets = append(s.targets, c)
	return "", true
}

// commitClaim narrows the claim's options to the types that still fit everything, and adds
// the pod if any remain.
func (s *solver) commitClaim(ps *podState, c *target, w claimWork) bool {
	bits := s.scratch
	if !bits.and(c.options, ps.shape.typeBits) {
		return false
	}
	if w.typeFilter != nil && !bits.and(bits, w.typeFilter) {
		return false
	}
	p := c.pool
	n := len(s.ix.names)
	used := make(vec, n)
	copy(used, c.used)
	used.add(ps.req)
	var room vec
	limited := false
	if len(p.limited) > 0 {
		room = make(vec, n)
		limited = s.limitRoom(p, c.committed, room)
	}
	maxAlloc := make(vec, n)
	for i := range maxAlloc {
		maxAlloc[i] = math.MinInt64
	}
	committed := make(vec, n)
	var offered uint64
	left := 0
	ports := ps.shape.ports
	bits.each(func(i int) {
		t := &s.types[i]
		daemon := p.daemonOn(i)
		if t.offerMask&w.mask == 0 || !fits(used, daemon.req, p.alloc[i]) || (limited && !withinLimit(p, p.capacity[i], room)) {
			bits[i>>6] &^= 1 << (uint(i) & 63)
			return
		}
		if _, blocked := daemon.portBlocked(ports); blocked {
			bits[i>>6] &^= 1 << (uint(i) & 63)
			return
		}
		left++
		offered |= t.offerMask
		for d := range maxAlloc {
			maxAlloc[d] = max(maxAlloc[d], p.alloc[i][d]-daemon.req[d])
			committed[d] = max(committed[d], p.capacity[i][d])
		}
	})
	if left == 0 || !s.minValuesHold(p, bits) {
		return false
	}
	c.options = bits.clone()
	c.used = used
	c.maxAlloc = maxAlloc
	c.mask = w.mask & offered
	c.reqID = w.reqID
	if c.committed != nil {
		p.committed.sub(c.committed)
	}
	p.committed.add(committed)
	c.committed = committed
	s.commonCommit(ps, c)
	return true
}

// minValuesHold checks the pool's minValues against the remaining options.
func (s *solver) minValuesHold(p *pool, bits bitset) bool {
	for _, ks := range p.minValues {
		if distinctValues(s, bits, ks.key) < ks.minValues {
			return false
		}
	}
	return true
}

func distinctValues(s *solver, bits bitset, key string) int {
	seen := map[string]bool{}
	bits.each(func(i int) {
		if v, ok := s.types[i].t.Labels[key]; ok {
			seen[v] = true
		}
	})
	return len(seen)
}

// commonCommit records a placement: the pod, its ports and its topology counts.
func (s *solver) commonCommit(ps *podState, t *target) {
	ps.target = t
	t.pods = append(t.pods, ps)
	t.ports = append(t.ports, ps.shape.ports...)
	s.record(ps, t)
}

// portsConflict reports whether any wanted host port is already bound on the node.
func portsConflict(bound, want []HostPort) bool {
	for _, w := range want {
		for _, b := range bound {
			if w.Port != b.Port || protocol(w) != protocol(b) {
				continue
			}
			if wildcardIP(w.HostIP) || wildcardIP(b.HostIP) || w.HostIP == b.HostIP {
				return true
			}
		}
	}
	return false
}

func protocol(h HostPort) string {
	if h.Protocol == "" {
		return "TCP"
	}
	return h.Protocol
}

func wildcardIP(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
