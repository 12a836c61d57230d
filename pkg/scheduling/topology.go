package scheduling

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// gkind is the kind of a topology group.
type gkind int8

const (
	kSpread gkind = iota
	kAffinity
	kAnti
)

func (k gkind) String() string {
	return [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[k]
}

// termSpec is one topology term as a pod states it.
type termSpec struct {
	kind       gkind
	key        string
	namespaces []string
	selector   *LabelSelector
	maxSkew    int32
	minDomains int32
	// required: a required anti-affinity term, whose owners keep the pods it selects out of
	// their domains; a preferred one binds only its own pod (Karpenter tracks the inverse of
	// required anti-affinity only). Not part of the group's key.
	required bool
}

func (t termSpec) groupKey() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%s|%s|", t.kind, t.key, strings.Join(sortedUnique(t.namespaces), ","))
	if t.selector == nil {
		b.WriteString("nil")
	} else {
		sel, _ := selectorRequirements(t.selector)
		b.WriteString(sel.key())
	}
	fmt.Fprintf(&b, "|%d|%d", t.maxSkew, t.minDomains)
	return b.String()
}

func selectorRequirements(sel *LabelSelector) (Requirements, error) {
	var reqs []Requirement
	for k, v := range sel.MatchLabels {
		reqs = append(reqs, Requirement{Key: k, Operator: OpIn, Values: []string{v}})
	}
	reqs = append(reqs, sel.MatchExpressions...)
	return NewRequirements(reqs...)
}

// tgroup counts, per domain of its key, the pods its selector matches (and, for
// anti-affinity, the pods that own the term).
type tgroup struct {
	id         int
	kind       gkind
	key        string
	namespaces []string
	sel        Requirements
	selNil     bool
	maxSkew    int32
	minDomains int32
	space      *domainSpace
	counts     []int32
	owners     []int32
	total      int32
}

func (g *tgroup) count(d int) int32 {
	if d < len(g.counts) {
		return g.counts[d]
	}
	return 0
}

func (g *tgroup) ownerCount(d int) int32 {
	if d < len(g.owners) {
		return g.owners[d]
	}
	return 0
}

func bump(xs []int32, d int) []int32 {
	for len(xs) <= d {
		xs = append(xs, 0)
	}
	xs[d]++
	return xs
}

// selects reports whether the group's selector matches a pod.
func (g *tgroup) selects(p *Pod) bool {
	if g.selNil {
		return false
	}
	i := sort.SearchStrings(g.namespaces, p.Namespace)
	if i == len(g.namespaces) || g.namespaces[i] != p.Namespace {
		return false
	}
	return g.sel.Matches(p.Labels)
}

func (g *tgroup) describe() string {
	switch g.kind {
	case kSpread:
		return fmt.Sprintf("topology spread on %s (maxSkew %d)", g.key, g.maxSkew)
	default:
		return fmt.Sprintf("%s on %s", g.kind, g.key)
	}
}

// domainSpace numbers the domains of one topology key. Hostname domains are target ids.
type domainSpace struct {
	key      string
	hostname bool
	values   []string
	ids      map[string]int
}

type topology struct {
	groups   []*tgroup
	byKey    map[string]*tgroup
	spaces   map[string]*domainSpace
	selCache map[string][]*tgroup
}

// newTopology builds a group for every distinct term, numbers the domains of every key they
// use, and counts the pods already on existing nodes.
func (s *solver) newTopology(specs []termSpec) (*topology, error) {
	tp := &topology{byKey: map[string]*tgroup{}, spaces: map[string]*domainSpace{}, selCache: map[string][]*tgroup{}}
	for _, t := range specs {
		k := t.groupKey()
		if _, ok := tp.byKey[k]; ok {
			continue
		}
		g := &tgroup{id: len(tp.groups), kind: t.kind, key: t.key, namespaces: sortedUnique(t.namespaces),
			maxSkew: t.maxSkew, minDomains: t.minDomains, selNil: t.selector == nil}
		if t.selector != nil {
			sel, err := selectorRequirements(t.selector)
			if err != nil {
				return nil, fmt.Errorf("compiling label selector for %s: %w", t.key, err)
			}
			g.sel = sel
		}
		g.space = tp.space(s, t.key)
		tp.byKey[k] = g
		tp.groups = append(tp.groups, g)
	}
	// Count pods already running or nominated. Required pod affinity is anchored by the placed
	// pods alone once the group has any: kube-scheduler admits a pod only where a placed pod of
	// the group is, so domains held only by nominations (an earlier plan kube-scheduler did not
	// follow) would attract pods it never binds. A group with no placed pod follows its
	// nominations, to stay together.
	placed := make([][]int32, len(tp.groups))
	for _, n := range s.nodes {
		for j := range n.node.Pods {
			p := &n.node.Pods[j]
			for _, g := range tp.groups {
				d, ok := s.existingDomain(n, g.space)
				if !ok {
					continue
				}
				if g.selects(p) {
					g.counts = bump(g.counts, d)
					g.total++
					if !p.Nominated {
						placed[g.id] = bump(placed[g.id], d)
					}
				}
				if g.kind == kAnti && ownsAnti(p, g) {
					g.owners = bump(g.owners, d)
				}
			}
		}
	}
	for _, g := range tp.groups {
		if g.kind != kAffinity || len(placed[g.id]) == 0 {
			continue
		}
		g.counts, g.total = placed[g.id], 0
		for _, c := range g.counts {
			g.total += c
		}
	}
	return tp, nil
}

// ownsAnti reports whether an existing pod carries the group's required anti-affinity term.
func ownsAnti(p *Pod, g *tgroup) bool {
	for _, t := range p.PodAntiAffinity.Required {
		if affinityTerm(p, kAnti, t).groupKey() == groupKeyOf(g) {
			return true
		}
	}
	return false
}

func groupKeyOf(g *tgroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%s|%s|", g.kind, g.key, strings.Join(g.namespaces, ","))
	if g.selNil {
		b.WriteString("nil")
	} else {
		b.WriteString(g.sel.key())
	}
	fmt.Fprintf(&b, "|%d|%d", g.maxSkew, g.minDomains)
	return b.String()
}

// space numbers the domains of a key: the zones and capacity types the pools can offer, the
// values pools and types can take, and the labels of existing nodes.
func (tp *topology) space(s *solver, key string) *domainSpace {
	if sp, ok := tp.spaces[key]; ok {
		return sp
	}
	sp := &domainSpace{key: key, hostname: key == LabelHostname, ids: map[string]int{}}
	tp.spaces[key] = sp
	if sp.hostname {
		return sp
	}
	vals := map[string]bool{}
	var reach uint64
	for _, p := range s.pools {
		p.typeBits.each(func(i int) { reach |= s.types[i].offerMask & p.mask })
		if set, ok := p.reqs.get(key); ok {
			if vs, fin := set.finite(); fin {
				for _, v := range vs {
					vals[v] = true
				}
			}
		}
		if isTypeLabel(key) {
			p.typeBits.each(func(i int) {
				if v, ok := s.types[i].t.Labels[key]; ok {
					vals[v] = true
				}
			})
		}
	}
	for zi, z := range s.zones {
		for ci, c := range capacityTypes {
			if reach&(1<<uint(zi*2+ci)) != 0 {
				switch key {
				case LabelZone:
					vals[z] = true
				case LabelCapacityType:
					vals[c] = true
				}
			}
		}
	}
	for i := range s.in.Nodes {
		if v, ok := s.in.Nodes[i].Labels[key]; ok {
			vals[v] = true
		}
	}
	sp.values = slices.Sorted(maps.Keys(vals))
	for i, v := range sp.values {
		sp.ids[v] = i
	}
	return sp
}

// eligible lists the domains a pod's node requirements allow.
func (tp *topology) eligible(sp *domainSpace, reqs Requirements) []int {
	set, ok := reqs.get(sp.key)
	out := []int{}
	for i, v := range sp.values {
		if !ok || set.has(v) {
			out = append(out, i)
		}
	}
	return out
}

// selecting lists the groups whose selectors match a pod, cached by namespace and labels.
func (tp *topology) selecting(p *Pod) []*tgroup {
	keys := make([]string, 0, len(p.Labels))
	for k, v := range p.Labels {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	ck := p.Namespace + "|" + strings.Join(keys, ",")
	if gs, ok := tp.selCache[ck]; ok {
		return gs
	}
	var gs []*tgroup
	for _, g := range tp.groups {
		if g.selects(p) {
			gs = append(gs, g)
		}
	}
	tp.selCache[ck] = gs
	return gs
}

// existingDomain is the domain of an existing node for a key.
func (s *solver) existingDomain(t *target, sp *domainSpace) (int, bool) {
	if sp.hostname {
		return t.id, true
	}
	v, ok := t.labels[sp.key]
	if !ok {
		return 0, false
	}
	d, ok := sp.ids[v]
	return d, ok
}
