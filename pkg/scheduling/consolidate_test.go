package scheduling

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Fixtures for consolidation: nodes built from a catalog type, and candidates priced from it.

func typeNamed(types []InstanceType, name string) *InstanceType {
	for i := range types {
		if types[i].Name == name {
			return &types[i]
		}
	}
	panic("no instance type " + name)
}

func offeringPrice(it *InstanceType, zone, ct string) float64 {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == ct {
			return o.PriceUSDPerHour
		}
	}
	panic(fmt.Sprintf("%s has no %s offering in %s", it.Name, ct, zone))
}

// nodeOf is a registered node of a type in a pool, carrying the labels Karpenter's nodes carry.
func nodeOf(name string, pool *NodePool, it *InstanceType, zone, ct string, pods ...Pod) Node {
	labels := map[string]string{LabelZone: zone, LabelCapacityType: ct, LabelHostname: name}
	for k, v := range it.Labels {
		labels[k] = v
	}
	if pool != nil {
		labels[LabelNodePool] = pool.Name
		for k, v := range pool.Labels {
			labels[k] = v
		}
	}
	n := Node{Name: name, Labels: labels, Allocatable: it.Allocatable(), Capacity: it.Capacity, Pods: pods}
	if pool != nil {
		n.NodePool = pool.Name
		n.Taints = pool.Taints
	}
	return n
}

// candidateOf makes every given node a candidate, priced from its type's offering.
func candidatesOf(types []InstanceType, nodes []Node, names ...string) []Candidate {
	var out []Candidate
	for _, n := range nodes {
		if len(names) > 0 && !slices.Contains(names, n.Name) {
			continue
		}
		it := typeNamed(types, n.Labels[LabelInstanceType])
		ct, z := n.Labels[LabelCapacityType], n.Labels[LabelZone]
		out = append(out, Candidate{Node: n.Name, NodePool: n.NodePool, InstanceType: it.Name, CapacityType: ct,
			Zone: z, PriceUSDPerHour: offeringPrice(it, z, ct), LifetimeRemaining: 1})
	}
	return out
}

func consolidate(t *testing.T, in ConsolidationInput) ConsolidationResult {
	t.Helper()
	res, err := Consolidate(in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Command != nil {
		checkCommand(t, in, *res.Command)
	}
	return res
}

// wantNoCommand fails the test if the consolidator found a command.
func wantNoCommand(t *testing.T, res ConsolidationResult) {
	t.Helper()
	if res.Command != nil {
		t.Fatalf("want no command, got %+v", res.Command)
	}
}

func rejection(res ConsolidationResult, node string) string {
	for _, r := range res.Rejected {
		if r.Node == node {
			return r.Reason
		}
	}
	return ""
}

// checkCommand verifies a command independently of the consolidator: the removed nodes are
// candidates, every movable pod on them goes somewhere exactly once, the outcome (remaining
// nodes plus the replacement claim) holds every constraint as checkPlan sees it, a fresh solve
// of the moved pods leaves none unschedulable, and the price arithmetic adds up.
func checkCommand(t *testing.T, in ConsolidationInput, cmd Command) {
	t.Helper()
	cands := map[string]Candidate{}
	for _, c := range in.Candidates {
		cands[c.Node] = c
	}
	removed := map[string]bool{}
	price := 0.0
	for _, n := range cmd.Nodes {
		c, ok := cands[n]
		if !ok {
			t.Fatalf("command removes %s, not a candidate", n)
		}
		removed[n] = true
		price += c.PriceUSDPerHour
	}
	after := Input{NodePools: in.NodePools, InstanceTypes: in.InstanceTypes, DaemonSets: in.DaemonSets, Unavailable: in.Unavailable}
	for _, n := range in.Nodes {
		if !removed[n.Name] {
			after.Nodes = append(after.Nodes, n)
			continue
		}
		for _, p := range n.Pods {
			if movable(&p) {
				after.Pods = append(after.Pods, p)
			}
		}
	}
	plan := Plan{Placements: cmd.Placements}
	for _, pl := range cmd.Placements {
		if removed[pl.Node] {
			t.Fatalf("pod %s placed on %s, which the command removes", pl.PodUID, pl.Node)
		}
	}
	switch cmd.Kind {
	case CommandDelete:
		if cmd.Replacement != nil {
			t.Fatal("delete with a replacement")
		}
		if math.Abs(cmd.SavingsUSDPerHour-price) > 1e-9 {
			t.Fatalf("delete saves %v, nodes cost %v", cmd.SavingsUSDPerHour, price)
		}
	case CommandReplace:
		r := cmd.Replacement
		if r == nil || len(r.PodUIDs) == 0 {
			t.Fatalf("replace without a replacement for pods: %+v", cmd)
		}
		plan.NodeClaims = []NodeClaim{*r}
		if math.Abs(cmd.SavingsUSDPerHour-(price-r.PriceUSDPerHour)) > 1e-9 || cmd.SavingsUSDPerHour <= 0 {
			t.Fatalf("replace saves %v: nodes %v, replacement %v", cmd.SavingsUSDPerHour, price, r.PriceUSDPerHour)
		}
		// Every option at every allowed offering is cheaper than the nodes it replaces.
		for _, name := range r.InstanceTypes {
			it := typeNamed(in.InstanceTypes, name)
			for _, o := range it.Offerings {
				if slices.Contains(r.Zones, o.Zone) && slices.Contains(r.CapacityTypes, o.CapacityType) && o.PriceUSDPerHour >= price {
					t.Fatalf("option %s %s/%s costs %v, not below %v", name, o.CapacityType, o.Zone, o.PriceUSDPerHour, price)
				}
			}
		}
	default:
		t.Fatalf("command kind %q", cmd.Kind)
	}
	checkPlan(t, after, plan)
	resolved, err := Solve(after)
	if err != nil {
		t.Fatal(err)
	}
	if len(resolved.Unschedulable) > 0 {
		t.Fatalf("re-solving the moved pods leaves %s unschedulable: %s", resolved.Unschedulable[0].PodUID, resolved.Unschedulable[0].Reason)
	}
	if cmd.Why == "" {
		t.Fatal("command without a why")
	}
}

func TestConsolidate(t *testing.T) {
	types := smallCatalog()
	def := classicPool("default")
	spotPool := NodePool{Name: "default", Requirements: []Requirement{{Key: LabelCapacityType, Operator: OpIn, Values: []string{CapacityTypeSpot, CapacityTypeOnDemand}}}}
	c5x4 := typeNamed(types, "c5.4x")
	c5x8 := typeNamed(types, "c5.8x")
	od := CapacityTypeOnDemand
	input := func(pools []NodePool, nodes ...Node) ConsolidationInput {
		return ConsolidationInput{Input: Input{NodePools: pools, InstanceTypes: types, Nodes: nodes}}
	}
	web := func(uid string) Pod { return pod(uid, labelled("app", "web")) }
	antiWeb := func(uid string) Pod {
		return pod(uid, labelled("app", "web"), func(p *Pod) {
			p.PodAntiAffinity.Required = []PodAffinityTerm{{TopologyKey: LabelHostname, LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		})
	}
	ds := func(uid string) Pod {
		return pod(uid, func(p *Pod) {
			p.Owner = OwnerReference{Kind: "DaemonSet", Name: "agent"}
			p.Requests[ResourceCPU] = 100
		})
	}

	tests := []struct {
		name  string
		in    func() ConsolidationInput
		check func(t *testing.T, in ConsolidationInput, res ConsolidationResult)
	}{
		{"delete when pods fit elsewhere", func() ConsolidationInput {
			in := input([]NodePool{def}, nodeOf("a", &def, c5x4, "z1", od, pod("a1")), nodeOf("b", &def, c5x4, "z1", od, pod("b1")))
			in.Candidates = candidatesOf(types, in.Nodes, "a")
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			cmd := res.Command
			if cmd == nil || cmd.Kind != CommandDelete || !reflect.DeepEqual(cmd.Nodes, []string{"a"}) {
				t.Fatalf("want delete a, got %+v (rejected %v)", cmd, res.Rejected)
			}
			if !reflect.DeepEqual(cmd.Placements, []Placement{{PodUID: "a1", Node: "b"}}) {
				t.Fatalf("placements %v", cmd.Placements)
			}
			if !strings.Contains(cmd.Why, "delete a: its 1 pod fits on the remaining nodes, saving $") {
				t.Fatalf("why %q", cmd.Why)
			}
		}},
		{"replace with a cheaper type", func() ConsolidationInput {
			in := input([]NodePool{def}, nodeOf("a", &def, c5x8, "z1", od, pod("a1"), pod("a2")))
			in.Candidates = candidatesOf(types, in.Nodes)
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			cmd := res.Command
			if cmd == nil || cmd.Kind != CommandReplace {
				t.Fatalf("want replace, got %+v (rejected %v)", cmd, res.Rejected)
			}
			r := cmd.Replacement
			if got := append([]string(nil), r.PodUIDs...); !reflect.DeepEqual(sorted(got), []string{"a1", "a2"}) {
				t.Fatalf("replacement pods %v", r.PodUIDs)
			}
			if len(cmd.Placements) != 0 {
				t.Fatalf("placements %v", cmd.Placements)
			}
			if slices.Contains(r.InstanceTypes, "c5.8x") {
				t.Fatalf("replacement may be the same type: %v", r.InstanceTypes)
			}
			if r.PriceUSDPerHour >= in.Candidates[0].PriceUSDPerHour {
				t.Fatalf("replacement %v not cheaper than %v", r.PriceUSDPerHour, in.Candidates[0].PriceUSDPerHour)
			}
		}},
		{"multi-node 2 to 1", func() ConsolidationInput {
			in := input([]NodePool{def},
				nodeOf("a", &def, c5x4, "z1", od, pod("a1"), pod("a2")),
				nodeOf("b", &def, c5x4, "z1", od, pod("b1"), pod("b2")))
			in.Candidates = candidatesOf(types, in.Nodes)
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			cmd := res.Command
			if cmd == nil || cmd.Kind != CommandReplace || !reflect.DeepEqual(sorted(cmd.Nodes), []string{"a", "b"}) {
				t.Fatalf("want a and b replaced, got %+v (rejected %v)", cmd, res.Rejected)
			}
			if !reflect.DeepEqual(sorted(cmd.Replacement.PodUIDs), []string{"a1", "a2", "b1", "b2"}) {
				t.Fatalf("replacement pods %v", cmd.Replacement.PodUIDs)
			}
			if !strings.HasPrefix(cmd.Why, "replace 2 nodes with one on-demand node") {
				t.Fatalf("why %q", cmd.Why)
			}
		}},
		{"min savings threshold", func() ConsolidationInput {
			in := input([]NodePool{def}, nodeOf("a", &def, c5x8, "z1", od, pod("a1")))
			in.Candidates = candidatesOf(types, in.Nodes)
			// The cheapest type for one 1-CPU pod under the defaults is c6.2x (c6.1x's
			// allocatable is under 1 CPU); price the candidate 3% above it.
			cheapest := offeringPrice(typeNamed(types, "c6.2x"), "z1", od)
			in.Candidates[0].PriceUSDPerHour = cheapest / 0.97
			in.MinSavings = map[string]float64{"default": 0.10}
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			wantNoCommand(t, res)
			if got := rejection(res, "a"); got != "saving 3% is below the 10% threshold" {
				t.Fatalf("rejection %q", got)
			}
			in.MinSavings["default"] = 0.02
			if res := consolidate(t, in); res.Command == nil || res.Command.Kind != CommandReplace {
				t.Fatalf("a 2%% threshold should allow the 3%% saving: %+v", res)
			}
		}},
		{"spot candidate not replaced without the gate", func() ConsolidationInput {
			in := input([]NodePool{spotPool}, nodeOf("a", &spotPool, typeNamed(types, "m5.16x"), "z1", CapacityTypeSpot, pod("a1")))
			in.Candidates = candidatesOf(types, in.Nodes)
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			wantNoCommand(t, res)
			if got := rejection(res, "a"); !strings.Contains(got, "spot-to-spot consolidation is off (SpotToSpotConsolidation)") {
				t.Fatalf("rejection %q", got)
			}
			in.SpotToSpot = true
			res = consolidate(t, in)
			cmd := res.Command
			if cmd == nil || cmd.Kind != CommandReplace {
				t.Fatalf("with the gate, want replace, got %+v (rejected %v)", cmd, res.Rejected)
			}
			if len(cmd.Replacement.InstanceTypes) != 15 || !reflect.DeepEqual(cmd.Replacement.CapacityTypes, []string{CapacityTypeSpot}) {
				t.Fatalf("want 15 spot options, got %v %v", cmd.Replacement.InstanceTypes, cmd.Replacement.CapacityTypes)
			}
		}},
		{"spot to spot needs 15 cheaper types", func() ConsolidationInput {
			in := input([]NodePool{spotPool}, nodeOf("a", &spotPool, typeNamed(types, "c6.4x"), "z1", CapacityTypeSpot, pod("a1")))
			in.Candidates = candidatesOf(types, in.Nodes)
			in.SpotToSpot = true
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			wantNoCommand(t, res)
			if got := rejection(res, "a"); !strings.Contains(got, "spot-to-spot consolidation needs 15 cheaper instance types, only ") {
				t.Fatalf("rejection %q", got)
			}
		}},
		{"on-demand replaced by spot when the pool allows it", func() ConsolidationInput {
			in := input([]NodePool{spotPool}, nodeOf("a", &spotPool, c5x4, "z1", od, pod("a1")))
			in.Candidates = candidatesOf(types, in.Nodes)
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			if res.Command == nil || !reflect.DeepEqual(res.Command.Replacement.CapacityTypes, []string{CapacityTypeSpot}) {
				t.Fatalf("want a spot replacement, got %+v", res.Command)
			}
		}},
		{"hostname anti-affinity keeps the pod", func() ConsolidationInput {
			in := input(nil, nodeOf("a", &def, c5x4, "z1", od, antiWeb("web-1")), nodeOf("b", &def, c5x4, "z1", od, web("web-2")))
			in.Candidates = candidatesOf(types, in.Nodes, "a")
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			wantNoCommand(t, res)
			want := "pods would not fit: default/web-1: no remaining node can take it (1 would violate pod anti-affinity on kubernetes.io/hostname)"
			if got := rejection(res, "a"); !strings.HasPrefix(got, want) {
				t.Fatalf("rejection %q, want prefix %q", got, want)
			}
		}},
		{"zone spread keeps the pod", func() ConsolidationInput {
			spread := func(uid string) Pod {
				return pod(uid, labelled("app", "s"), func(p *Pod) {
					p.TopologySpread = []TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: LabelZone, WhenUnsatisfiable: DoNotSchedule,
						LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "s"}}}}
				})
			}
			in := input(nil, nodeOf("a", &def, c5x4, "z1", od, spread("s-1")), nodeOf("b", &def, c5x4, "z2", od, spread("s-2")),
				nodeOf("c", &def, c5x4, "z3", od, spread("s-3")), nodeOf("d", &def, c5x4, "z2", od))
			in.Candidates = candidatesOf(types, in.Nodes, "a")
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			wantNoCommand(t, res)
			if got := rejection(res, "a"); !strings.Contains(got, "pods would not fit: default/s-1: ") || !strings.Contains(got, "would violate topology spread on topology.kubernetes.io/zone") {
				t.Fatalf("rejection %q", got)
			}
		}},
		{"a failed trial frees what it took", func() ConsolidationInput {
			port := func(uid string, opts ...func(*Pod)) Pod {
				return pod(uid, append(opts, func(p *Pod) { p.HostPorts = []HostPort{{Port: 8080}} })...)
			}
			huge := pod("a-huge", func(p *Pod) { p.Requests[ResourceCPU] = 30000; p.DeletionCost = math.MinInt32 })
			in := input(nil, nodeOf("a", &def, c5x8, "z1", od, huge, port("a-port")),
				nodeOf("b", &def, c5x4, "z1", od, port("b-port")), nodeOf("c", &def, c5x4, "z1", od))
			in.Candidates = candidatesOf(types, in.Nodes, "a", "b")
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			// a goes first (its huge pod is cheap to disrupt) and fails, after its port pod
			// took c's port 8080 in the trial; b's port pod then needs that port on c.
			if !strings.HasPrefix(rejection(res, "a"), "pods would not fit: default/a-huge: ") {
				t.Fatalf("rejections %v", res.Rejected)
			}
			if res.Command == nil || !reflect.DeepEqual(res.Command.Placements, []Placement{{PodUID: "b-port", Node: "c"}}) {
				t.Fatalf("want b's pod moved to c, got %+v", res.Command)
			}
		}},
		{"budget of zero", func() ConsolidationInput {
			in := input([]NodePool{def}, nodeOf("a", &def, c5x4, "z1", od, pod("a1")), nodeOf("b", &def, c5x4, "z1", od, pod("b1")))
			in.Candidates = candidatesOf(types, in.Nodes)
			in.Allowed = map[string]int{"default": 0}
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			wantNoCommand(t, res)
			for _, n := range []string{"a", "b"} {
				if got := rejection(res, n); !strings.Contains(got, "budget allows no more disruptions") {
					t.Fatalf("rejection of %s %q", n, got)
				}
			}
			in.Allowed["default"] = 1 // one at a time: a single-node delete
			res = consolidate(t, in)
			if res.Command == nil || len(res.Command.Nodes) != 1 || res.Command.Kind != CommandDelete {
				t.Fatalf("budget 1: want one node deleted, got %+v", res.Command)
			}
		}},
		{"daemonset and mirror pods are not moved", func() ConsolidationInput {
			mirror := pod("static", func(p *Pod) { p.Mirror = true; p.Requests[ResourceCPU] = 100 })
			in := input([]NodePool{def}, nodeOf("a", &def, c5x4, "z1", od, ds("ds-a"), mirror, pod("a1")), nodeOf("b", &def, c5x4, "z1", od, ds("ds-b"), pod("b1")))
			in.Candidates = candidatesOf(types, in.Nodes, "a")
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			if res.Command == nil || !reflect.DeepEqual(res.Command.Placements, []Placement{{PodUID: "a1", Node: "b"}}) {
				t.Fatalf("want only a1 moved to b, got %+v", res.Command)
			}
		}},
		{"cheapest to disrupt first", func() ConsolidationInput {
			in := input([]NodePool{def},
				nodeOf("a", &def, c5x4, "z1", od, pod("a1", func(p *Pod) { p.DeletionCost = math.MaxInt32 })),
				nodeOf("b", &def, c5x4, "z1", od, pod("b1")),
				nodeOf("c", &def, c5x8, "z1", od, pod("c1", func(p *Pod) { p.Requests[ResourceCPU] = 6000 })))
			in.Candidates = candidatesOf(types, in.Nodes, "a", "b")
			in.Allowed = map[string]int{"default": 1}
			return in
		}, func(t *testing.T, in ConsolidationInput, res ConsolidationResult) {
			if res.Command == nil || !reflect.DeepEqual(res.Command.Nodes, []string{"b"}) {
				t.Fatalf("want b (its pod costs less to disrupt) deleted, got %+v", res.Command)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in()
			tt.check(t, in, consolidate(t, in))
		})
	}
}

func sorted(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

func TestConsolidateRefusesBadInput(t *testing.T) {
	types := smallCatalog()
	def := NodePool{Name: "default"}
	nodes := []Node{nodeOf("a", &def, typeNamed(types, "c5.4x"), "z1", CapacityTypeOnDemand, pod("a1"))}
	good := func() ConsolidationInput {
		return ConsolidationInput{Input: Input{NodePools: []NodePool{def}, InstanceTypes: types, Nodes: nodes}, Candidates: candidatesOf(types, nodes)}
	}
	tests := []struct {
		name   string
		change func(*ConsolidationInput)
		want   string
	}{
		{"unknown node", func(in *ConsolidationInput) { in.Candidates[0].Node = "zz" }, `candidate "zz" is not among the nodes`},
		{"twice", func(in *ConsolidationInput) { in.Candidates = append(in.Candidates, in.Candidates[0]) }, `candidate "a" listed twice`},
		{"lifetime unset", func(in *ConsolidationInput) { in.Candidates[0].LifetimeRemaining = 0 }, "lifetime remaining 0 is outside (0, 1]"},
		{"capacity type", func(in *ConsolidationInput) { in.Candidates[0].CapacityType = "" }, `capacity type "" is neither`},
		{"pool mismatch", func(in *ConsolidationInput) { in.Candidates[0].NodePool = "other" }, `candidate "a" names nodepool "other", its node is in "default"`},
		{"min savings", func(in *ConsolidationInput) { in.MinSavings = map[string]float64{"default": 1.5} }, "MinSavings[default] 1.5 is not a share in [0, 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good()
			tt.change(&in)
			if _, err := Consolidate(in); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDisruptionCost(t *testing.T) {
	pods := []Pod{{}, {Priority: 1 << 25}, {DeletionCost: -(1 << 27)}, {Priority: math.MaxInt32}}
	// 1 + 2 + 0 + clamp(1 + 64) = 13, halved.
	if got := DisruptionCost(pods, 0.5); math.Abs(got-6.5) > 1e-9 {
		t.Fatalf("cost %v, want 6.5", got)
	}
}

// randomCluster turns a random solve into a running cluster: every planned claim becomes a
// node of its cheapest option, with the DaemonSet pods its pool's nodes run; then some pods
// go away so some nodes are underused.
func randomCluster(seed uint64) ConsolidationInput {
	in := randomInput(seed)
	r := rand.New(rand.NewPCG(seed, 7))
	plan, err := Solve(in)
	if err != nil {
		panic(err)
	}
	podByUID := map[string]Pod{}
	for _, p := range in.Pods {
		podByUID[p.UID] = p
	}
	keep := func() bool { return r.IntN(3) > 0 }
	var nodes []Node
	for _, n := range in.Nodes {
		n.Pods = append([]Pod(nil), n.Pods...)
		for _, pl := range plan.Placements {
			if pl.Node == n.Name && keep() {
				n.Pods = append(n.Pods, podByUID[pl.PodUID])
			}
		}
		n.InFlight = false
		nodes = append(nodes, n)
	}
	pools := map[string]*NodePool{}
	for i := range in.NodePools {
		pools[in.NodePools[i].Name] = &in.NodePools[i]
	}
	for i, nc := range plan.NodeClaims {
		it := typeNamed(in.InstanceTypes, nc.InstanceTypes[0])
		zone, ct := nc.Zones[0], nc.CapacityTypes[0]
		n := nodeOf(fmt.Sprintf("n-%03d", i), pools[nc.NodePool], it, zone, ct)
		for k, v := range nc.Labels {
			n.Labels[k] = v
		}
		for _, d := range in.DaemonSets {
			if _, bad := untolerated(n.Taints, d.Pod.Tolerations, true); !bad {
				p := d.Pod
				p.UID = d.Pod.UID + "-" + n.Name
				p.Owner = OwnerReference{Kind: "DaemonSet", Name: d.Name}
				n.Pods = append(n.Pods, p)
			}
		}
		for _, uid := range nc.PodUIDs {
			if keep() {
				n.Pods = append(n.Pods, podByUID[uid])
			}
		}
		nodes = append(nodes, n)
	}
	out := ConsolidationInput{Input: Input{Nodes: nodes, NodePools: in.NodePools, InstanceTypes: in.InstanceTypes,
		DaemonSets: in.DaemonSets, Unavailable: in.Unavailable}, SpotToSpot: r.IntN(2) == 0}
	for _, n := range nodes {
		if r.IntN(5) == 0 {
			continue
		}
		c := Candidate{Node: n.Name, NodePool: n.NodePool, CapacityType: CapacityTypeOnDemand, Zone: n.Labels[LabelZone],
			InstanceType: "custom", PriceUSDPerHour: 0.2, LifetimeRemaining: 0.25 + 0.75*r.Float64()}
		if _, ok := n.Labels[LabelInstanceType]; ok { // a planned claim's node
			c = candidatesOf(in.InstanceTypes, []Node{n})[0]
			c.LifetimeRemaining = 0.25 + 0.75*r.Float64()
		}
		out.Candidates = append(out.Candidates, c)
	}
	if r.IntN(3) == 0 {
		out.Allowed = map[string]int{in.NodePools[0].Name: r.IntN(3)}
	}
	if r.IntN(3) == 0 {
		out.DefaultMinSavings = 0.2
	}
	return out
}

// TestConsolidateProperties: on random clusters every command checks out (checkCommand: the
// moves hold every constraint and re-solve with nothing unschedulable), budgets hold, every
// candidate not chosen has a reason, each rejection and single-node command is what the
// candidate alone gets (no trial leaks state into the next), and the same input gives the
// same result.
func TestConsolidateProperties(t *testing.T) {
	commands := 0
	for seed := uint64(0); seed < 150; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			in := randomCluster(seed)
			res := consolidate(t, in)
			if res.Command != nil {
				commands++
				per := map[string]int{}
				for _, c := range in.Candidates {
					if slices.Contains(res.Command.Nodes, c.Node) {
						per[c.NodePool]++
					}
				}
				for pool, n := range per {
					if a, ok := in.Allowed[pool]; ok && n > a {
						t.Fatalf("command disrupts %d nodes of %s, budget %d", n, pool, a)
					}
				}
			}
			for _, r := range res.Rejected {
				if r.Reason == "" {
					t.Fatalf("%s rejected without a reason", r.Node)
				}
				// The trials before it left nothing behind: alone, it is judged the same.
				if got := rejection(consolidate(t, only(in, r.Node)), r.Node); got != r.Reason {
					t.Fatalf("%s rejected for %q in the pass, %q alone", r.Node, r.Reason, got)
				}
			}
			if cmd := res.Command; cmd != nil && len(cmd.Nodes) == 1 {
				alone := consolidate(t, only(in, cmd.Nodes[0]))
				if !reflect.DeepEqual(alone.Command, cmd) {
					t.Fatalf("command in the pass %+v, alone %+v", cmd, alone.Command)
				}
			}
			again, err := Consolidate(randomCluster(seed))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res, again) {
				t.Fatalf("same input, different result:\n%+v\n%+v", res, again)
			}
		})
	}
	if commands < 20 {
		t.Fatalf("only %d of 150 clusters gave a command: the property is barely exercised", commands)
	}
}

// only keeps one candidate.
func only(in ConsolidationInput, node string) ConsolidationInput {
	out := in
	out.Candidates = nil
	for _, c := range in.Candidates {
		if c.Node == node {
			out.Candidates = append(out.Candidates, c)
		}
	}
	return out
}

// TestConsolidateSettles applies commands until none is left: each one checks out against the
// cluster it was made for, and the cluster's cost never rises.
func TestConsolidateSettles(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			in := randomCluster(seed)
			in.Allowed = nil
			cost := clusterCost(in)
			for step := 0; ; step++ {
				if step > 200 {
					t.Fatal("did not settle in 200 commands")
				}
				res := consolidate(t, in)
				if res.Command == nil {
					return
				}
				in = applyCommand(in, *res.Command, fmt.Sprintf("r-%d", step))
				if c := clusterCost(in); c > cost+1e-9 {
					t.Fatalf("cost rose from %v to %v", cost, c)
				} else {
					cost = c
				}
			}
		})
	}
}

func clusterCost(in ConsolidationInput) float64 {
	price := map[string]float64{}
	for _, c := range in.Candidates {
		price[c.Node] = c.PriceUSDPerHour
	}
	total := 0.0
	for _, n := range in.Nodes {
		total += price[n.Name]
	}
	return total
}

// applyCommand carries a command out: the nodes go, their pods land where it says, and the
// replacement registers as a node of its cheapest option (a candidate, too).
func applyCommand(in ConsolidationInput, cmd Command, name string) ConsolidationInput {
	out := in
	removed := map[string]bool{}
	for _, n := range cmd.Nodes {
		removed[n] = true
	}
	moved := map[string]Pod{}
	for _, n := range in.Nodes {
		if removed[n.Name] {
			for _, p := range n.Pods {
				moved[p.UID] = p
			}
		}
	}
	to := map[string][]Pod{}
	for _, pl := range cmd.Placements {
		to[pl.Node] = append(to[pl.Node], moved[pl.PodUID])
	}
	out.Nodes = nil
	for _, n := range in.Nodes {
		if removed[n.Name] {
			continue
		}
		if len(to[n.Name]) > 0 {
			n.Pods = append(append([]Pod(nil), n.Pods...), to[n.Name]...)
		}
		out.Nodes = append(out.Nodes, n)
	}
	out.Candidates = nil
	for _, c := range in.Candidates {
		if !removed[c.Node] {
			out.Candidates = append(out.Candidates, c)
		}
	}
	if r := cmd.Replacement; r != nil {
		var pool *NodePool
		for i := range in.NodePools {
			if in.NodePools[i].Name == r.NodePool {
				pool = &in.NodePools[i]
			}
		}
		it := typeNamed(in.InstanceTypes, r.InstanceTypes[0])
		zone, ct := r.Zones[0], r.CapacityTypes[0]
		n := nodeOf(name, pool, it, zone, ct)
		for k, v := range r.Labels {
			n.Labels[k] = v
		}
		for _, d := range in.DaemonSets {
			if _, bad := untolerated(n.Taints, d.Pod.Tolerations, true); !bad {
				p := d.Pod
				p.UID = d.Pod.UID + "-" + name
				p.Owner = OwnerReference{Kind: "DaemonSet", Name: d.Name}
				n.Pods = append(n.Pods, p)
			}
		}
		for _, uid := range r.PodUIDs {
			n.Pods = append(n.Pods, moved[uid])
		}
		out.Nodes = append(out.Nodes, n)
		out.Candidates = append(out.Candidates, Candidate{Node: name, NodePool: r.NodePool, InstanceType: it.Name,
			CapacityType: ct, Zone: zone, PriceUSDPerHour: offeringPrice(it, zone, ct), LifetimeRemaining: 1})
	}
	return out
}
