package scheduling

import (
	"fmt"
	"sort"
)

// pool is a NodePool compiled for one solve.
type pool struct {
	np        *NodePool
	reqs      Requirements // everything, including zone and capacity type
	reqID     int32        // of reqs without zone and capacity type
	mask      uint64       // offerings the pool allows
	typeBits  bitset       // types the pool allows that have an allowed, available offering
	daemon    vec          // DaemonSet overhead on its nodes
	limits    vec
	limited   []int // dimensions with a limit
	committed vec   // capacity of existing, in-flight and planned nodes
	minValues []keyedSet
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
		p.daemon, err = s.daemonOverhead(p)
		if err != nil {
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

// daemonOverhead sums the requests of the DaemonSets whose pods would run on the pool's nodes:
// those that tolerate its taints and whose node requirements its nodes can meet.
func (s *solver) daemonOverhead(p *pool) (vec, error) {
	total := make(vec, len(s.ix.names))
	for i := range s.in.DaemonSets {
		ds := &s.in.DaemonSets[i]
		if _, bad := untolerated(p.np.Taints, ds.Pod.Tolerations, true); bad {
			continue
		}
		reqs, err := nodeRequirements(&ds.Pod, relaxState{})
		if err != nil {
			return nil, fmt.Errorf("compiling daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		if p.reqs.Compatible(reqs) != nil || (s.maskOf(reqs)&p.mask == 0) {
			continue
		}
		total.add(s.podRequests(&ds.Pod))
	}
	return total, nil
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
