package awsemu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

// This file answers the catalog calls: DescribeInstanceTypes, DescribeInstanceTypeOfferings
// and DescribeSpotPriceHistory. Every complete catalog type is offered in every zone.

type instanceTypeXML struct {
	InstanceType        string   `xml:"instanceType"`
	CurrentGeneration   bool     `xml:"currentGeneration"`
	FreeTierEligible    bool     `xml:"freeTierEligible"`
	UsageClasses        []string `xml:"supportedUsageClasses>item"`
	RootDeviceTypes     []string `xml:"supportedRootDeviceTypes>item"`
	VirtualizationTypes []string `xml:"supportedVirtualizationTypes>item"`
	BareMetal           bool     `xml:"bareMetal"`
	Hypervisor          string   `xml:"hypervisor,omitempty"`
	Processor           struct {
		Architectures  []string `xml:"supportedArchitectures>item"`
		Manufacturer   string   `xml:"manufacturer,omitempty"`
		SustainedClock float64  `xml:"sustainedClockSpeedInGhz,omitempty"`
	} `xml:"processorInfo"`
	VCPU struct {
		Default int `xml:"defaultVCpus"`
	} `xml:"vCpuInfo"`
	Memory struct {
		SizeInMiB int64 `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
	StorageSupported bool        `xml:"instanceStorageSupported"`
	Storage          *storageXML `xml:"instanceStorageInfo,omitempty"`
	EBS              struct {
		OptimizedSupport  string `xml:"ebsOptimizedSupport"`
		EncryptionSupport string `xml:"encryptionSupport"`
		NvmeSupport       string `xml:"nvmeSupport"`
		Optimized         *struct {
			BaselineMbps int64 `xml:"baselineBandwidthInMbps"`
			MaximumMbps  int64 `xml:"maximumBandwidthInMbps"`
		} `xml:"ebsOptimizedInfo,omitempty"`
	} `xml:"ebsInfo"`
	Network struct {
		Performance         string           `xml:"networkPerformance"`
		MaxInterfaces       int              `xml:"maximumNetworkInterfaces"`
		MaxCards            int              `xml:"maximumNetworkCards"`
		DefaultCardIndex    int              `xml:"defaultNetworkCardIndex"`
		Cards               []networkCardXML `xml:"networkCards>item"`
		IPv4PerInterface    int              `xml:"ipv4AddressesPerInterface"`
		IPv6PerInterface    int              `xml:"ipv6AddressesPerInterface"`
		IPv6Supported       bool             `xml:"ipv6Supported"`
		EnaSupport          string           `xml:"enaSupport"`
		EfaSupported        bool             `xml:"efaSupported"`
		EncryptionInTransit bool             `xml:"encryptionInTransitSupported"`
	} `xml:"networkInfo"`
	GPU                   *gpuInfoXML    `xml:"gpuInfo,omitempty"`
	Neuron                *neuronInfoXML `xml:"neuronInfo,omitempty"`
	Burstable             bool           `xml:"burstablePerformanceSupported"`
	HibernationSupported  bool           `xml:"hibernationSupported"`
	DedicatedHosts        bool           `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported bool           `xml:"autoRecoverySupported"`
	BootModes             []string       `xml:"supportedBootModes>item"`
}

type storageXML struct {
	TotalSizeInGB int64  `xml:"totalSizeInGB"`
	NvmeSupport   string `xml:"nvmeSupport"`
}

type networkCardXML struct {
	Index         int     `xml:"networkCardIndex"`
	Performance   string  `xml:"networkPerformance"`
	MaxInterfaces int     `xml:"maximumNetworkInterfaces"`
	BaselineGbps  float64 `xml:"baselineBandwidthInGbps"`
	PeakGbps      float64 `xml:"peakBandwidthInGbps"`
}

type gpuInfoXML struct {
	GPUs []struct {
		Name         string `xml:"name"`
		Manufacturer string `xml:"manufacturer"`
		Count        int    `xml:"count"`
		MemoryMiB    int64  `xml:"memoryInfo>sizeInMiB"`
	} `xml:"gpus>item"`
	TotalMemoryMiB int64 `xml:"totalGpuMemoryInMiB"`
}

type neuronInfoXML struct {
	Devices []struct {
		Name  string `xml:"name"`
		Count int    `xml:"count"`
	} `xml:"neuronDevices>item"`
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// currentGeneration approximates EC2's flag: generation 3 and later, plus t2.
func currentGeneration(t catalog.InstanceType) bool {
	return t.Generation >= 3 || strings.HasPrefix(t.Family, "t2")
}

// instanceTypeInfo renders a catalog type the way DescribeInstanceTypes does.
func instanceTypeInfo(t catalog.InstanceType) instanceTypeXML {
	var x instanceTypeXML
	x.InstanceType = t.Name
	x.CurrentGeneration = currentGeneration(t)
	x.UsageClasses = []string{"on-demand", "spot"}
	x.RootDeviceTypes = []string{"ebs"}
	x.VirtualizationTypes = []string{"hvm"}
	x.BareMetal = t.BareMetal
	x.Hypervisor = deref(t.Hypervisor)
	arch := "x86_64"
	if t.Arch == "arm64" {
		arch = "arm64"
	}
	x.Processor.Architectures = []string{arch}
	x.Processor.Manufacturer = deref(t.CPUManufacturer)
	x.Processor.SustainedClock = float64(deref(t.CPUSustainedClockSpeedMhz)) / 1000
	x.Network.EncryptionInTransit = deref(t.EncryptionInTransitSupported)
	x.VCPU.Default = t.VCPU
	x.Memory.SizeInMiB = t.MemoryMiB
	if t.LocalNVMeGiB != nil && *t.LocalNVMeGiB > 0 {
		x.StorageSupported = true
		x.Storage = &storageXML{TotalSizeInGB: int64(float64(*t.LocalNVMeGiB) * 1.073741824), NvmeSupport: "required"}
	}
	x.EBS.OptimizedSupport = "default"
	x.EBS.EncryptionSupport = "supported"
	x.EBS.NvmeSupport = "required"
	if t.EBSBandwidthMbps != nil {
		x.EBS.Optimized = &struct {
			BaselineMbps int64 `xml:"baselineBandwidthInMbps"`
			MaximumMbps  int64 `xml:"maximumBandwidthInMbps"`
		}{*t.EBSBandwidthMbps, *t.EBSBandwidthMbps}
	}
	enis := deref(t.MaxENIs)
	perf := "Unknown"
	if t.NetworkBandwidthMbps != nil {
		perf = fmt.Sprintf("Up to %g Gigabit", float64(*t.NetworkBandwidthMbps)/1000)
	}
	x.Network.Performance = perf
	x.Network.MaxInterfaces = max(enis, deref(t.MaxENIsAllCards))
	x.Network.MaxCards = 1
	x.Network.Cards = []networkCardXML{{Index: 0, Performance: perf, MaxInterfaces: enis,
		BaselineGbps: float64(deref(t.NetworkBandwidthMbps)) / 1000, PeakGbps: float64(deref(t.NetworkBandwidthMbps)) / 1000}}
	x.Network.IPv4PerInterface = deref(t.IPv4PerENI)
	x.Network.IPv6PerInterface = deref(t.IPv4PerENI)
	x.Network.IPv6Supported = true
	x.Network.EnaSupport = "supported"
	if t.GPUCount > 0 {
		g := &gpuInfoXML{}
		g.GPUs = append(g.GPUs, struct {
			Name         string `xml:"name"`
			Manufacturer string `xml:"manufacturer"`
			Count        int    `xml:"count"`
			MemoryMiB    int64  `xml:"memoryInfo>sizeInMiB"`
		}{deref(t.GPUName), deref(t.GPUManufacturer), t.GPUCount, deref(t.GPUMemoryMiB)})
		g.TotalMemoryMiB = int64(t.GPUCount) * deref(t.GPUMemoryMiB)
		x.GPU = g
	}
	if n := t.Accelerators(); n > 0 {
		x.Neuron = &neuronInfoXML{}
		x.Neuron.Devices = append(x.Neuron.Devices, struct {
			Name  string `xml:"name"`
			Count int    `xml:"count"`
		}{deref(t.AcceleratorName), n})
	}
	x.Burstable = t.Burstable
	x.AutoRecoverySupported = true
	x.BootModes = []string{"legacy-bios", "uefi"}
	return x
}

type describeInstanceTypesResp struct {
	ec2Resp
	Types     []instanceTypeXML `xml:"instanceTypeSet>item"`
	NextToken string            `xml:"nextToken,omitempty"`
}

var typeFields = fieldFilters[catalog.InstanceType]{
	"instance-type": func(t catalog.InstanceType) []string { return []string{t.Name} },
	"processor-info.supported-architecture": func(t catalog.InstanceType) []string {
		return []string{map[string]string{"amd64": "x86_64", "arm64": "arm64"}[t.Arch]}
	},
	"vcpu-info.default-vcpus":         func(t catalog.InstanceType) []string { return []string{strconv.Itoa(t.VCPU)} },
	"memory-info.size-in-mib":         func(t catalog.InstanceType) []string { return []string{strconv.FormatInt(t.MemoryMiB, 10)} },
	"current-generation":              func(t catalog.InstanceType) []string { return []string{strconv.FormatBool(currentGeneration(t))} },
	"bare-metal":                      func(t catalog.InstanceType) []string { return []string{strconv.FormatBool(t.BareMetal)} },
	"burstable-performance-supported": func(t catalog.InstanceType) []string { return []string{strconv.FormatBool(t.Burstable)} },
	"hypervisor":                      func(t catalog.InstanceType) []string { return []string{deref(t.Hypervisor)} },
	"supported-usage-class":           func(catalog.InstanceType) []string { return []string{"on-demand", "spot"} },
	"instance-storage-supported":      func(t catalog.InstanceType) []string { return []string{strconv.FormatBool(deref(t.LocalNVMeGiB) > 0)} },
	"supported-virtualization-type":   func(catalog.InstanceType) []string { return []string{"hvm"} },
}

func (e *Emulator) describeInstanceTypes(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(fs, typeFields, false); err != nil {
		return nil, err
	}
	names := list(req.Form, "InstanceType")
	if len(names) > 0 && req.Form.Get("MaxResults") != "" {
		return nil, &apiError{Status: 400, Code: "InvalidParameterCombination", Message: "The parameter InstanceTypes cannot be used with the parameter MaxResults"}
	}
	pg, err := parsePage(req.Form, 5, 100, 100)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := e.world.instanceType(n); !ok {
			return nil, errInvalidParameter("The following supplied instance types do not exist: [%s]", n)
		}
	}
	var matched []catalog.InstanceType
	for _, t := range e.world.types {
		if len(names) > 0 && !slices.Contains(names, t.Name) {
			continue
		}
		if ok, _ := matchFilters(t, fs, typeFields, nil); ok {
			matched = append(matched, t)
		}
	}
	from, to, next := pg.cut(len(matched))
	out := &describeInstanceTypesResp{NextToken: next}
	for _, t := range matched[from:to] {
		out.Types = append(out.Types, instanceTypeInfo(t))
	}
	return out, nil
}

type offeringXML struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type describeOfferingsResp struct {
	ec2Resp
	Offerings []offeringXML `xml:"instanceTypeOfferingSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}

var offeringFields = fieldFilters[offeringXML]{
	"instance-type": func(o offeringXML) []string { return []string{o.InstanceType} },
	"location":      func(o offeringXML) []string { return []string{o.Location} },
}

func (e *Emulator) describeInstanceTypeOfferings(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(fs, offeringFields, false); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	locType := req.Form.Get("LocationType")
	var locations []string
	switch locType {
	case "", "region":
		locType, locations = "region", []string{e.world.region}
	case "availability-zone":
		for _, z := range e.world.zones {
			locations = append(locations, z.Name)
		}
	case "availability-zone-id":
		for _, z := range e.world.zones {
			locations = append(locations, z.ID)
		}
	default:
		return nil, errInvalidParameter("Value (%s) for parameter locationType is invalid", locType)
	}
	var all []offeringXML
	for _, t := range e.world.types {
		for _, l := range locations {
			o := offeringXML{InstanceType: t.Name, LocationType: locType, Location: l}
			if ok, _ := matchFilters(o, fs, offeringFields, nil); ok {
				all = append(all, o)
			}
		}
	}
	from, to, next := pg.cut(len(all))
	return &describeOfferingsResp{Offerings: all[from:to], NextToken: next}, nil
}

type spotPriceXML struct {
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
	AvailabilityZone   string `xml:"availabilityZone"`
}

type describeSpotPriceHistoryResp struct {
	ec2Resp
	Prices    []spotPriceXML `xml:"spotPriceHistorySet>item"`
	NextToken string         `xml:"nextToken"`
}

var spotFields = fieldFilters[spotPriceXML]{
	"instance-type":       func(p spotPriceXML) []string { return []string{p.InstanceType} },
	"availability-zone":   func(p spotPriceXML) []string { return []string{p.AvailabilityZone} },
	"product-description": func(p spotPriceXML) []string { return []string{p.ProductDescription} },
}

// spotHistoryDays is how far back EC2 keeps spot price history.
const spotHistoryDays = 90

// spotPrice is a type's spot price in a zone during a step of catalog.SpotPriceStep, in
// the emulator's region (catalog.ModelledSpotPrice); steady prices hold step 0's.
func (e *Emulator) spotPrice(t catalog.InstanceType, zone string, step int64) (float64, bool) {
	if e.cfg.SteadySpotPrices {
		step = 0
	}
	return catalog.ModelledSpotPrice(e.world.region, t.Name, zone, step)
}

// spotStep is the step of catalog.SpotPriceStep that holds t.
func spotStep(t time.Time) int64 { return t.Unix() / int64(catalog.SpotPriceStep/time.Second) }

// describeSpotPriceHistory returns, per type and zone of the emulator's region, the modelled
// price (catalog.RegionalSpotPriceModel) of every step of catalog.SpotPriceStep from the one in
// effect at StartTime to the one at EndTime (default now; no StartTime: EndTime's only), newest
// first, as EC2 lists them. Each point's timestamp is when its step began.
func (e *Emulator) describeSpotPriceHistory(req *ec2Request) (requestIDSetter, error) {
	fs := parseFilters(req.Form)
	if err := validateFilters(fs, spotFields, false); err != nil {
		return nil, err
	}
	pg, err := parsePage(req.Form, 1, 10000, 1000)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Clock.Now().UTC()
	end, err := formTime(req.Form.Get("EndTime"), "EndTime", now)
	if err != nil {
		return nil, err
	}
	if end.After(now) {
		end = now
	}
	start, err := formTime(req.Form.Get("StartTime"), "StartTime", end)
	if err != nil {
		return nil, err
	}
	if start.After(end) {
		start = end // a start in the future: the price in effect now
	}
	if limit := now.AddDate(0, 0, -spotHistoryDays); start.Before(limit) {
		start = limit
	}
	newest, oldest := spotStep(end), spotStep(start)
	steps := int(newest-oldest) + 1

	types, products := list(req.Form, "InstanceType"), list(req.Form, "ProductDescription")
	zoneParam := req.Form.Get("AvailabilityZone")
	type pair struct {
		t    catalog.InstanceType
		zone string
	}
	var pairs []pair
	for _, t := range e.world.types {
		if len(types) > 0 && !slices.Contains(types, t.Name) {
			continue
		}
		for _, z := range e.world.zones {
			if zoneParam != "" && z.Name != zoneParam {
				continue
			}
			if _, ok := e.spotPrice(t, z.Name, newest); !ok {
				continue // no price of any kind in this region
			}
			p := spotPriceXML{InstanceType: t.Name, ProductDescription: "Linux/UNIX", AvailabilityZone: z.Name}
			if len(products) > 0 && !matchesAny(p.ProductDescription, products) {
				continue
			}
			if ok, _ := matchFilters(p, fs, spotFields, nil); ok {
				pairs = append(pairs, pair{t, z.Name})
			}
		}
	}
	// Row i is step newest − i/len(pairs) of pair i%len(pairs): only the page asked for is made.
	from, to, next := pg.cut(steps * len(pairs))
	out := &describeSpotPriceHistoryResp{NextToken: next}
	stepLen := int64(catalog.SpotPriceStep / time.Second)
	for i := from; i < to; i++ {
		step, p := newest-int64(i/len(pairs)), pairs[i%len(pairs)]
		price, _ := e.spotPrice(p.t, p.zone, step)
		out.Prices = append(out.Prices, spotPriceXML{InstanceType: p.t.Name, ProductDescription: "Linux/UNIX",
			SpotPrice: strconv.FormatFloat(price, 'f', 6, 64), AvailabilityZone: p.zone,
			Timestamp: time.Unix(step*stepLen, 0).UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	return out, nil
}

// formTime parses an ISO 8601 time parameter; an absent one is def.
func formTime(v, name string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return def, errInvalidParameter("Value (%s) for parameter %s is invalid. It must be an ISO 8601 date.", v, name)
	}
	return t.UTC(), nil
}
