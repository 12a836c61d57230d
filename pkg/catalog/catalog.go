// Package catalog holds the EC2 instance-type catalog Fleetwright ships with: the 1,367 types
// of us-east-1 with their sizes, network limits and on-demand prices, and a per-region table of
// Linux on-demand prices and spot price ranges (prices.go; see data/PROVENANCE.md), embedded so
// that every binary and test has the same real data without reading anything at run time.
//
// The catalog carries facts only. A spot price at a given time is not a fact we have:
// SpotPrice models one, and everything that shows one must say it is modelled.
package catalog

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"sync"
)

//go:embed data/instance-types.json
var instanceTypesJSON []byte

// InstanceType is one EC2 instance type as the catalog records it. Pointer fields are null
// in the source where no source gives a value.
type InstanceType struct {
	Name       string `json:"name"`
	Family     string `json:"family"`
	Generation int    `json:"generation"`
	Category   string `json:"category"`
	Size       string `json:"size"`

	VCPU            int     `json:"vcpu"`
	MemoryMiB       int64   `json:"memoryMiB"`
	Arch            string  `json:"arch"` // amd64 or arm64
	CPUManufacturer *string `json:"cpuManufacturer"`

	GPUCount                int     `json:"gpuCount"`
	GPUManufacturer         *string `json:"gpuManufacturer"`
	GPUName                 *string `json:"gpuName"`
	GPUMemoryMiB            *int64  `json:"gpuMemoryMiB"` // per GPU
	AcceleratorCount        *int    `json:"acceleratorCount"`
	AcceleratorManufacturer *string `json:"acceleratorManufacturer"`
	AcceleratorName         *string `json:"acceleratorName"`

	MaxENIs         *int   `json:"maxENIs"`
	MaxENIsAllCards *int   `json:"maxENIsAllCards"`
	IPv4PerENI      *int   `json:"ipv4PerENI"`
	BranchENIs      *int   `json:"branchENIs"`
	MaxPods         int    `json:"maxPods"`
	MaxPodsSource   string `json:"maxPodsSource"` // "eni" or "default" (110)

	Burstable            bool    `json:"burstable"`
	BareMetal            bool    `json:"baremetal"`
	Hypervisor           *string `json:"hypervisor"` // nitro, xen, or null for bare metal
	LocalNVMeGiB         *int64  `json:"localNVMeGiB"`
	NetworkBandwidthMbps *int64  `json:"networkBandwidthMbps"`
	EBSBandwidthMbps     *int64  `json:"ebsBandwidthMbps"`
	// CPUSustainedClockSpeedMhz is the all-core turbo clock; EncryptionInTransitSupported whether
	// traffic between such instances is encrypted (both DescribeInstanceTypes').
	CPUSustainedClockSpeedMhz    *int  `json:"cpuSustainedClockSpeedMhz"`
	EncryptionInTransitSupported *bool `json:"encryptionInTransitSupported"`

	OnDemandPriceUSDPerHour float64 `json:"onDemandPriceUSDPerHour"`
}

// Complete reports whether the type has the specs a scheduler needs (CPU, memory, arch).
// One historical type (cr1.8xlarge) has a price but no specs.
func (t InstanceType) Complete() bool {
	return t.VCPU > 0 && t.MemoryMiB > 0 && t.Arch != ""
}

// Accelerators is the number of Neuron (Inferentia/Trainium) devices, 0 when none.
func (t InstanceType) Accelerators() int {
	if t.AcceleratorCount == nil {
		return 0
	}
	return *t.AcceleratorCount
}

var load = sync.OnceValues(func() ([]InstanceType, error) {
	var all []InstanceType
	if err := json.Unmarshal(instanceTypesJSON, &all); err != nil {
		return nil, fmt.Errorf("decoding embedded instance types: %w", err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all, nil
})

// All returns every type in the catalog, sorted by name, including incomplete ones. The slice
// is shared: callers must not modify it.
func All() []InstanceType {
	all, err := load()
	if err != nil {
		// The data is embedded at build time and covered by tests; failing to decode it is a
		// broken build, not a runtime condition.
		panic(err)
	}
	return all
}

// Schedulable returns the types with complete specs, sorted by name.
func Schedulable() []InstanceType {
	var out []InstanceType
	for _, t := range All() {
		if t.Complete() {
			out = append(out, t)
		}
	}
	return out
}

// Lookup finds a type by name.
func Lookup(name string) (InstanceType, bool) {
	all := All()
	i := sort.Search(len(all), func(i int) bool { return all[i].Name >= name })
	if i < len(all) && all[i].Name == name {
		return all[i], true
	}
	return InstanceType{}, false
}

// SpotPriceModel documents how SpotPrice invents spot prices. It is a model, not data.
const SpotPriceModel = "modelled: on-demand × (0.30 + 0.40 × h(type, zone)), h a stable hash in [0,1); " +
	"deterministic per type and zone, always 30–70% of on-demand"

// SpotPrice returns the modelled spot price (USD/h) of a type in a zone: a deterministic
// discount of 30–70% off on-demand, stable per (type, zone), so that zones differ and tests can
// rely on the same numbers every run. It is not real data: see SpotPriceModel.
func SpotPrice(t InstanceType, zone string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(t.Name))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(zone))
	frac := float64(h.Sum64()%10000) / 10000
	p := t.OnDemandPriceUSDPerHour * (0.30 + 0.40*frac)
	return math.Round(p*1e5) / 1e5
}
