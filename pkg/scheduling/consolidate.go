package scheduling

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ConsolidationInput is the cluster as consolidation judges it.
type ConsolidationInput struct {
	// Input.Nodes: every existing node and in-flight claim with its pods, the candidates
	// included; Input.Pods is ignored. DaemonSets, NodePools, InstanceTypes, Unavailable as for
	// Solve. Input.NewID names the replacement claim (nil: nodeclaim-00001).
	Input
	// Candidates are the nodes (by Input.Nodes name) the caller found eligible: initialized, in
	// a pool whose policy allows consolidation, past consolidateAfter, no do-not-disrupt
	// pod/node, no PDB blocking.
	Candidates []Candidate
	// MinSavings is the share (0..1) of the replaced nodes' price a replacement must save, by
	// pool name; a pool not in the map uses DefaultMinSavings. Deletes need no threshold.
	MinSavings        map[string]float64
	DefaultMinSavings float64
	// SpotToSpot is the SpotToSpotConsolidation feature gate.
	SpotToSpot bool
	// Allowed is how many more nodes of each pool may be disrupted now (budgets); a pool not in
	// the map: unlimited.
	Allowed map[string]int
}

// Candidate is a node consolidation may remove, with what it costs.
type Candidate struct {
	Node, NodePool, InstanceType, CapacityType, Zone string
	PriceUSDPerHour                                  float64
	// LifetimeRemaining is the share (0..1] of the node's expireAfter still ahead (1 when it
	// never expires).
	LifetimeRemaining float64
}

// CommandKind is what a consolidation command does.
type CommandKind string

// Command kinds.
const (
	CommandDelete  CommandKind = "Delete"
	CommandReplace CommandKind = "Replace"
)

// Command is one consolidation action.
type Command struct {
	Kind CommandKind
	// Nodes are the candidates removed.
	Nodes []string
	// Replacement (Replace only) is one new claim, its InstanceTypes only those cheap enough;
	// PodUIDs are the moved pods it is for.
	Replacement *NodeClaim
	// Placements are where the other moved pods go (existing nodes and in-flight claims).
	Placements []Placement
	// SavingsUSDPerHour is the price of Nodes minus the replacement's price.
	SavingsUSDPerHour float64
	// Why says it in words.
	Why string
}

// Rejection says why a candidate was not consolidated: Cause for metrics and code, Reason in
// words.
type Rejection struct {
	Node, Reason string
	Cause        RejectionCause
}

// RejectionCause is the kind of reason a candidate was not consolidated.
type RejectionCause string

// Rejection causes.
const (
	RejectBudget      RejectionCause = "budget"                 // its pool's budget allows no more disruptions
	RejectWouldNotFit RejectionCause = "pods-would-not-fit"     // its pods fit neither the other nodes nor one new node
	RejectSpot        RejectionCause = "spot"                   // spot-to-spot replacement is off or not possible
	RejectNoCheaper   RejectionCause = "no-cheaper-replacement" // no replacement costs less (or keeps minValues)
	RejectSavings     RejectionCause = "savings-threshold"      // the replacement saves less than the threshold
)

// reject is why a trial did not become a command.
type reject struct {
	cause RejectionCause
	why   string
}

// ConsolidationResult is the outcome of one consolidation pass.
type ConsolidationResult struct {
	// Command is nil when nothing should be done; at most one command per pass (as Karpenter).
	Command *Command
	// Rejected lists every candidate evaluated and not chosen, with why.
	Rejected []Rejection
}

// Consolidation constants (Karpenter's).
const (
	// maxMultiNodeCandidates caps the candidates multi-node consolidation considers at once.
	maxMultiNodeCandidates = 100
	// minSpotToSpotTypes is how many cheaper spot types a spot-to-spot replacement needs;
	// the replacement's options are cut to that many.
	minSpotToSpotTypes = 15
)

// Pod owner kinds consolidation does not move.
const (
	ownerDaemonSet = "DaemonSet"
	ownerNode      = "Node"
)

// movable reports whether consolidation moves the pod when its node goes: DaemonSet pods and
// mirror pods stay with (and vanish with) their node.
func movable(p *Pod) bool {
	return !p.Mirror && p.Owner.Kind != ownerDaemonSet && p.Owner.Kind != ownerNode
}

// DisruptionCost is Karpenter's cost of disrupting a node with these pods: per pod 1, plus
// pod-deletion-cost / 2^27, plus priority / 2^25, clamped to [-10, 10]; summed, times the share
// of the node's lifetime remaining.
func DisruptionCost(pods []Pod, lifetimeRemaining float64) float64 {
	cost := 0.0
	for i := range pods {
		c := 1 + float64(pods[i].DeletionCost)/math.Pow(2, 27) + float64(pods[i].Priority)/math.Pow(2, 25)
		cost += max(-10, min(10, c))
	}
	return cost * lifetimeRemaining
}

// Consolidate finds at most one command that lowers the cluster's cost: multi-node first (the
// largest prefix, by disruption cost, of up to 100 candidates whose pods fit on the remaining
// nodes plus at most one cheaper new claim), then single-node (each candidate in order: delete
// when its pods fit elsewhere, else replace it with one cheaper claim). Every move is checked
// by the solver against the real constraints. The same input gives the same result.
func Consolidate(in ConsolidationInput) (ConsolidationResult, error) {
	k, err := newConsolidator(&in)
	if err != nil {
		return ConsolidationResult{}, err
	}
	return k.pass(), nil
}

// candState is a candidate compiled for a pass.
type candState struct {
	Candidate
	target  *target
	cost    float64
	spot    bool
	pods    []*podState // movable pods, solver order
	uncount []topoCharge
	charged bool
	capVec  vec // what the node charges its pool's limits
	pool    *pool
}

// topoCharge is one count an existing pod holds in a topology group.
type topoCharge struct {
	g     *tgroup
	d     int
	owner bool // anti-affinity owner count, else selected count
}

// consolidator runs many trial solves on one compiled solver, restoring its state after each.
type consolidator struct {
	in    *ConsolidationInput
	base  Input
	s     *solver
	cands []*candState // by disruption cost, then name

	// The solver's state before any trial.
	baseUsed      []vec
	basePorts     []int
	baseTargets   int
	baseCounts    [][]int32
	baseOwners    [][]int32
	baseTotals    []int32
	baseCommitted []vec
}

func newConsolidator(in *ConsolidationInput) (*consolidator, error) {
	k := &consolidator{in: in, base: in.Input}
	k.base.Pods = nil
	nodeIdx := map[string]int{}
	for i := range in.Nodes {
		if _, dup := nodeIdx[in.Nodes[i].Name]; dup {
			return nil, fmt.Errorf("consolidation: node %q listed twice", in.Nodes[i].Name)
		}
		nodeIdx[in.Nodes[i].Name] = i
	}
	if err := checkShare("DefaultMinSavings", in.DefaultMinSavings); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(in.MinSavings)) {
		if err := checkShare("MinSavings["+name+"]", in.MinSavings[name]); err != nil {
			return nil, err
		}
	}
	// The pods that may move have their topology terms compiled into groups, and their shapes
	// built once.
	seenCand := map[string]bool{}
	uids := map[string]string{}
	var moving []*Pod
	for _, c := range in.Candidates {
		i, ok := nodeIdx[c.Node]
		if !ok {
			return nil, fmt.Errorf("consolidation: candidate %q is not among the nodes", c.Node)
		}
		if seenCand[c.Node] {
			return nil, fmt.Errorf("consolidation: candidate %q listed twice", c.Node)
		}
		seenCand[c.Node] = true
		if !(c.LifetimeRemaining > 0 && c.LifetimeRemaining <= 1) {
			return nil, fmt.Errorf("consolidation: candidate %q: lifetime remaining %v is outside (0, 1] (1 for a node that never expires)", c.Node, c.LifetimeRemaining)
		}
		if c.PriceUSDPerHour < 0 || math.IsNaN(c.PriceUSDPerHour) || math.IsInf(c.PriceUSDPerHour, 0) {
			return nil, fmt.Errorf("consolidation: candidate %q: price %v is not a non-negative number", c.Node, c.PriceUSDPerHour)
		}
		if c.CapacityType != CapacityTypeSpot && c.CapacityType != CapacityTypeOnDemand {
			return nil, fmt.Errorf("consolidation: candidate %q: capacity type %q is neither %s nor %s", c.Node, c.CapacityType, CapacityTypeSpot, CapacityTypeOnDemand)
		}
		n := &in.Nodes[i]
		if c.NodePool != n.NodePool {
			return nil, fmt.Errorf("consolidation: candidate %q names nodepool %q, its node is in %q", c.Node, c.NodePool, n.NodePool)
		}
		for j := range n.Pods {
			p := &n.Pods[j]
			if !movable(p) {
				continue
			}
			if p.UID == "" {
				return nil, fmt.Errorf("consolidation: pod %s/%s on %s has no UID", p.Namespace, p.Name, n.Name)
			}
			if other, dup := uids[p.UID]; dup {
				return nil, fmt.Errorf("consolidation: pod UID %s is on both %s and %s", p.UID, other, n.Name)
			}
			uids[p.UID] = n.Name
			moving = append(moving, p)
		}
	}
	k.base.SkipImprovement = true
	if len(in.Candidates) == 0 {
		return k, nil
	}
	s, err := newSolverWith(&k.base, moving)
	if err != nil {
		return nil, fmt.Errorf("consolidation: %w", err)
	}
	k.s = s
	s.claimCap = 1
	s.newID = func() string { return "" }
	for _, c := range in.Candidates {
		i := nodeIdx[c.Node]
		cs := &candState{Candidate: c, target: s.nodes[i], spot: c.CapacityType == CapacityTypeSpot, pool: s.poolNamed(in.Nodes[i].NodePool)}
		var costed []Pod
		for j := range in.Nodes[i].Pods {
			p := &in.Nodes[i].Pods[j]
			if movable(p) {
				ps := s.newPodState(p)
				cs.pods = append(cs.pods, ps)
				costed = append(costed, *p)
			}
		}
		sort.SliceStable(cs.pods, func(a, b int) bool { return podLess(cs.pods[a], cs.pods[b]) })
		cs.cost = DisruptionCost(costed, c.LifetimeRemaining)
		capacity := in.Nodes[i].Capacity
		if capacity == nil {
			capacity = in.Nodes[i].Allocatable
		}
		cs.capVec = s.capacityVec(capacity)
		k.cands = append(k.cands, cs)
	}
	sort.SliceStable(k.cands, func(a, b int) bool {
		if k.cands[a].cost != k.cands[b].cost {
			return k.cands[a].cost < k.cands[b].cost
		}
		return k.cands[a].Node < k.cands[b].Node
	})
	k.snapshot()
	return k, nil
}

func checkShare(name string, v float64) error {
	if !(v >= 0 && v < 1) {
		return fmt.Errorf("consolidation: %s %v is not a share in [0, 1)", name, v)
	}
	return nil
}

// snapshot records the solver state trials change.
func (k *consolidator) snapshot() {
	s := k.s
	for _, t := range s.nodes {
		k.baseUsed = append(k.baseUsed, t.used.clone())
		k.basePorts = append(k.basePorts, len(t.ports))
	}
	k.baseTargets = len(s.targets)
	for _, g := range s.topo.groups {
		k.baseCounts = append(k.baseCounts, append([]int32(nil), g.counts...))
		k.baseOwners = append(k.baseOwners, append([]int32(nil), g.owners...))
		k.baseTotals = append(k.baseTotals, g.total)
	}
	for _, p := range s.pools {
		k.baseCommitted = append(k.baseCommitted, p.committed.clone())
	}
}

// restore puts back the state a trial changed: the nodes it touched (existing nodes only),
// topology counts, pool charges, claims.
func (k *consolidator) restore(touched []*target) {
	s := k.s
	for _, t := range touched {
		t.removed = false
		copy(t.used, k.baseUsed[t.id])
		t.ports = t.ports[:k.basePorts[t.id]]
		t.pods = t.pods[:0]
		s.nodeTree.update(t.id, t)
	}
	for i, g := range s.topo.groups {
		g.counts = append(g.counts[:0], k.baseCounts[i]...)
		g.owners = append(g.owners[:0], k.baseOwners[i]...)
		g.total = k.baseTotals[i]
	}
	for i, p := range s.pools {
		copy(p.committed, k.baseCommitted[i])
	}
	s.claims = s.claims[:0]
	s.targets = s.targets[:k.baseTargets]
	s.relaxations = s.relaxations[:0]
	clear(s.unplaced)
}

// charges lists the topology counts a candidate's pods hold (all of them: DaemonSet and
// mirror pods vanish with the node).
func (k *consolidator) charges(c *candState) []topoCharge {
	if c.charged {
		return c.uncount
	}
	s := k.s
	c.charged = true
	t := c.target
	for j := range t.node.Pods {
		p := &t.node.Pods[j]
		for _, g := range s.topo.groups {
			d, ok := s.existingDomain(t, g.space)
			if !ok {
				continue
			}
			if g.selects(p) {
				c.uncount = append(c.uncount, topoCharge{g: g, d: d})
			}
			if g.kind == kAnti && ownsAnti(p, g) {
				c.uncount = append(c.uncount, topoCharge{g: g, d: d, owner: true})
			}
		}
	}
	return c.uncount
}

// trial is the outcome of moving the pods of some candidates with at most one new claim.
type trial struct {
	ok    bool
	claim *target     // the new claim, if one was opened
	moved []*podState // every moved pod, placed
}

// consider removes the candidates and places their movable pods on the remaining nodes and at
// most one new claim; it returns the command that does so, or why not (when explain). The
// solver is restored afterwards.
func (k *consolidator) consider(cs []*candState, explain bool) (*Command, reject) {
	s := k.s
	touched := make([]*target, 0, len(cs)*2)
	var pods []*podState
	for _, c := range cs {
		c.target.removed = true
		s.nodeTree.update(c.target.id, c.target)
		touched = append(touched, c.target)
		for _, ch := range k.charges(c) {
			if ch.owner {
				ch.g.owners[ch.d]--
			} else {
				ch.g.counts[ch.d]--
				ch.g.total--
			}
		}
		if c.pool != nil {
			c.pool.committed.sub(c.capVec)
		}
		for _, ps := range c.pods {
			ps.relax, ps.target, ps.capped = ps.relax0, nil, false
			ps.shape = ps.shape0
			pods = append(pods, ps)
		}
	}
	if len(cs) > 1 {
		sort.SliceStable(pods, func(a, b int) bool { return podLess(pods[a], pods[b]) })
	}
	left := s.runQueue(pods)
	tr := trial{ok: len(left) == 0, moved: pods}
	if len(s.claims) > 0 {
		tr.claim = s.claims[0]
	}
	var cmd *Command
	var why reject
	if tr.ok {
		cmd, why = k.command(cs, tr)
	} else if explain {
		why = reject{RejectWouldNotFit, "pods would not fit: " + podName(left[0].pod) + ": " + k.whyNot(left[0])}
	}
	for _, ps := range pods {
		if ps.target != nil && ps.target.node != nil {
			touched = append(touched, ps.target)
		}
	}
	k.restore(touched)
	return cmd, why
}

// podName is namespace/name (the UID when the pod has no name).
func podName(p *Pod) string {
	name := p.Name
	if name == "" {
		name = p.UID
	}
	if p.Namespace == "" {
		return name
	}
	return p.Namespace + "/" + name
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// whyNot explains a pod that found no home: what the remaining nodes said, then the new claim.
func (k *consolidator) whyNot(ps *podState) string {
	s := k.s
	counts := map[string]int{}
	var order []string
	for _, t := range s.nodes {
		if t.removed {
			continue
		}
		ok, why := s.checkExisting(ps, t, true)
		if ok {
			why = "fits only without the other moved pods"
		}
		if why == "" {
			why = "node requirements not met"
		}
		if counts[why] == 0 {
			order = append(order, why)
		}
		counts[why]++
	}
	sort.SliceStable(order, func(a, b int) bool { return counts[order[a]] > counts[order[b]] })
	parts := make([]string, 0, len(order))
	for _, why := range order {
		parts = append(parts, fmt.Sprintf("%d %s", counts[why], why))
	}
	nodes := "no remaining node"
	if len(parts) > 0 {
		nodes = "no remaining node can take it (" + strings.Join(parts, ", ") + ")"
	}
	if ps.capped {
		return nodes + ", and it does not fit the one new node with the other moved pods"
	}
	return nodes + "; " + s.explain(ps)
}

// pass runs multi-node then single-node consolidation.
func (k *consolidator) pass() ConsolidationResult {
	var res ConsolidationResult
	if len(k.cands) == 0 {
		return res
	}
	remaining := map[string]int{}
	for name, n := range k.in.Allowed {
		remaining[name] = n
	}
	var multi []*candState
	var single []*candState
	for _, c := range k.cands {
		if n, ok := k.in.Allowed[c.NodePool]; ok && n <= 0 {
			res.Rejected = append(res.Rejected, Rejection{Node: c.Node, Cause: RejectBudget,
				Reason: fmt.Sprintf("budget allows no more disruptions of nodepool %s", c.NodePool)})
			continue
		}
		single = append(single, c)
		if n, ok := remaining[c.NodePool]; ok {
			if n <= 0 {
				continue
			}
			remaining[c.NodePool] = n - 1
		}
		if len(multi) < maxMultiNodeCandidates {
			multi = append(multi, c)
		}
	}
	if cmd := k.multiNode(multi); cmd != nil {
		res.Command = cmd
		return res
	}
	for _, c := range single {
		cmd, why := k.consider([]*candState{c}, true)
		if cmd != nil {
			res.Command = cmd
			return res
		}
		res.Rejected = append(res.Rejected, Rejection{Node: c.Node, Reason: why.why, Cause: why.cause})
	}
	return res
}

// multiNode binary-searches the largest prefix (at least two) that consolidates at once.
func (k *consolidator) multiNode(cands []*candState) *Command {
	if len(cands) < 2 {
		return nil
	}
	var best *Command
	lo, hi := 1, len(cands)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd, _ := k.consider(cands[:mid+1], false); cmd != nil {
			best, lo = cmd, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// command turns a successful trial into a delete, or a replace if the one new claim is cheap
// enough and allowed.
func (k *consolidator) command(cs []*candState, tr trial) (*Command, reject) {
	s := k.s
	price := 0.0
	allSpot, anySpot := true, false
	ms := 0.0
	for _, c := range cs {
		price += c.PriceUSDPerHour
		allSpot = allSpot && c.spot
		anySpot = anySpot || c.spot
		ms = max(ms, k.minSavings(c.NodePool))
	}
	cmd := &Command{}
	for _, c := range cs {
		cmd.Nodes = append(cmd.Nodes, c.Node)
	}
	for _, ps := range tr.moved {
		if ps.target.node != nil {
			cmd.Placements = append(cmd.Placements, Placement{PodUID: ps.pod.UID, Node: ps.target.name})
		}
	}
	subject := cs[0].Node
	their := "its"
	if len(cs) > 1 {
		subject, their = fmt.Sprintf("%d nodes", len(cs)), "their"
	}
	if tr.claim == nil {
		cmd.Kind = CommandDelete
		cmd.SavingsUSDPerHour = price
		if len(tr.moved) == 0 {
			cmd.Why = fmt.Sprintf("delete %s: no pods to move, saving %s", subject, money(price))
		} else {
			verb := "fit"
			if len(tr.moved) == 1 {
				verb = "fits"
			}
			cmd.Why = fmt.Sprintf("delete %s: %s %s %s on the remaining nodes, saving %s", subject, their, plural(len(tr.moved), "pod"), verb, money(price))
		}
		return cmd, reject{}
	}
	// A replacement.
	if anySpot && !k.in.SpotToSpot {
		return nil, reject{RejectSpot, "spot-to-spot consolidation is off (SpotToSpotConsolidation): a spot node is only deleted, and its pods need a new node"}
	}
	c := tr.claim
	spotBits, odBits := offeringBits(len(s.zones))
	mask := c.mask
	spotToSpot := false
	switch {
	case allSpot && mask&spotBits != 0:
		if len(cs) > 1 {
			return nil, reject{RejectSpot, "spot-to-spot replacement of several nodes is not done"}
		}
		mask &= spotBits
		spotToSpot = true
	case mask&spotBits != 0:
		// On-demand to spot: keep to spot, so a shortage of spot capacity fails the launch
		// rather than launching a dearer on-demand node.
		mask &= spotBits
	default:
		mask &= odBits
	}
	limit := price * (1 - ms)
	// Multi-node: a replacement of the same type as a removed node must be cheaper than that
	// node, else deleting the others would do.
	sameType := math.Inf(1)
	if len(cs) > 1 {
		c.options.each(func(i int) {
			for _, x := range cs {
				if s.types[i].t.Name == x.InstanceType {
					sameType = min(sameType, x.PriceUSDPerHour)
				}
			}
		})
	}
	kept := newBitset(len(s.types))
	best, bestType := math.Inf(1), ""
	var offered uint64
	c.options.each(func(i int) {
		launch, ok := worstPrice(&s.types[i], mask)
		if !ok {
			return
		}
		if launch < best {
			best, bestType = launch, s.types[i].t.Name
		}
		if launch < limit && launch < sameType {
			kept.set(i)
			offered |= s.types[i].offerMask
		}
	})
	if kept.empty() {
		switch {
		case best >= price:
			return nil, reject{RejectNoCheaper, fmt.Sprintf("no cheaper replacement (cheapest that fits: %s at %s, now %s)", bestType, money(best), money(price))}
		case best >= sameType:
			return nil, reject{RejectNoCheaper, "no cheaper replacement than keeping a node of the same type"}
		default:
			return nil, reject{RejectSavings, fmt.Sprintf("saving %s is below the %s threshold", pct((price-best)/price), pct(ms))}
		}
	}
	if !s.minValuesHold(c.pool, kept) {
		return nil, reject{RejectNoCheaper, "no cheaper replacement keeps the nodepool's minValues"}
	}
	maxTypes := s.in.MaxInstanceTypes
	if maxTypes <= 0 {
		maxTypes = 60
	}
	if spotToSpot {
		n := 0
		kept.each(func(int) { n++ })
		if n < minSpotToSpotTypes {
			return nil, reject{RejectSpot, fmt.Sprintf("spot-to-spot consolidation needs %d cheaper instance types, only %d fit", minSpotToSpotTypes, n)}
		}
		maxTypes = minSpotToSpotTypes
	}
	saveOpts, saveMask := c.options, c.mask
	c.options, c.mask = kept, mask&offered
	nc := s.nodeClaimOf(c, s.rankedOptionsN(c, maxTypes))
	c.options, c.mask = saveOpts, saveMask
	nc.Name = k.claimName()
	cmd.Kind = CommandReplace
	cmd.Replacement = &nc
	cmd.SavingsUSDPerHour = price - nc.PriceUSDPerHour
	types := nc.InstanceTypes[0]
	if len(nc.InstanceTypes) > 1 {
		types += " or " + plural(len(nc.InstanceTypes)-1, "other type")
	}
	verb := "move"
	if len(tr.moved) == 1 {
		verb = "moves"
	}
	cmd.Why = fmt.Sprintf("replace %s with one %s node (%s, %s): %s %s %s, %d to the new node, saving %s",
		subject, strings.Join(nc.CapacityTypes, "/"), types, money(nc.PriceUSDPerHour), their, plural(len(tr.moved), "pod"), verb, len(nc.PodUIDs), money(cmd.SavingsUSDPerHour))
	return cmd, reject{}
}

func (k *consolidator) minSavings(pool string) float64 {
	if v, ok := k.in.MinSavings[pool]; ok {
		return v
	}
	return k.in.DefaultMinSavings
}

func (k *consolidator) claimName() string {
	if k.in.NewID != nil {
		return k.in.NewID()
	}
	return "nodeclaim-00001"
}

// offeringBits are the spot and on-demand offering bits over n zones.
func offeringBits(n int) (spot, onDemand uint64) {
	for zi := 0; zi < n; zi++ {
		spot |= 1 << uint(zi*2+ctSpot)
		onDemand |= 1 << uint(zi*2+ctOnDemand)
	}
	return spot, onDemand
}

// worstPrice is the dearest offering of the type among mask: what a launch may cost.
func worstPrice(t *itype, mask uint64) (float64, bool) {
	m := mask & t.offerMask
	if m == 0 {
		return 0, false
	}
	worst := 0.0
	for b := 0; m != 0; b++ {
		if m&1 != 0 {
			worst = max(worst, t.prices[b])
		}
		m >>= 1
	}
	return worst, true
}

// money formats USD per hour: $0.33/h, $0.192/h.
func money(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimRight(s, "0")
	if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i < 3 {
		s += strings.Repeat("0", 3-(len(s)-i))
	}
	return "$" + s + "/h"
}

// pct formats a share as a percentage with at most one decimal: 3%, 9.7%.
func pct(v float64) string {
	s := strconv.FormatFloat(math.Round(v*1000)/10, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + "%"
}
