package scheduling

import (
	"strings"
	"testing"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

func lookup(t *testing.T, name string) catalog.InstanceType {
	t.Helper()
	ct, ok := catalog.Lookup(name)
	if !ok {
		t.Fatalf("no %s in the catalog", name)
	}
	return ct
}

func int32p(v int32) *int32 { return &v }

func TestNodeResources(t *testing.T) {
	m5 := lookup(t, "m5.large") // 2 vCPU, 8 GiB, 29 pods, no instance store
	m5d := lookup(t, "m5d.large")
	defCap, defAlloc, err := NodeResources(m5, DefaultNodeSettings())
	if err != nil {
		t.Fatal(err)
	}
	it := InstanceType{Capacity: TypeCapacity(m5)}
	assertRL(t, "default capacity", it.Capacity, defCap)
	assertRL(t, "default allocatable", it.Allocatable(), defAlloc)

	memCap := defCap[ResourceMemory]
	tests := []struct {
		name  string
		ct    catalog.InstanceType
		ns    NodeSettings
		check func(capacity, alloc ResourceList) (string, int64, int64)
	}{
		{"maxPods", m5, NodeSettings{MaxPods: int32p(10)}, func(c, a ResourceList) (string, int64, int64) { return "pods", 10, a[ResourcePods] }},
		{"maxPods shrinks kube-reserved memory", m5, NodeSettings{MaxPods: int32p(10)}, func(c, a ResourceList) (string, int64, int64) {
			return "memory", memCap - (255+11*10)*MiB - 100*MiB, a[ResourceMemory]
		}},
		{"podsPerCore", m5, NodeSettings{PodsPerCore: int32p(3)}, func(c, a ResourceList) (string, int64, int64) { return "pods", 6, c[ResourcePods] }},
		{"kubeReserved replaces the default", m5, NodeSettings{KubeReserved: map[string]string{"cpu": "500m", "memory": "1Gi"}}, func(c, a ResourceList) (string, int64, int64) {
			return "memory", memCap - GiB - 100*MiB, a[ResourceMemory]
		}},
		{"kubeReserved cpu", m5, NodeSettings{KubeReserved: map[string]string{"cpu": "500m"}}, func(c, a ResourceList) (string, int64, int64) {
			return "cpu", 1500, a[ResourceCPU]
		}},
		{"systemReserved adds", m5, NodeSettings{SystemReserved: map[string]string{"cpu": "100m"}}, func(c, a ResourceList) (string, int64, int64) {
			return "cpu", defAlloc[ResourceCPU] - 100, a[ResourceCPU]
		}},
		{"evictionHard memory percentage", m5, NodeSettings{EvictionHard: map[string]string{"memory.available": "10%"}}, func(c, a ResourceList) (string, int64, int64) {
			return "memory", defAlloc[ResourceMemory] + 100*MiB - (memCap+9)/10, a[ResourceMemory]
		}},
		{"evictionSoft larger than hard", m5, NodeSettings{EvictionSoft: map[string]string{"memory.available": "1Gi"}}, func(c, a ResourceList) (string, int64, int64) {
			return "memory", defAlloc[ResourceMemory] + 100*MiB - GiB, a[ResourceMemory]
		}},
		{"evictionHard nodefs", m5, NodeSettings{EvictionHard: map[string]string{"nodefs.available": "1Gi"}}, func(c, a ResourceList) (string, int64, int64) {
			return "ephemeral-storage", 20*GiB - GiB - GiB, a[ResourceEphemeralStorage]
		}},
		{"root volume", m5, NodeSettings{RootVolume: 100 * GiB}, func(c, a ResourceList) (string, int64, int64) {
			return "ephemeral-storage", 100 * GiB, c[ResourceEphemeralStorage]
		}},
		{"RAID0 with instance store", m5d, NodeSettings{RAID0: true, RootVolume: 100 * GiB}, func(c, a ResourceList) (string, int64, int64) {
			return "ephemeral-storage", *m5d.LocalNVMeGiB * GiB, c[ResourceEphemeralStorage]
		}},
		{"RAID0 without instance store", m5, NodeSettings{RAID0: true}, func(c, a ResourceList) (string, int64, int64) {
			return "ephemeral-storage", 20 * GiB, c[ResourceEphemeralStorage]
		}},
		{"VM overhead", m5, NodeSettings{VMMemoryOverhead: 0.1}, func(c, a ResourceList) (string, int64, int64) {
			return "memory", (8192 - 820) * MiB, c[ResourceMemory]
		}},
	}
	for _, tt := range tests {
		ns := tt.ns
		if ns.VMMemoryOverhead == 0 {
			ns.VMMemoryOverhead = VMMemoryOverhead
		}
		c, a, err := NodeResources(tt.ct, ns)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		what, want, got := tt.check(c, a)
		if want != got {
			t.Errorf("%s: %s = %d, want %d", tt.name, what, got, want)
		}
	}

	for ns, want := range map[*NodeSettings]string{
		{KubeReserved: map[string]string{"memory": "lots"}}:           `kubelet kubeReserved["memory"]: "lots" is not a non-negative quantity`,
		{SystemReserved: map[string]string{"gpu": "1"}}:               `kubelet systemReserved["gpu"]: want cpu, memory, ephemeral-storage or pid`,
		{EvictionHard: map[string]string{"memory.available": "120%"}}: `kubelet evictionHard["memory.available"]: "120%" is not a percentage`,
		{VMMemoryOverhead: 1.5}:                                       "VM memory overhead 1.5",
		{PodsPerCore: int32p(2), AMIFamily: "Bottlerocket"}:           "podsPerCore is not supported on Bottlerocket",
	} {
		err := ns.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v, want %q", *ns, err, want)
		}
	}
}

func TestRootVolumeSize(t *testing.T) {
	devs := []BlockDevice{{DeviceName: "/dev/xvda", Size: 4 * GiB}, {DeviceName: "/dev/xvdb", Size: 80 * GiB}}
	if got := RootVolumeSize("AL2023", devs); got != 4*GiB {
		t.Errorf("AL2023: %d", got)
	}
	if got := RootVolumeSize("Bottlerocket", devs); got != 80*GiB {
		t.Errorf("Bottlerocket: %d", got)
	}
	devs[0].RootVolume, devs[1].RootVolume = false, true
	if got := RootVolumeSize("AL2", devs); got != 80*GiB {
		t.Errorf("rootVolume mapping: %d", got)
	}
	if got := RootVolumeSize("AL2", nil); got != 20*GiB {
		t.Errorf("default: %d", got)
	}
}

// A pool whose node class caps pods at 10 never plans 11 pods on one node, though the type's
// CPU and memory would hold them; reserved resources shrink what it plans with.
func TestPoolNodeSettingsLimitPacking(t *testing.T) {
	types := FromCatalog([]catalog.InstanceType{lookup(t, "m5.2xlarge")}, []string{"z1"})
	var pods []Pod
	for i := range 11 {
		pods = append(pods, pod(string(rune('a'+i)), func(p *Pod) { p.Requests = ResourceList{ResourceCPU: 100, ResourceMemory: 64 * MiB} }))
	}
	plan := solve(t, Input{InstanceTypes: types, NodePools: []NodePool{{Name: "default"}}, Pods: pods})
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("without settings: %d claims, want 1", len(plan.NodeClaims))
	}
	ns := DefaultNodeSettings()
	ns.MaxPods = int32p(10)
	plan = solve(t, Input{InstanceTypes: types, NodePools: []NodePool{{Name: "default", Node: &ns}}, Pods: pods})
	if len(plan.NodeClaims) != 2 {
		t.Fatalf("maxPods 10: %d claims, want 2", len(plan.NodeClaims))
	}
	for _, nc := range plan.NodeClaims {
		if len(nc.PodUIDs) > 10 {
			t.Errorf("claim %s has %d pods", nc.Name, len(nc.PodUIDs))
		}
	}

	// Two 3-CPU pods fit an 8-vCPU node's allocatable, but not once 2 CPUs are reserved.
	ns = DefaultNodeSettings()
	ns.SystemReserved = map[string]string{"cpu": "2"}
	big := []Pod{pod("x", func(p *Pod) { p.Requests = ResourceList{ResourceCPU: 3000} }), pod("y", func(p *Pod) { p.Requests = ResourceList{ResourceCPU: 3000} })}
	plan = solve(t, Input{InstanceTypes: types, NodePools: []NodePool{{Name: "default"}}, Pods: big})
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("without reservation: %d claims, want 1", len(plan.NodeClaims))
	}
	plan = solve(t, Input{InstanceTypes: types, NodePools: []NodePool{{Name: "default", Node: &ns}}, Pods: big})
	if len(plan.NodeClaims) != 2 {
		t.Fatalf("systemReserved cpu 2: %d claims, want 2", len(plan.NodeClaims))
	}

	ns.KubeReserved = map[string]string{"memory": "x"}
	if _, err := Solve(Input{InstanceTypes: types, NodePools: []NodePool{{Name: "default", Node: &ns}}, Pods: big}); err == nil || !strings.Contains(err.Error(), "compiling nodepool default: kubelet kubeReserved") {
		t.Errorf("bad settings: %v", err)
	}
}

func assertRL(t *testing.T, what string, want, got ResourceList) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
	for n, q := range want {
		if got[n] != q {
			t.Errorf("%s %s: %d, want %d", what, n, got[n], q)
		}
	}
}
