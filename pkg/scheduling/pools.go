package scheduling

import (
	"fmt"
	"sort"
)

// pool is a NodePool compiled for one solve.
type pool struct {
	np       *NodePool
	reqs     Requirements // everything, including zone and capacity type
	reqID    int32        // of reqs without zone and capacity type
	mask     uint64       // offerings the pool allows
	typeBits bitset       // types the pool allows that have an allowed, available offering
	// daemon is the most DaemonSet overhead any of the pool's types carries (in-flight claims,
	// whose type is not known yet, are charged it); daemonByType[i] is what the DaemonSets whose
	// pods would run on a node of type i ask for there, and the host ports they bind.
	daemon       vec
	daemonByType []*daemonLoad
	limits       vec
	limited      []int // dimensions with a limit
	committed    vec   // capacity of existing, in-flight and planned nodes
	minValues    []keyedSet
	// alloc and capacity of each type (by solver index) on the pool's nodes.
	alloc, capacity []vec
}

// reqTable interns claim requirements and caches which pod shapes they accept.
type reqTable struct {
	ids    map[string]int32
	list   []Requirements
	compat [][]int32 // [requirements][shape]: 0 unknown, -1 incompatible, else result id + 1
}

func newReqTable() *reqTable { return &reqTable{ids: map[string]int32{}} }

func (t *reqTable) intern(r Requirements) int32 {
	k := r.key()
	if id, ok := t.ids[k]; ok {
		return id
	}
	id := int32(len(t.list))
	t.ids[k] = id
	t.list = append(t.list, r)
	t.compat = append(t.compat, nil)
	return id
}

// combine returns the requirements of a claim with id after a pod of shape sh joins, or -1
// when the pod's requirements cannot hold on it.
func (t *reqTable) combine(id int32, sh *shape) int32 {
	row := t.compat[id]
	if int(sh.id) < len(row) {
		if v := row[sh.id]; v != 0 {
			return v - 1
		}
	}
	res := int32(-1)
	if t.list[id].Compatible(sh.creqs) == nil {
		res = t.intern(t.list[id].Intersect(sh.creqs))
	}
	row = t.compat[id] // intern may have grown the table
	for len(row) <= int(sh.id) {
		row = append(row, 0)
	}
	row[sh.id] = res + 1
	t.compat[id] = row
	return res
}

// compilePools orders pools by weight (then name) and compiles requirements, the types they
// allow, DaemonSet overhead and limits.
func (s *solver) compilePools() error {
	for i := range s.in.NodePools {
		np := &s.in.NodePools[i]
		reqs, err := poolRequirements(*np)
		if err != nil {
			return fmt.Errorf("compiling nodepool %s: %w", np.Name, err)
		}
		p := &pool{np: np, reqs: reqs, reqID: s.reqs.intern(stripOffering(reqs)), mask: s.maskOf(reqs),
			committed: make(vec, len(s.ix.names))}
		if err := s.poolResources(p); err != nil {
			return fmt.Errorf("compiling nodepool %s: %w", np.Name, err)
		}
		p.typeBits = s.typeBits(reqs).clone()
		for ti := range s.types {
			if p.typeBits.has(ti) && s.types[ti].offerMask&p.mask == 0 {
				p.typeBits[ti>>6] &^= 1 << (uint(ti) & 63)
			}
		}
		for _, ks := range reqs {
			if ks.minValues > 0 {
				p.minValues = append(p.minValues, ks)
			}
		}
		if len(np.Limits) > 0 {
			p.limits = s.ix.vec(np.Limits)
			for n := range np.Limits {
				if slot, ok := s.ix.slot[n]; ok {
					p.limited = append(p.limited, slot)
				}
			}
			sort.Ints(p.limited)
		}
		if err := s.daemonOverhead(p); err != nil {
			return fmt.Errorf("compiling nodepool %s: %w", np.Name, err)
		}
		s.pools = append(s.pools, p)
	}
	sort.SliceStable(s.pools, func(a, b int) bool {
		if s.pools[a].np.Weight != s.pools[b].np.Weight {
			return s.pools[a].np.Weight > s.pools[b].np.Weight
		}
		return s.pools[a].np.Name < s.pools[b].np.Name
	})
	return nil
}

// poolResources fills the capacity and allocatable of every type on the pool's nodes.
func (s *solver) poolResources(p *pool) error {
	p.alloc, p.capacity = make([]vec, len(s.types)), make([]vec, len(s.types))
	var c nodeSettings
	if p.np.Node != nil {
		var err error
		if c, err = p.np.Node.compile(); err != nil {
			return err
		}
	}
	for i := range s.types {
		t := &s.types[i]
		if p.np.Node == nil || t.t.Facts == nil {
			p.alloc[i], p.capacity[i] = t.alloc, t.capacity
			continue
		}
		capacity := c.capacity(*t.t.Facts)
		p.capacity[i], p.alloc[i] = s.capacityVec(capacity), s.ix.vec(c.allocatable(capacity))
	}
	return nil
}

// daemonLoad is what the DaemonSets running on one kind of node take there: their requests
// and the host ports they bind, with the DaemonSet binding each (for explanations).
type daemonLoad struct {
	req   vec
	ports []HostPort
	owner []string // namespace/name of the DaemonSet binding ports[i]
}

// daemonOverhead works out, per instance type of the pool, the DaemonSets whose pods would run
// on its nodes: those that tolerate the pool's taints and whose node requirements (any one of
// their required terms) a node of the pool of that type can meet. A DaemonSet pinned to one
// architecture or family is charged only to the types it lands on, so its requests and host
// ports never block a pod from the types it does not run on (Karpenter groups daemon overhead by
// instance type for the same reason). Types with the same DaemonSets share one load.
func (s *solver) daemonOverhead(p *pool) error {
	p.daemon = make(vec, len(s.ix.names))
	p.daemonByType = make([]*daemonLoad, len(s.types))
	type fit struct {
		ds    *DaemonSet
		types bitset
	}
	var fits []fit
	for i := range s.in.DaemonSets {
		ds := &s.in.DaemonSets[i]
		if _, bad := untolerated(p.np.Taints, ds.Pod.Tolerations, true); bad {
			continue
		}
		types := newBitset(len(s.types))
		terms := max(1, len(ds.Pod.RequiredNodeAffinity))
		for term := 0; term < terms; term++ {
			reqs, err := nodeRequirements(&ds.Pod, relaxState{reqTerm: term})
			if err != nil {
				return fmt.Errorf("compiling daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
			}
			if p.reqs.Compatible(reqs) != nil || s.maskOf(reqs)&p.mask == 0 {
				continue
			}
			tb := s.typeBits(reqs)
			for w := range types {
				types[w] |= tb[w] & p.typeBits[w]
			}
		}
		if !types.empty() {
			fits = append(fits, fit{ds: ds, types: types})
		}
	}
	loads := map[string]*daemonLoad{}
	key := make([]byte, 0, len(fits))
	for i := range s.types {
		if !p.typeBits.has(i) {
			continue
		}
		key = key[:0]
		for _, f := range fits {
			if f.types.has(i) {
				key = append(key, 1)
			} else {
				key = append(key, 0)
			}
		}
		l, ok := loads[string(key)]
		if !ok {
			l = &daemonLoad{req: make(vec, len(s.ix.names))}
			for j, f := range fits {
				if key[j] == 1 {
					l.req.add(s.podRequests(&f.ds.Pod))
					for _, hp := range f.ds.Pod.HostPorts {
						l.ports = append(l.ports, hp)
						l.owner = append(l.owner, f.ds.Namespace+"/"+f.ds.Name)
					}
				}
			}
			loads[string(key)] = l
			for d := range p.daemon {
				p.daemon[d] = max(p.daemon[d], l.req[d])
			}
		}
		p.daemonByType[i] = l
	}
	return nil
}

// daemonOn is the DaemonSet load on a node of the pool of type i.
func (p *pool) daemonOn(i int) *daemonLoad {
	if l := p.daemonByType[i]; l != nil {
		return l
	}
	return &daemonLoad{req: p.daemon}
}

// inFlightDaemonPorts are the host ports the pool's DaemonSets will bind on an in-flight claim's
// node: those of every type the claim may still be, as far as its labels tell.
func (s *solver) inFlightDaemonPorts(p *pool, labels map[string]string) []HostPort {
	seen := map[*daemonLoad]bool{}
	var out []HostPort
	p.typeBits.each(func(i int) {
		l := p.daemonByType[i]
		if l == nil || len(l.ports) == 0 || seen[l] {
			return
		}
		for k, v := range labels {
			if tv, ok := s.types[i].t.Labels[k]; ok && isTypeLabel(k) && tv != v {
				return
			}
		}
		seen[l] = true
		out = append(out, l.ports...)
	})
	return out
}

// portBlocked reports whether a DaemonSet on a node of type i binds one of the host ports; who
// names the first such DaemonSet and port.
func (l *daemonLoad) portBlocked(want []HostPort) (who string, blocked bool) {
	for _, w := range want {
		for j, b := range l.ports {
			if portsConflict([]HostPort{b}, []HostPort{w}) {
				return fmt.Sprintf("host port %d/%s is bound by daemonset %s", w.Port, protocol(w), l.owner[j]), true
			}
		}
	}
	return "", false
}

// limitRoom is what the pool may still add, ignoring the claim's own charge; ok is false when
// the pool has no limits.
func (s *solver) limitRoom(p *pool, own vec, room vec) bool {
	if len(p.limited) == 0 {
		return false
	}
	for i := range room {
		room[i] = p.limits[i] - p.committed[i]
		if own != nil {
			room[i] += own[i]
		}
	}
	return true
}

// withinLimit reports whether capacity c fits in room on the limited dimensions.
func withinLimit(p *pool, c, room vec) bool {
	for _, d := range p.limited {
		if c[d] > room[d] {
			return false
		}
	}
	return true
}
