package scheduling

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// Fixtures shared by tests and benchmarks.

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// karpenterTypes reproduces the instance types of Karpenter's scheduling benchmark: type i has
// i CPUs, 2·i GiB and 10·i pods, costs 0.1 per CPU plus 0.1 per GiB an hour, and is offered as
// spot in zones 1–2 and on demand in zones 1–3.
func karpenterTypes() []InstanceType {
	out := make([]InstanceType, 0, 400)
	for i := 1; i <= 400; i++ {
		name := fmt.Sprintf("fake-it-%d", i)
		price := 0.1*float64(i) + 0.1*float64(2*i)
		t := InstanceType{
			Name:   name,
			Labels: map[string]string{LabelInstanceType: name, LabelArch: "amd64", LabelOS: "linux"},
			Capacity: ResourceList{ResourceCPU: int64(i) * 1000, ResourceMemory: int64(2*i) * GiB,
				ResourcePods: int64(10 * i), ResourceEphemeralStorage: 20 * GiB},
		}
		for z := 1; z <= 3; z++ {
			zone := fmt.Sprintf("test-zone-%d", z)
			if z <= 2 {
				t.Offerings = append(t.Offerings, Offering{Zone: zone, CapacityType: CapacityTypeSpot, PriceUSDPerHour: price, Available: true})
			}
			t.Offerings = append(t.Offerings, Offering{Zone: zone, CapacityType: CapacityTypeOnDemand, PriceUSDPerHour: price, Available: true})
		}
		out = append(out, t)
	}
	return out
}

// karpenterPool is the benchmark's one unlimited pool; it names instance types and capacity
// types so Karpenter's category defaults do not filter the synthetic types out.
func karpenterPool() NodePool {
	return NodePool{Name: "default", Requirements: []Requirement{
		{Key: LabelCapacityType, Operator: OpIn, Values: []string{CapacityTypeSpot, CapacityTypeOnDemand}},
		{Key: LabelInstanceType, Operator: OpExists},
	}}
}

var (
	benchCPUs = []int64{100, 250, 500, 1000, 1500}
	benchMems = []int64{100 * MiB, 256 * MiB, 512 * MiB, 1 * GiB, 2 * GiB, 4 * GiB}
)

// karpenterPods reproduces Karpenter's benchmark pods: five equal groups — plain, zone spread,
// hostname spread, zone self-affinity, hostname anti-affinity.
func karpenterPods(n int) []Pod {
	r := rand.New(rand.NewPCG(42, 42))
	pods := make([]Pod, 0, n)
	mk := func(i int, labels map[string]string) Pod {
		return Pod{UID: fmt.Sprintf("pod-%06d", i), Namespace: "default", Name: fmt.Sprintf("pod-%d", i),
			Labels: labels, CreationTime: epoch.Add(time.Duration(i) * time.Millisecond),
			Requests: ResourceList{ResourceCPU: benchCPUs[r.IntN(len(benchCPUs))], ResourceMemory: benchMems[r.IntN(len(benchMems))]}}
	}
	value := func() string { return string(rune('a' + r.IntN(7))) }
	group := n / 5
	i := 0
	for ; i < group; i++ {
		pods = append(pods, mk(i, nil))
	}
	for _, key := range []string{LabelZone, LabelHostname} {
		for k := 0; k < group; k, i = k+1, i+1 {
			v := value()
			p := mk(i, map[string]string{"my-label": v})
			p.TopologySpread = []TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: DoNotSchedule,
				LabelSelector: &LabelSelector{MatchLabels: map[string]string{"my-label": v}}}}
			pods = append(pods, p)
		}
	}
	for k := 0; k < group; k, i = k+1, i+1 {
		v := value()
		p := mk(i, map[string]string{"my-affinity": v})
		p.PodAffinity.Required = []PodAffinityTerm{{TopologyKey: LabelZone,
			LabelSelector: &LabelSelector{MatchLabels: map[string]string{"my-affinity": v}}}}
		pods = append(pods, p)
	}
	for ; i < n; i++ {
		p := mk(i, map[string]string{"app": "nginx"})
		p.PodAntiAffinity.Required = []PodAffinityTerm{{TopologyKey: LabelHostname,
			LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}}}
		pods = append(pods, p)
	}
	return pods
}

func karpenterInput(n int) Input {
	return Input{Pods: karpenterPods(n), NodePools: []NodePool{karpenterPool()}, InstanceTypes: karpenterTypes()}
}

var catalogZones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// classicPool is a pool with the requirements Karpenter's v1alpha5 admission defaults gave a
// Provisioner that said nothing (on-demand, amd64, linux, c/m/r of a generation above 2),
// written out: v1 pools get no defaults, and the benchmarks and cost bounds are set on this one.
func classicPool(name string) NodePool {
	return NodePool{Name: name, Requirements: []Requirement{
		{Key: LabelCapacityType, Operator: OpIn, Values: []string{CapacityTypeOnDemand}},
		{Key: LabelArch, Operator: OpIn, Values: []string{"amd64"}},
		{Key: LabelOS, Operator: OpIn, Values: []string{"linux"}},
		{Key: LabelInstanceCategory, Operator: OpIn, Values: []string{"c", "m", "r"}},
		{Key: LabelInstanceGeneration, Operator: OpGt, Values: []string{"2"}},
	}}
}

// catalogWorkload builds pods for one of the real-catalog workloads.
func catalogWorkload(name string, n int) Input {
	r := rand.New(rand.NewPCG(7, uint64(len(name))))
	in := Input{InstanceTypes: FromCatalog(catalog.Schedulable(), catalogZones), NodePools: []NodePool{classicPool("default")}}
	for i := 0; i < n; i++ {
		p := Pod{UID: fmt.Sprintf("pod-%06d", i), Namespace: "default", Name: fmt.Sprintf("%s-%d", name, i),
			CreationTime: epoch.Add(time.Duration(i) * time.Millisecond)}
		switch name {
		case "mixed":
			p.Requests = ResourceList{ResourceCPU: benchCPUs[r.IntN(len(benchCPUs))], ResourceMemory: benchMems[r.IntN(len(benchMems))]}
		case "memory-heavy":
			p.Requests = ResourceList{ResourceCPU: []int64{250, 500, 1000}[r.IntN(3)], ResourceMemory: []int64{4 * GiB, 8 * GiB, 16 * GiB}[r.IntN(3)]}
		case "gpu":
			if i%4 == 0 {
				p.Requests = ResourceList{ResourceCPU: 4000, ResourceMemory: 16 * GiB, ResourceNvidiaGPU: 1}
				p.Tolerations = []Toleration{{Key: ResourceNvidiaGPU, Operator: "Exists", Effect: EffectNoSchedule}}
			} else {
				p.Requests = ResourceList{ResourceCPU: benchCPUs[r.IntN(len(benchCPUs))], ResourceMemory: benchMems[r.IntN(len(benchMems))]}
			}
		case "large-pod":
			p.Requests = ResourceList{ResourceCPU: []int64{4000, 8000, 16000}[r.IntN(3)], ResourceMemory: []int64{8 * GiB, 16 * GiB, 32 * GiB, 64 * GiB}[r.IntN(4)]}
		}
		in.Pods = append(in.Pods, p)
	}
	if name == "gpu" {
		in.NodePools = append(in.NodePools, NodePool{Name: "gpu", Weight: 10,
			Requirements: []Requirement{{Key: LabelInstanceCategory, Operator: OpIn, Values: []string{"g", "p"}}},
			Taints:       []Taint{{Key: ResourceNvidiaGPU, Value: "true", Effect: EffectNoSchedule}}})
	}
	return in
}

// preferencePods are the pods of Karpenter's preference benchmark: app=nginx, a preferred zone,
// a zone anti-affinity preference (weight 10) and a hostname anti-affinity preference (weight 1)
// against each other.
func preferencePods(n int) []Pod {
	r := rand.New(rand.NewPCG(42, 47))
	nginx := &LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}
	pods := make([]Pod, 0, n)
	for i := 0; i < n; i++ {
		p := Pod{UID: fmt.Sprintf("pod-%06d", i), Namespace: "default", Name: fmt.Sprintf("nginx-%d", i),
			Labels: map[string]string{"app": "nginx"}, CreationTime: epoch.Add(time.Duration(i) * time.Millisecond),
			Requests: ResourceList{ResourceCPU: benchCPUs[r.IntN(len(benchCPUs))], ResourceMemory: benchMems[r.IntN(len(benchMems))]}}
		p.PreferredNodeAffinity = []PreferredNodeSelectorTerm{{Weight: 1, Term: NodeSelectorTerm{Requirements: []Requirement{
			{Key: LabelZone, Operator: OpIn, Values: []string{"test-zone-1"}}}}}}
		p.PodAntiAffinity.Preferred = []WeightedPodAffinityTerm{
			{Weight: 10, Term: PodAffinityTerm{TopologyKey: LabelZone, LabelSelector: nginx}},
			{Weight: 1, Term: PodAffinityTerm{TopologyKey: LabelHostname, LabelSelector: nginx}},
		}
		pods = append(pods, p)
	}
	return pods
}
