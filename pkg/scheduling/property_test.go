package scheduling

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// smallCatalog is a synthetic catalog with Karpenter's labels: three categories, two
// generations, two architectures, sizes 1–32 vCPU, three zones, spot and on-demand.
func smallCatalog() []InstanceType {
	var out []InstanceType
	for _, cat := range []struct {
		name      string
		gibPerCPU int64
		price     float64
	}{{"c", 2, 0.04}, {"m", 4, 0.05}, {"r", 8, 0.065}} {
		for _, gen := range []int{5, 6} {
			for _, arch := range []string{"amd64", "arm64"} {
				for _, cpu := range []int64{1, 2, 4, 8, 16, 32} {
					fam := fmt.Sprintf("%s%d%s", cat.name, gen, map[string]string{"amd64": "", "arm64": "g"}[arch])
					name := fmt.Sprintf("%s.%dx", fam, cpu)
					price := cat.price * float64(cpu) * (1 - 0.05*float64(gen-5))
					t := InstanceType{Name: name,
						Labels: map[string]string{LabelInstanceType: name, LabelArch: arch, LabelOS: "linux",
							LabelInstanceCategory: cat.name, LabelInstanceFamily: fam,
							LabelInstanceGeneration: fmt.Sprint(gen), LabelInstanceCPU: fmt.Sprint(cpu)},
						Capacity: ResourceList{ResourceCPU: cpu * 1000, ResourceMemory: cpu * cat.gibPerCPU * GiB,
							ResourcePods: 8 + cpu*4, ResourceEphemeralStorage: 20 * GiB}}
					for _, z := range []string{"z1", "z2", "z3"} {
						t.Offerings = append(t.Offerings,
							Offering{Zone: z, CapacityType: CapacityTypeOnDemand, PriceUSDPerHour: price, Available: true},
							Offering{Zone: z, CapacityType: CapacityTypeSpot, PriceUSDPerHour: price * 0.4, Available: true})
					}
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// randomInput generates a cluster: pools with taints, limits and weights, DaemonSets, existing
// nodes with pods, and pending pods using every constraint kind.
func randomInput(seed uint64) Input {
	r := rand.New(rand.NewPCG(seed, 99))
	in := Input{InstanceTypes: smallCatalog()}
	for i := 0; i < 1+r.IntN(3); i++ {
		p := NodePool{Name: fmt.Sprintf("pool-%d", i), Weight: int32(r.IntN(3))}
		if r.IntN(2) == 0 {
			p.Requirements = append(p.Requirements, Requirement{Key: LabelCapacityType, Operator: OpIn, Values: []string{CapacityTypeSpot, CapacityTypeOnDemand}})
		}
		if r.IntN(3) == 0 {
			p.Requirements = append(p.Requirements, Requirement{Key: LabelArch, Operator: OpIn, Values: []string{"amd64", "arm64"}})
		}
		if r.IntN(3) == 0 {
			p.Taints = []Taint{{Key: "team", Value: fmt.Sprint(i), Effect: EffectNoSchedule}}
		}
		if r.IntN(3) == 0 {
			p.Limits = ResourceList{ResourceCPU: int64(8+r.IntN(64)) * 1000}
		}
		if r.IntN(4) == 0 {
			p.Labels = map[string]string{"tier": fmt.Sprint(i)}
		}
		in.NodePools = append(in.NodePools, p)
	}
	if r.IntN(2) == 0 {
		in.DaemonSets = []DaemonSet{{Namespace: "kube-system", Name: "agent",
			Pod: Pod{UID: "ds", Requests: ResourceList{ResourceCPU: 100, ResourceMemory: 128 * MiB}}}}
	}
	if r.IntN(3) == 0 {
		in.Unavailable = []OfferingKey{{InstanceType: "c6.4x", Zone: "z1", CapacityType: CapacityTypeOnDemand}}
	}
	for i := 0; i < r.IntN(3); i++ {
		n := Node{Name: fmt.Sprintf("node-%d", i), NodePool: in.NodePools[0].Name,
			Labels:      map[string]string{LabelZone: fmt.Sprintf("z%d", 1+r.IntN(3)), LabelArch: "amd64", LabelOS: "linux", LabelNodePool: in.NodePools[0].Name, LabelHostname: fmt.Sprintf("node-%d", i)},
			Allocatable: ResourceList{ResourceCPU: 3800, ResourceMemory: 14 * GiB, ResourcePods: 20},
			InFlight:    i == 1}
		n.Pods = []Pod{{UID: fmt.Sprintf("running-%d", i), Namespace: "default", Labels: map[string]string{"app": "web"},
			Requests: ResourceList{ResourceCPU: 500, ResourceMemory: GiB}}}
		in.Nodes = append(in.Nodes, n)
	}
	apps := []string{"web", "db", "cache"}
	for i := 0; i < r.IntN(120); i++ {
		app := apps[r.IntN(len(apps))]
		p := Pod{UID: fmt.Sprintf("p-%04d", i), Namespace: "default", Name: fmt.Sprintf("p-%d", i),
			Labels:       map[string]string{"app": app},
			CreationTime: epoch.Add(time.Duration(r.IntN(5)) * time.Second),
			Requests:     ResourceList{ResourceCPU: int64(100 * (1 + r.IntN(40))), ResourceMemory: int64(64*(1+r.IntN(64))) * MiB}}
		switch r.IntN(12) {
		case 0:
			p.NodeSelector = map[string]string{LabelArch: "arm64"}
		case 1:
			p.RequiredNodeAffinity = []NodeSelectorTerm{
				{Requirements: []Requirement{{Key: LabelInstanceCategory, Operator: OpIn, Values: []string{"x"}}}},
				{Requirements: []Requirement{{Key: LabelInstanceCPU, Operator: OpGt, Values: []string{"3"}}}}}
		case 2:
			p.TopologySpread = []TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: LabelZone, WhenUnsatisfiable: DoNotSchedule,
				LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": app}}}}
			p.Labels["spread"] = "zone"
			p.TopologySpread[0].LabelSelector.MatchLabels["spread"] = "zone"
		case 3:
			// Selectors pick only pods with the same constraint, so the final counts can be
			// checked without knowing the order pods were placed in.
			p.Labels["spread"] = "host"
			p.TopologySpread = []TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: LabelHostname, WhenUnsatisfiable: DoNotSchedule,
				LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": app, "spread": "host"}}}}
		case 4:
			p.PodAntiAffinity.Required = []PodAffinityTerm{{TopologyKey: LabelHostname, LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		case 5:
			p.Labels["aff"] = app
			p.PodAffinity.Required = []PodAffinityTerm{{TopologyKey: LabelZone, LabelSelector: &LabelSelector{MatchLabels: map[string]string{"aff": app}}}}
		case 6:
			p.Tolerations = []Toleration{{Key: "team", Operator: "Exists"}}
		case 7:
			p.HostPorts = []HostPort{{Port: 8080}}
		case 8:
			p.VolumeRequirements = []Requirement{{Key: LabelZone, Operator: OpIn, Values: []string{"z2"}}}
		case 9:
			p.PreferredNodeAffinity = []PreferredNodeSelectorTerm{{Weight: 10, Term: NodeSelectorTerm{Requirements: []Requirement{{Key: "missing", Operator: OpIn, Values: []string{"x"}}}}}}
			p.PodAntiAffinity.Preferred = []WeightedPodAffinityTerm{{Weight: 5, Term: PodAffinityTerm{TopologyKey: LabelHostname, LabelSelector: &LabelSelector{}}}}
		case 10:
			p.Requests[ResourceCPU] = 200000 // fits nowhere
		}
		in.Pods = append(in.Pods, p)
	}
	return in
}

// TestSolveProperties checks the invariants on generated inputs: every pod once, no node over
// capacity, hard constraints held, limits kept, the same input giving the same plan.
func TestSolveProperties(t *testing.T) {
	for seed := uint64(0); seed < 150; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			in := randomInput(seed)
			plan, err := Solve(in)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, in, plan)
			again, err := Solve(randomInput(seed))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plan, again) {
				t.Fatal("same input gave a different plan")
			}
			for _, u := range plan.Unschedulable {
				if u.Reason == "" {
					t.Fatalf("pod %s has no reason", u.PodUID)
				}
			}
		})
	}
}
