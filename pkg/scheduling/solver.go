package scheduling

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// Solve places pending pods: onto existing nodes and in-flight claims first, then onto new
// NodeClaims, pools by weight. It returns the plan and an explanation for every pod it could
// not place. The same input always gives the same plan.
//
//	input ─ newSolver (compile pools, types, topology groups, shapes)
//	      ─ run (sorted pods; existing nodes → open claims → new claim; relax soft constraints)
//	      ─ improve (cheaper claims, never breaking a constraint)
//	      ─ plan (options cheapest first, ≤ MaxInstanceTypes)
func Solve(in Input) (Plan, error) {
	s, err := newSolver(&in)
	if err != nil {
		return Plan{}, fmt.Errorf("preparing solve: %w", err)
	}
	s.run()
	if !in.SkipImprovement {
		s.improve()
	}
	return s.plan(), nil
}

// itype is an instance type compiled for one solve.
type itype struct {
	t         *InstanceType
	alloc     vec
	capacity  vec
	offerMask uint64    // available offerings: bit zone*2+capacityType
	prices    []float64 // by offering bit; +Inf when not offered or unavailable
	minPrice  float64
}

// Offering bits: zone index × 2 + capacity type index.
const (
	ctSpot     = 0
	ctOnDemand = 1
	maxZones   = 32
)

var capacityTypes = [2]string{CapacityTypeSpot, CapacityTypeOnDemand}

type solver struct {
	in    *Input
	ix    *resourceIndex
	types []itype
	zones []string
	all   bitset // every type

	pools     []*pool
	reqs      *reqTable
	shapes    map[string]*shape
	shapeList []*shape
	topo      *topology

	pods    []*podState
	nodes   []*target // existing nodes and in-flight claims
	claims  []*target // new claims, in creation order
	targets []*target // all, by id
	// nodeTree finds the nodes with room for a pod (kept current as pods land on nodes).
	nodeTree *nodeTree

	relaxations []Relaxation
	unplaced    map[*podState]string
	newID       func() string
	clock       func() time.Time

	scratch bitset
	domBuf  []int

	pns int8 // anyPreferNoSchedule: 0 not yet known, 1 yes, 2 no

	// claimCap caps the new claims a run may open (-1: no cap); consolidation allows one.
	claimCap int
}

func newSolver(in *Input) (*solver, error) { return newSolverWith(in, nil) }

// newSolverWith also builds topology groups for the terms of extra pods, which are not
// pending but may be placed later (consolidation's moving pods).
func newSolverWith(in *Input, extra []*Pod) (*solver, error) {
	s := &solver{in: in, reqs: newReqTable(), shapes: map[string]*shape{}, unplaced: map[*podState]string{}, claimCap: -1}
	s.clock = in.Clock
	if s.clock == nil {
		s.clock = func() time.Time { return time.Unix(0, 0).UTC() }
	}
	s.newID = in.NewID
	if s.newID == nil {
		n := 0
		s.newID = func() string { n++; return fmt.Sprintf("nodeclaim-%05d", n) }
	}
	s.ix = newResourceIndex(resourceNames(in))
	if err := s.compileTypes(); err != nil {
		return nil, err
	}
	if err := s.compilePools(); err != nil {
		return nil, err
	}
	s.compileNodes()
	if err := s.compilePods(extra); err != nil {
		return nil, err
	}
	return s, nil
}

// resourceNames collects every resource named anywhere, to size the dense vectors.
func resourceNames(in *Input) map[string]bool {
	names := map[string]bool{}
	addAll := func(rl ResourceList) {
		for n := range rl {
			names[n] = true
		}
	}
	for i := range in.Pods {
		addAll(in.Pods[i].Requests)
	}
	for i := range in.InstanceTypes {
		addAll(in.InstanceTypes[i].Capacity)
	}
	for i := range in.Nodes {
		addAll(in.Nodes[i].Allocatable)
	}
	for i := range in.NodePools {
		addAll(in.NodePools[i].Limits)
	}
	for i := range in.DaemonSets {
		addAll(in.DaemonSets[i].Pod.Requests)
	}
	return names
}

// compileTypes orders types by their cheapest available offering and indexes zones.
func (s *solver) compileTypes() error {
	zoneSet := map[string]bool{}
	for i := range s.in.InstanceTypes {
		for _, o := range s.in.InstanceTypes[i].Offerings {
			zoneSet[o.Zone] = true
		}
	}
	for i := range s.in.Nodes {
		if z, ok := s.in.Nodes[i].Labels[LabelZone]; ok {
			zoneSet[z] = true
		}
	}
	s.zones = slices.Sorted(maps.Keys(zoneSet))
	if len(s.zones) > maxZones {
		return fmt.Errorf("indexing zones: %d zones, at most %d supported", len(s.zones), maxZones)
	}
	zoneIdx := map[string]int{}
	for i, z := range s.zones {
		zoneIdx[z] = i
	}
	unavailable := map[OfferingKey]bool{}
	for _, k := range s.in.Unavailable {
		unavailable[k] = true
	}
	for i := range s.in.InstanceTypes {
		t := &s.in.InstanceTypes[i]
		it := itype{t: t, prices: make([]float64, 2*len(s.zones)), minPrice: math.Inf(1)}
		for j := range it.prices {
			it.prices[j] = math.Inf(1)
		}
		for _, o := range t.Offerings {
			ct := -1
			for c, name := range capacityTypes {
				if o.CapacityType == name {
					ct = c
				}
			}
			if ct < 0 || !o.Available || unavailable[OfferingKey{t.Name, o.Zone, o.CapacityType}] {
				continue
			}
			bit := zoneIdx[o.Zone]*2 + ct
			it.offerMask |= 1 << uint(bit)
			it.prices[bit] = min(it.prices[bit], o.PriceUSDPerHour)
			it.minPrice = min(it.minPrice, o.PriceUSDPerHour)
		}
		it.capacity = s.capacityVec(t.Capacity)
		it.alloc = s.ix.vec(t.Allocatable())
		s.types = append(s.types, it)
	}
	sort.SliceStable(s.types, func(a, b int) bool {
		if s.types[a].minPrice != s.types[b].minPrice {
			return s.types[a].minPrice < s.types[b].minPrice
		}
		return s.types[a].t.Name < s.types[b].t.Name
	})
	s.all = newBitset(len(s.types))
	for i := range s.types {
		s.all.set(i)
	}
	s.scratch = newBitset(len(s.types))
	return nil
}

// maskOf turns the zone, zone-id and capacity-type parts of requirements into offering bits.
func (s *solver) maskOf(r Requirements) uint64 {
	zs, zok := r.get(LabelZone)
	ids, idok := r.get(LabelZoneID)
	cs, cok := r.get(LabelCapacityType)
	var m uint64
	for zi, z := range s.zones {
		if zok && !zs.has(z) {
			continue
		}
		if id, known := s.in.ZoneIDs[z]; idok && !ids.matches(id, known) {
			continue
		}
		for ci, c := range capacityTypes {
			if cok && !cs.has(c) {
				continue
			}
			m |= 1 << uint(zi*2+ci)
		}
	}
	return m
}

// stripOffering drops the zone, zone-id and capacity-type keys, which claims track as offering
// bits.
func stripOffering(r Requirements) Requirements {
	out := make(Requirements, 0, len(r))
	for _, ks := range r {
		if ks.key != LabelZone && ks.key != LabelZoneID && ks.key != LabelCapacityType {
			out = append(out, ks)
		}
	}
	return out
}

// typeBits returns the types whose labels satisfy the type-label keys of r.
func (s *solver) typeBits(r Requirements) bitset {
	var keys Requirements
	for _, ks := range r {
		if isTypeLabel(ks.key) {
			keys = append(keys, ks)
		}
	}
	if len(keys) == 0 {
		return s.all
	}
	b := newBitset(len(s.types))
	for i := range s.types {
		if keys.Matches(s.types[i].t.Labels) {
			b.set(i)
		}
	}
	return b
}

// compileNodes turns existing nodes and in-flight claims into targets and charges their
// capacity to their pools. An in-flight claim's DaemonSet pods are not there yet but will be:
// its pool's DaemonSet overhead is charged to it, as it was when the claim was planned.
func (s *solver) compileNodes() {
	for i := range s.in.Nodes {
		n := &s.in.Nodes[i]
		t := &target{id: len(s.targets), name: n.Name, node: n, labels: n.Labels, taints: n.Taints,
			alloc: s.ix.vec(n.Allocatable), used: make(vec, len(s.ix.names))}
		for j := range n.Pods {
			t.used.add(s.podRequests(&n.Pods[j]))
			t.ports = append(t.ports, n.Pods[j].HostPorts...)
		}
		if p := s.poolNamed(n.NodePool); p != nil {
			c := n.Capacity
			if c == nil {
				c = n.Allocatable
			}
			p.committed.add(s.capacityVec(c))
			if n.InFlight {
				t.used.add(p.daemon)
				t.ports = append(t.ports, s.inFlightDaemonPorts(p, n.Labels)...)
			}
		}
		s.nodes = append(s.nodes, t)
		s.targets = append(s.targets, t)
	}
	s.nodeTree = newNodeTree(s.nodes, len(s.ix.names))
}

// capacityVec is a node's capacity as charged against its pool's limits: its resources, and
// one of the pseudo-resource "nodes" (a pool's limits may cap its node count, as Karpenter's do).
func (s *solver) capacityVec(rl ResourceList) vec {
	v := s.ix.vec(rl)
	if slot, ok := s.ix.slot[ResourceNodes]; ok {
		v[slot] = 1
	}
	return v
}

func (s *solver) poolNamed(name string) *pool {
	for _, p := range s.pools {
		if p.np.Name == name {
			return p
		}
	}
	return nil
}

// podRequests is the pod's request vector with its one pod slot.
func (s *solver) podRequests(p *Pod) vec {
	v := s.ix.vec(p.Requests)
	v[slotPods] = 1
	return v
}

// run places pods in a total order, relaxing one soft constraint of a pod each time it fails,
// and passing over the failures again while anything changes.
func (s *solver) run() {
	for _, ps := range s.runQueue(s.pods) {
		s.unplaced[ps] = s.explain(ps)
	}
}

// runQueue places pods (in the order given) as run does and returns those left unplaced.
func (s *solver) runQueue(pods []*podState) []*podState {
	queue := append([]*podState(nil), pods...)
	for len(queue) > 0 {
		progress := false
		var next []*podState
		for _, ps := range queue {
			if s.place(ps) {
				progress = true
				continue
			}
			if desc := s.relax(ps); desc != "" {
				s.relaxations = append(s.relaxations, Relaxation{PodUID: ps.pod.UID, Description: desc})
				progress = true
			}
			next = append(next, ps)
		}
		queue = next
		if !progress {
			break
		}
	}
	return queue
}

// place tries existing nodes, then open claims (newest first, so the claim being filled is
// tried first), then a new claim from each pool by weight.
func (s *solver) place(ps *podState) bool {
	sh := ps.shape
	if sh.err != nil {
		return false
	}
	if s.nodeTree.each(ps.req, func(i int) bool { return s.tryExisting(ps, s.nodes[i]) }) {
		return true
	}
	for i := len(s.claims) - 1; i >= 0; i-- {
		if c := s.claims[i]; !c.deleted && s.tryClaim(ps, c) {
			return true
		}
	}
	if s.claimCap >= 0 && len(s.claims) >= s.claimCap {
		ps.capped = true
		return false
	}
	for _, p := range s.pools {
		if _, ok := s.openClaim(ps, p); ok {
			return true
		}
	}
	return false
}

// zoneIDs are the ids of the zones, sorted; nil when any has no known id.
func (s *solver) zoneIDs(zones []string) []string {
	var ids []string
	for _, z := range zones {
		id, ok := s.in.ZoneIDs[z]
		if !ok {
			return nil
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
