package scheduling

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Resource names. CPU is counted in millicores, memory and ephemeral storage in bytes, pods
// and extended resources (nvidia.com/gpu, aws.amazon.com/neuron, ...) in units.
const (
	ResourceCPU              = "cpu"
	ResourceMemory           = "memory"
	ResourceEphemeralStorage = "ephemeral-storage"
	ResourcePods             = "pods"
	// ResourceNodes is a pool's node count, which its limits may cap; no node has it as a
	// resource.
	ResourceNodes     = "nodes"
	ResourceNvidiaGPU = "nvidia.com/gpu"
	ResourceAMDGPU    = "amd.com/gpu"
	ResourceNeuron    = "aws.amazon.com/neuron"
)

// ResourceList maps a resource name to a quantity in the units above (cpu in millicores,
// memory in bytes).
type ResourceList map[string]int64

// Byte sizes, for building memory quantities.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
)

// resourceIndex assigns each resource name a slot in a dense vector for one solve: the four
// standard resources first, then the extended ones that appear anywhere in the input, sorted.
type resourceIndex struct {
	names []string
	slot  map[string]int
}

const (
	slotCPU = iota
	slotMemory
	slotEphemeral
	slotPods
)

func newResourceIndex(extra map[string]bool) *resourceIndex {
	ix := &resourceIndex{
		names: []string{ResourceCPU, ResourceMemory, ResourceEphemeralStorage, ResourcePods},
		slot:  map[string]int{},
	}
	var ext []string
	for n := range extra {
		switch n {
		case ResourceCPU, ResourceMemory, ResourceEphemeralStorage, ResourcePods:
		default:
			ext = append(ext, n)
		}
	}
	sort.Strings(ext)
	ix.names = append(ix.names, ext...)
	for i, n := range ix.names {
		ix.slot[n] = i
	}
	return ix
}

// vec is a dense resource vector laid out by a resourceIndex.
type vec []int64

func (ix *resourceIndex) vec(rl ResourceList) vec {
	v := make(vec, len(ix.names))
	for n, q := range rl {
		if s, ok := ix.slot[n]; ok {
			v[s] = q
		}
	}
	return v
}

func (ix *resourceIndex) list(v vec) ResourceList {
	rl := ResourceList{}
	for i, q := range v {
		if q != 0 {
			rl[ix.names[i]] = q
		}
	}
	return rl
}

// fits reports whether used+add ≤ capacity in every dimension.
func fits(used, add, capacity vec) bool {
	for i, c := range capacity {
		if used[i]+add[i] > c {
			return false
		}
	}
	return true
}

func (v vec) add(o vec) {
	for i := range v {
		v[i] += o[i]
	}
}

func (v vec) sub(o vec) {
	for i := range v {
		v[i] -= o[i]
	}
}

func (v vec) clone() vec { return append(vec(nil), v...) }

// formatQuantity renders a quantity of a resource the way a person writes it in a manifest.
func formatQuantity(name string, q int64) string {
	switch name {
	case ResourceCPU:
		if q%1000 == 0 {
			return fmt.Sprintf("%d", q/1000)
		}
		return fmt.Sprintf("%dm", q)
	case ResourceMemory, ResourceEphemeralStorage:
		for _, u := range []struct {
			s string
			n int64
		}{{"Ti", 1 << 40}, {"Gi", GiB}, {"Mi", MiB}, {"Ki", KiB}} {
			if q != 0 && q%u.n == 0 {
				return fmt.Sprintf("%d%s", q/u.n, u.s)
			}
		}
	}
	return fmt.Sprintf("%d", q)
}

// FormatResources renders a resource list in a stable order, e.g. "cpu=1500m memory=2Gi".
func FormatResources(rl ResourceList) string {
	parts := make([]string, 0, len(rl))
	for _, n := range slices.Sorted(maps.Keys(rl)) {
		parts = append(parts, n+"="+formatQuantity(n, rl[n]))
	}
	return strings.Join(parts, " ")
}
