package scheduling

import (
	"strconv"
	"strings"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// Offering is one way to buy an instance type: a zone and a capacity type at a price.
// Available is false while the offering is known to be out of capacity.
type Offering struct {
	Zone            string
	CapacityType    string
	PriceUSDPerHour float64
	Available       bool
}

// InstanceType is an instance type as the scheduler sees it: the labels a node of this type
// carries (excluding zone and capacity type, which come from the offering), its capacity, and
// its offerings.
type InstanceType struct {
	Name      string
	Labels    map[string]string
	Capacity  ResourceList
	Offerings []Offering
	// Facts are the catalog's facts of the type (FromCatalog sets them): with them, a pool whose
	// node class has its own NodeSettings plans the type's capacity under those (NodeResources).
	// Without, every pool plans with Capacity and Allocatable.
	Facts *catalog.InstanceType
}

// Resources is the capacity and allocatable of a node of the type under ns; nil ns (or a type
// without Facts) gives Capacity and Allocatable.
func (t InstanceType) Resources(ns *NodeSettings) (capacity, allocatable ResourceList, err error) {
	if ns == nil || t.Facts == nil {
		return t.Capacity, t.Allocatable(), nil
	}
	return NodeResources(*t.Facts, *ns)
}

// Overhead is what the node keeps for itself: kube-reserved and the eviction threshold.
func (t InstanceType) Overhead() ResourceList { return nodeOverhead(t.Capacity) }

// Allocatable is capacity less overhead.
func (t InstanceType) Allocatable() ResourceList {
	out := ResourceList{}
	for n, q := range t.Capacity {
		out[n] = q
	}
	for n, q := range t.Overhead() {
		out[n] -= q
	}
	return out
}

// FromCatalog builds the scheduler's instance types from catalog types, offering each in every
// zone both on demand (catalog price) and as spot (catalog.SpotPrice, modelled).
func FromCatalog(types []catalog.InstanceType, zones []string) []InstanceType {
	out := make([]InstanceType, 0, len(types))
	for _, ct := range types {
		if !ct.Complete() {
			continue
		}
		facts := ct
		t := InstanceType{Name: ct.Name, Labels: TypeLabels(ct), Capacity: TypeCapacity(ct), Facts: &facts}
		for _, z := range zones {
			t.Offerings = append(t.Offerings,
				Offering{Zone: z, CapacityType: CapacityTypeSpot, PriceUSDPerHour: catalog.SpotPrice(ct, z), Available: true},
				Offering{Zone: z, CapacityType: CapacityTypeOnDemand, PriceUSDPerHour: ct.OnDemandPriceUSDPerHour, Available: true})
		}
		out = append(out, t)
	}
	return out
}

// TypeCapacity is the capacity a node of the type registers under DefaultNodeSettings: its
// vCPUs, its memory less what the hypervisor and kernel keep (VMMemoryOverhead, as Karpenter
// models it), its pods, the default root volume and its GPUs and accelerators.
func TypeCapacity(ct catalog.InstanceType) ResourceList {
	c, _ := DefaultNodeSettings().compile()
	return c.capacity(ct)
}

// TypeLabels derives Karpenter's well-known labels of an instance type: instance-memory in MiB,
// instance-cpu in vCPUs, GPU memory in MiB, local NVMe in GiB, bandwidths in Mbps, names in
// lower case; a fact the catalog does not have gives no label (never an empty one).
func TypeLabels(ct catalog.InstanceType) map[string]string {
	l := map[string]string{
		LabelInstanceType:   ct.Name,
		LabelArch:           ct.Arch,
		LabelOS:             "linux",
		LabelInstanceCPU:    strconv.Itoa(ct.VCPU),
		LabelInstanceMemory: strconv.FormatInt(ct.MemoryMiB, 10),
	}
	set := func(key string, v *string) {
		if v != nil && *v != "" {
			l[key] = strings.ToLower(*v)
		}
	}
	set(LabelInstanceCategory, &ct.Category)
	set(LabelInstanceFamily, &ct.Family)
	set(LabelInstanceSize, &ct.Size)
	if ct.Generation > 0 {
		l[LabelInstanceGeneration] = strconv.Itoa(ct.Generation)
	}
	setInt := func(key string, v *int64) {
		if v != nil {
			l[key] = strconv.FormatInt(*v, 10)
		}
	}
	set(LabelInstanceHypervisor, ct.Hypervisor)
	set(LabelInstanceCPUManufacturer, ct.CPUManufacturer)
	if ct.GPUCount > 0 {
		l[LabelInstanceGPUCount] = strconv.Itoa(ct.GPUCount)
		set(LabelInstanceGPUName, ct.GPUName)
		set(LabelInstanceGPUManufacturer, ct.GPUManufacturer)
		setInt(LabelInstanceGPUMemory, ct.GPUMemoryMiB)
	}
	if n := ct.Accelerators(); n > 0 {
		l[LabelInstanceAccelCount] = strconv.Itoa(n)
		set(LabelInstanceAccelName, ct.AcceleratorName)
		set(LabelInstanceAccelMfr, ct.AcceleratorManufacturer)
	}
	setInt(LabelInstanceLocalNVMe, ct.LocalNVMeGiB)
	setInt(LabelInstanceNetworkBW, ct.NetworkBandwidthMbps)
	setInt(LabelInstanceEBSBW, ct.EBSBandwidthMbps)
	if ct.CPUSustainedClockSpeedMhz != nil {
		l[LabelInstanceCPUClock] = strconv.Itoa(*ct.CPUSustainedClockSpeedMhz)
	}
	if ct.EncryptionInTransitSupported != nil {
		l[LabelInstanceEncryptTransit] = strconv.FormatBool(*ct.EncryptionInTransitSupported)
	}
	// As Karpenter: from the family's name (m7i-flex, c7i-flex).
	l[LabelInstanceCapabilityFlex] = strconv.FormatBool(strings.Contains(ct.Family, "-flex"))
	return l
}
