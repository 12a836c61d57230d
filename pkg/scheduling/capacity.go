package scheduling

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// NodeSettings is what decides a node's capacity and allocatable beyond its instance type: the
// node class's kubelet settings, the volume ephemeral storage lives on, the instance-store
// policy, and the share of memory the hypervisor keeps. The scheduler plans with it and the
// AWS emulator registers nodes with it (NodeResources), so the two agree.
type NodeSettings struct {
	// MaxPods caps the pods (nil: the type's ENI-limited count); PodsPerCore caps them per vCPU
	// (the lower wins; refused on Bottlerocket, whose settings have no such key).
	MaxPods, PodsPerCore *int32
	// SystemReserved and KubeReserved (cpu, memory, ephemeral-storage quantities) are kept
	// from pods; KubeReserved replaces the EKS default of each resource it names.
	SystemReserved, KubeReserved map[string]string
	// EvictionHard and EvictionSoft thresholds (memory.available, nodefs.available; a quantity
	// or a percentage) replace the defaults 100Mi and 10%; the larger of the two is kept.
	EvictionHard, EvictionSoft map[string]string
	// RootVolume is the size in bytes of the volume ephemeral storage lives on (see
	// RootVolumeSize); 0 means DefaultRootVolume.
	RootVolume int64
	// RAID0: the instance stores are one RAID0 array holding ephemeral storage, which is then
	// their total size (for types that have instance stores).
	RAID0 bool
	// AMIFamily is AL2, AL2023 or Bottlerocket ("" counts as AL2023).
	AMIFamily string
	// VMMemoryOverhead is the share of nominal memory the hypervisor and kernel keep
	// (VMMemoryOverhead, 0.075, is Karpenter's default).
	VMMemoryOverhead float64
}

// DefaultNodeSettings is a node of a class without kubelet settings, block devices or
// instance-store policy.
func DefaultNodeSettings() NodeSettings { return NodeSettings{VMMemoryOverhead: VMMemoryOverhead} }

// DefaultRootVolume is the volume ephemeral storage lives on when the node class names none:
// AL2 and AL2023 root /dev/xvda, Bottlerocket data volume /dev/xvdb, 20Gi each.
const DefaultRootVolume = 20 * GiB

// BlockDevice is one of a node's EBS volumes, as far as capacity goes.
type BlockDevice struct {
	DeviceName string
	Size       int64 // bytes; 0 when the mapping gives none
	RootVolume bool  // the node class's rootVolume: true
}

// EphemeralDevice is the device the AMI family keeps ephemeral storage on.
func EphemeralDevice(amiFamily string) string {
	if amiFamily == "Bottlerocket" {
		return "/dev/xvdb"
	}
	return "/dev/xvda"
}

// RootVolumeSize is the size of the volume ephemeral storage lives on, as Karpenter reckons
// it: the rootVolume: true mapping's, else the mapping of the family's ephemeral device
// (EphemeralDevice), else DefaultRootVolume.
func RootVolumeSize(amiFamily string, devices []BlockDevice) int64 {
	for _, d := range devices {
		if d.RootVolume && d.Size > 0 {
			return d.Size
		}
	}
	for _, d := range devices {
		if d.DeviceName == EphemeralDevice(amiFamily) && d.Size > 0 {
			return d.Size
		}
	}
	return DefaultRootVolume
}

// nodeSettings is NodeSettings with its quantities read.
type nodeSettings struct {
	NodeSettings
	systemReserved, kubeReserved ResourceList
	// eviction thresholds by signal, hard then soft: the larger applies (soft eviction starts
	// earlier, and pods are not planned into room the kubelet would evict them from).
	memEviction, diskEviction []threshold
}

// threshold is an absolute quantity, or a fraction of capacity when pct >= 0.
type threshold struct {
	abs int64
	pct float64
}

func largest(ts []threshold, capacity int64) int64 {
	var out int64
	for _, t := range ts {
		v := t.abs
		if t.pct >= 0 {
			v = int64(math.Ceil(float64(capacity) * t.pct))
		}
		out = max(out, v)
	}
	return out
}

// Validate reports the first setting a kubelet would refuse, in words.
func (ns NodeSettings) Validate() error {
	_, err := ns.compile()
	return err
}

func (ns NodeSettings) compile() (nodeSettings, error) {
	out := nodeSettings{NodeSettings: ns}
	var err error
	if out.systemReserved, err = reserved("systemReserved", ns.SystemReserved); err != nil {
		return out, err
	}
	if out.kubeReserved, err = reserved("kubeReserved", ns.KubeReserved); err != nil {
		return out, err
	}
	if ns.VMMemoryOverhead < 0 || ns.VMMemoryOverhead >= 1 {
		return out, fmt.Errorf("VM memory overhead %v: want a fraction in [0, 1)", ns.VMMemoryOverhead)
	}
	if ns.MaxPods != nil && *ns.MaxPods < 0 || ns.PodsPerCore != nil && *ns.PodsPerCore < 0 {
		return out, fmt.Errorf("kubelet maxPods and podsPerCore must not be negative")
	}
	if ns.PodsPerCore != nil && ns.AMIFamily == "Bottlerocket" {
		return out, fmt.Errorf("kubelet podsPerCore is not supported on Bottlerocket (its settings have no pods-per-core)")
	}
	mem, disk := []threshold{{abs: evictionMemory, pct: -1}}, []threshold{{pct: evictionEphemeralPct / 100.0}}
	for i, set := range []struct {
		name string
		m    map[string]string
	}{{"evictionHard", ns.EvictionHard}, {"evictionSoft", ns.EvictionSoft}} {
		for _, key := range slices.Sorted(maps.Keys(set.m)) {
			t, err := parseThreshold(set.m[key])
			if err != nil {
				return out, fmt.Errorf("kubelet %s[%q]: %w", set.name, key, err)
			}
			switch {
			case key == "memory.available" && i == 0:
				mem[0] = t // a hard threshold replaces the default
			case key == "memory.available":
				mem = append(mem, t)
			case key == "nodefs.available" && i == 0:
				disk[0] = t
			case key == "nodefs.available":
				disk = append(disk, t)
			}
		}
	}
	out.memEviction, out.diskEviction = mem, disk
	return out, nil
}

// parseThreshold reads an eviction threshold: a quantity (100Mi) or a percentage (10%).
func parseThreshold(v string) (threshold, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return threshold{}, fmt.Errorf("%q is not a percentage from 0%% to 100%%", v)
		}
		return threshold{pct: f / 100}, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return threshold{}, fmt.Errorf("%q is neither a quantity nor a percentage", v)
	}
	return threshold{abs: q.Value(), pct: -1}, nil
}

// reserved reads systemReserved or kubeReserved into core units; pid is the kubelet's only.
func reserved(name string, m map[string]string) (ResourceList, error) {
	out := ResourceList{}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		q, err := resource.ParseQuantity(m[key])
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("kubelet %s[%q]: %q is not a non-negative quantity", name, key, m[key])
		}
		switch key {
		case ResourceCPU:
			out[key] = q.MilliValue()
		case ResourceMemory, ResourceEphemeralStorage:
			out[key] = q.Value()
		case "pid":
		default:
			return nil, fmt.Errorf("kubelet %s[%q]: want cpu, memory, ephemeral-storage or pid", name, key)
		}
	}
	return out, nil
}

// NodeResources is the capacity and allocatable a node of the type registers under the
// settings: vCPUs; memory less the VM overhead; pods from maxPods / podsPerCore, else the
// type's ENI limit; ephemeral storage of the root volume, or of the RAIDed instance stores;
// GPUs and accelerators. Allocatable is capacity less kube-reserved (the EKS defaults, each
// replaced by KubeReserved), SystemReserved and the eviction thresholds.
func NodeResources(ct catalog.InstanceType, ns NodeSettings) (capacity, allocatable ResourceList, err error) {
	c, err := ns.compile()
	if err != nil {
		return nil, nil, err
	}
	capacity = c.capacity(ct)
	return capacity, c.allocatable(capacity), nil
}

func (c nodeSettings) capacity(ct catalog.InstanceType) ResourceList {
	pods := int64(ct.MaxPods)
	if c.MaxPods != nil {
		pods = int64(*c.MaxPods)
	}
	if c.PodsPerCore != nil && *c.PodsPerCore > 0 {
		pods = min(pods, int64(*c.PodsPerCore)*int64(ct.VCPU))
	}
	storage := c.RootVolume
	if storage == 0 {
		storage = DefaultRootVolume
	}
	if c.RAID0 && ct.LocalNVMeGiB != nil && *ct.LocalNVMeGiB > 0 {
		storage = *ct.LocalNVMeGiB * GiB
	}
	rl := ResourceList{
		ResourceCPU:              int64(ct.VCPU) * 1000,
		ResourceMemory:           (ct.MemoryMiB - int64(math.Ceil(float64(ct.MemoryMiB)*c.VMMemoryOverhead))) * MiB,
		ResourceEphemeralStorage: storage,
		ResourcePods:             pods,
	}
	if ct.GPUCount > 0 && ct.GPUManufacturer != nil {
		switch *ct.GPUManufacturer {
		case "nvidia":
			rl[ResourceNvidiaGPU] = int64(ct.GPUCount)
		case "amd":
			rl[ResourceAMDGPU] = int64(ct.GPUCount)
		}
	}
	if n := ct.Accelerators(); n > 0 && ct.AcceleratorManufacturer != nil && *ct.AcceleratorManufacturer == "aws" {
		rl[ResourceNeuron] = int64(n)
	}
	return rl
}

// overhead is what the node keeps for itself.
func (c nodeSettings) overhead(capacity ResourceList) ResourceList {
	kube := ResourceList{
		ResourceCPU:              kubeReservedCPU(capacity[ResourceCPU]),
		ResourceMemory:           kubeReservedMemory(capacity[ResourcePods]),
		ResourceEphemeralStorage: kubeReservedEphemeral,
	}
	for n, q := range c.kubeReserved {
		kube[n] = q
	}
	out := ResourceList{}
	for n, q := range kube {
		out[n] = q + c.systemReserved[n]
	}
	out[ResourceMemory] += largest(c.memEviction, capacity[ResourceMemory])
	out[ResourceEphemeralStorage] += largest(c.diskEviction, capacity[ResourceEphemeralStorage])
	return out
}

func (c nodeSettings) allocatable(capacity ResourceList) ResourceList {
	out := ResourceList{}
	for n, q := range capacity {
		out[n] = q
	}
	for n, q := range c.overhead(capacity) {
		out[n] = max(0, out[n]-q)
	}
	return out
}
