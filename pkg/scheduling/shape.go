package scheduling

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// podState is a pending pod during a solve.
type podState struct {
	pod    *Pod
	req    vec
	relax  relaxState
	shape  *shape
	target *target // where it was placed, nil while unplaced
	// capped: a new claim was wanted but the run's claim cap was reached.
	capped bool
	relax0 relaxState // before any relaxation: none, or every preference under Ignore
	shape0 *shape     // the shape at relax0
}

// relaxState counts the soft constraints dropped so far, in Karpenter's order.
type relaxState struct {
	reqTerm  int  // which ORed required node affinity term is in force
	prefAff  int  // preferred pod affinity terms dropped, heaviest first
	prefAnti int  // preferred pod anti-affinity terms dropped, heaviest first
	prefNode int  // preferred node affinity terms dropped, heaviest first
	anyway   int  // ScheduleAnyway spreads dropped, in order
	tolPNS   bool // PreferNoSchedule taints tolerated
}

// shape is everything about a pod (at its current relaxation) that decides where it may go.
// Pods with equal shapes share it, so compatibility is computed once per shape.
type shape struct {
	id       int32
	err      error
	reqs     Requirements // node requirements, all keys
	creqs    Requirements // without zone and capacity type (claims keep those as offering bits)
	mask     uint64       // offerings the pod allows
	typeBits bitset
	tols     []Toleration
	tolPNS   bool
	owned    []groupUse // topology terms in force, sorted by key
	selected []*tgroup  // groups whose selector matches the pod
	inverse  []*tgroup  // anti-affinity groups whose selector matches the pod
	checks   []groupCheck
	ports    []HostPort
	hasTopo  bool
}

// groupUse is one topology term a pod owns, with the domains its node requirements allow.
type groupUse struct {
	g        *tgroup
	self     bool  // the pod matches the group's selector
	eligible []int // domain ids the pod's requirements allow (nil for hostname)
	required bool  // a required anti-affinity term: placed, the pod owns the group's domains
}

// nodeRequirements is the pod's node requirements at a relaxation: nodeSelector, one required
// node affinity term, the heaviest preferred node affinity term still in force, volume needs.
func nodeRequirements(p *Pod, rs relaxState) (Requirements, error) {
	var all []Requirement
	for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
		all = append(all, Requirement{Key: k, Operator: OpIn, Values: []string{p.NodeSelector[k]}})
	}
	if rs.reqTerm < len(p.RequiredNodeAffinity) {
		all = append(all, p.RequiredNodeAffinity[rs.reqTerm].Requirements...)
	}
	if pref := sortedPreferredNode(p); rs.prefNode < len(pref) {
		all = append(all, pref[rs.prefNode].Term.Requirements...)
	}
	all = append(all, p.VolumeRequirements...)
	return NewRequirements(all...)
}

func sortedPreferredNode(p *Pod) []PreferredNodeSelectorTerm {
	out := append([]PreferredNodeSelectorTerm(nil), p.PreferredNodeAffinity...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Weight > out[b].Weight })
	return out
}

func sortedPreferredPod(terms []WeightedPodAffinityTerm) []WeightedPodAffinityTerm {
	out := append([]WeightedPodAffinityTerm(nil), terms...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].Weight > out[b].Weight })
	return out
}

// topologyTerms lists the pod's topology terms in force at a relaxation.
func topologyTerms(p *Pod, rs relaxState) []termSpec {
	var out []termSpec
	for _, t := range p.PodAffinity.Required {
		out = append(out, affinityTerm(p, kAffinity, t))
	}
	for _, t := range sortedPreferredPod(p.PodAffinity.Preferred)[min(rs.prefAff, len(p.PodAffinity.Preferred)):] {
		out = append(out, affinityTerm(p, kAffinity, t.Term))
	}
	for _, t := range p.PodAntiAffinity.Required {
		spec := affinityTerm(p, kAnti, t)
		spec.required = true
		out = append(out, spec)
	}
	for _, t := range sortedPreferredPod(p.PodAntiAffinity.Preferred)[min(rs.prefAnti, len(p.PodAntiAffinity.Preferred)):] {
		out = append(out, affinityTerm(p, kAnti, t.Term))
	}
	anyway := 0
	for _, c := range p.TopologySpread {
		if c.WhenUnsatisfiable == ScheduleAnyway {
			anyway++
			if anyway <= rs.anyway {
				continue
			}
		}
		out = append(out, termSpec{kind: kSpread, key: c.TopologyKey, namespaces: []string{p.Namespace},
			selector: c.LabelSelector, maxSkew: max(c.MaxSkew, 1), minDomains: max(c.MinDomains, 1)})
	}
	return out
}

func affinityTerm(p *Pod, k gkind, t PodAffinityTerm) termSpec {
	ns := t.Namespaces
	if len(ns) == 0 {
		ns = []string{p.Namespace}
	}
	return termSpec{kind: k, key: t.TopologyKey, namespaces: ns, selector: t.LabelSelector}
}

// compilePods builds topology groups from every term any pod (pending or extra) may use, then
// each pending pod's shape,
// and sorts pods: larger requests first, then older, then by UID.
func (s *solver) compilePods(extra []*Pod) error {
	var specs []termSpec
	for i := range s.in.Pods {
		specs = append(specs, topologyTerms(&s.in.Pods[i], relaxState{})...)
	}
	for _, p := range extra {
		specs = append(specs, topologyTerms(p, relaxState{})...)
	}
	for i := range s.in.Nodes {
		for j := range s.in.Nodes[i].Pods {
			p := &s.in.Nodes[i].Pods[j]
			for _, t := range p.PodAntiAffinity.Required {
				specs = append(specs, affinityTerm(p, kAnti, t))
			}
		}
	}
	var err error
	if s.topo, err = s.newTopology(specs); err != nil {
		return fmt.Errorf("compiling topology: %w", err)
	}
	for i := range s.in.Pods {
		p := &s.in.Pods[i]
		if p.UID == "" {
			return fmt.Errorf("compiling pod %s/%s: empty UID", p.Namespace, p.Name)
		}
		s.pods = append(s.pods, s.newPodState(p))
	}
	sort.SliceStable(s.pods, func(a, b int) bool { return podLess(s.pods[a], s.pods[b]) })
	return nil
}

// podLess is the total order: requests descending (cpu, memory, then the rest), then
// creation time, then UID.
func podLess(a, b *podState) bool {
	for i := range a.req {
		if a.req[i] != b.req[i] {
			return a.req[i] > b.req[i]
		}
	}
	if !a.pod.CreationTime.Equal(b.pod.CreationTime) {
		return a.pod.CreationTime.Before(b.pod.CreationTime)
	}
	return a.pod.UID < b.pod.UID
}

// shapeFor finds or builds the shape of a pod at its current relaxation.
func (s *solver) shapeFor(ps *podState) *shape {
	p := ps.pod
	reqs, reqErr := nodeRequirements(p, ps.relax)
	terms := topologyTerms(p, ps.relax)
	selected := s.topo.selecting(p)

	var b strings.Builder
	b.WriteString(reqs.key())
	if reqErr != nil {
		b.WriteString("!err:" + reqErr.Error())
	}
	fmt.Fprintf(&b, "|%v|", ps.relax.tolPNS)
	for _, t := range p.Tolerations {
		fmt.Fprintf(&b, "%s/%s/%s/%s,", t.Key, t.Operator, t.Value, t.Effect)
	}
	b.WriteByte('|')
	owned := make([]*tgroup, 0, len(terms))
	for _, t := range terms {
		g := s.topo.byKey[t.groupKey()]
		owned = append(owned, g)
		fmt.Fprintf(&b, "%d,", g.id)
		if t.required {
			b.WriteString("r,")
		}
	}
	b.WriteByte('|')
	for _, g := range selected {
		fmt.Fprintf(&b, "%d,", g.id)
	}
	b.WriteByte('|')
	for _, hp := range p.HostPorts {
		fmt.Fprintf(&b, "%s/%s/%d,", hp.HostIP, hp.Protocol, hp.Port)
	}
	key := b.String()
	if sh, ok := s.shapes[key]; ok {
		return sh
	}
	sh := &shape{id: int32(len(s.shapeList)), err: reqErr, reqs: reqs, creqs: stripOffering(reqs),
		mask: s.maskOf(reqs), tols: p.Tolerations, tolPNS: ps.relax.tolPNS, selected: selected,
		ports: p.HostPorts}
	sh.typeBits = s.typeBits(sh.creqs)
	for _, g := range selected {
		if g.kind == kAnti {
			sh.inverse = append(sh.inverse, g)
		}
	}
	for i, g := range owned {
		use := groupUse{g: g, self: containsGroup(selected, g), required: terms[i].required}
		if !g.space.hostname {
			use.eligible = s.topo.eligible(g.space, reqs)
		}
		sh.owned = append(sh.owned, use)
	}
	sort.SliceStable(sh.owned, func(a, b int) bool { return sh.owned[a].g.key < sh.owned[b].g.key })
	sh.checks = buildChecks(sh)
	sh.hasTopo = len(sh.checks) > 0
	s.shapes[key] = sh
	s.shapeList = append(s.shapeList, sh)
	return sh
}

func containsGroup(gs []*tgroup, g *tgroup) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// relax drops the next soft constraint in Karpenter's order and describes it; "" when there
// is nothing left to drop.
func (s *solver) relax(ps *podState) string {
	p, rs := ps.pod, &ps.relax
	desc := ""
	switch {
	case rs.reqTerm < len(p.RequiredNodeAffinity)-1:
		rs.reqTerm++
		desc = fmt.Sprintf("removed required node affinity term %d of %d, trying the next", rs.reqTerm, len(p.RequiredNodeAffinity))
	case rs.prefAff < len(p.PodAffinity.Preferred):
		t := sortedPreferredPod(p.PodAffinity.Preferred)[rs.prefAff]
		rs.prefAff++
		desc = fmt.Sprintf("removed preferred pod affinity term (weight %d, topology key %s)", t.Weight, t.Term.TopologyKey)
	case rs.prefAnti < len(p.PodAntiAffinity.Preferred):
		t := sortedPreferredPod(p.PodAntiAffinity.Preferred)[rs.prefAnti]
		rs.prefAnti++
		desc = fmt.Sprintf("removed preferred pod anti-affinity term (weight %d, topology key %s)", t.Weight, t.Term.TopologyKey)
	case rs.prefNode < len(p.PreferredNodeAffinity):
		t := sortedPreferredNode(p)[rs.prefNode]
		rs.prefNode++
		desc = fmt.Sprintf("removed preferred node affinity term (weight %d: %s)", t.Weight, describeTerm(t.Term))
	case rs.anyway < countAnyway(p):
		rs.anyway++
		desc = fmt.Sprintf("removed ScheduleAnyway topology spread %d on %s", rs.anyway, nthAnyway(p, rs.anyway).TopologyKey)
	case !rs.tolPNS && s.anyPreferNoSchedule():
		rs.tolPNS = true
		desc = "tolerated PreferNoSchedule taints"
	default:
		return ""
	}
	ps.shape = s.shapeFor(ps)
	return desc
}

func describeTerm(t NodeSelectorTerm) string {
	parts := make([]string, len(t.Requirements))
	for i, r := range t.Requirements {
		parts[i] = fmt.Sprintf("%s %s %v", r.Key, r.Operator, r.Values)
	}
	return strings.Join(parts, ", ")
}

func countAnyway(p *Pod) int {
	n := 0
	for _, c := range p.TopologySpread {
		if c.WhenUnsatisfiable == ScheduleAnyway {
			n++
		}
	}
	return n
}

func nthAnyway(p *Pod, n int) TopologySpreadConstraint {
	for _, c := range p.TopologySpread {
		if c.WhenUnsatisfiable == ScheduleAnyway {
			if n--; n == 0 {
				return c
			}
		}
	}
	return TopologySpreadConstraint{}
}

// anyPreferNoSchedule reports whether any pool or node has a PreferNoSchedule taint (worked out
// once: neither changes during a solve).
func (s *solver) anyPreferNoSchedule() bool {
	if s.pns == 0 {
		s.pns = 2
		if s.findPreferNoSchedule() {
			s.pns = 1
		}
	}
	return s.pns == 1
}

func (s *solver) findPreferNoSchedule() bool {
	for _, p := range s.pools {
		for _, t := range p.np.Taints {
			if t.Effect == EffectPreferNoSchedule {
				return true
			}
		}
	}
	for _, n := range s.nodes {
		for _, t := range n.taints {
			if t.Effect == EffectPreferNoSchedule {
				return true
			}
		}
	}
	return false
}
