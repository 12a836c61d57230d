package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetwright/fleetwright/pkg/catalog"
	catalogv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/catalog/v1"
	commonv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/common/v1"
)

// catalogBuilder assembles the instance catalog the scheduler packs against: the types EC2
// describes, the zones that offer each, spot prices from the spot price history (asked at every
// build), and on-demand prices from the Pricing API for the region (asked every
// --on-demand-price-refresh), falling back per type to the embedded per-region table
// (pkg/catalog). A type with no price at all is left out: the scheduler could not rank it.
type catalogBuilder struct {
	api    EC2API
	region string
	// onDemand are the Pricing API's prices; nil: the embedded table alone.
	onDemand *onDemandPrices
	// spotModelled marks spot prices as modelled (true against the AWS emulator, whose spot
	// price history is a model; false against real EC2).
	spotModelled bool
	now          func() time.Time
}

// priceReport is how a build priced the types: how many from where, and which had no price.
type priceReport struct {
	api, embedded int
	unpriced      []string // sorted
	unknown       []string // types EC2 describes that the embedded type table does not know, sorted
	apiErr        error    // the Pricing API's last failure, if its prices are not current
}

func (b catalogBuilder) build(ctx context.Context) (*catalogv1.Catalog, priceReport, error) {
	var report priceReport
	infos, err := b.instanceTypes(ctx)
	if err != nil {
		return nil, report, err
	}
	zones, err := b.offerings(ctx)
	if err != nil {
		return nil, report, err
	}
	spot, err := b.spotPrices(ctx)
	if err != nil {
		return nil, report, err
	}
	apiPrices, fetched, apiErr := b.onDemand.current(ctx)
	report.apiErr = apiErr
	out := &catalogv1.Catalog{GenerateTime: timestamppb.New(b.now()), Region: b.region}
	for _, info := range infos {
		name := string(info.InstanceType)
		it := instanceType(info)
		// Karpenter's labels for category and generation come from its tables, as ours do, and
		// so do max pods: a type the embedded table does not know is left out.
		known, ok := catalog.Lookup(name)
		if !ok {
			report.unknown = append(report.unknown, name)
			continue
		}
		it.Category, it.Generation = known.Category, int32(known.Generation)
		it.MaxPods = int32(known.MaxPods)
		it.Burstable = known.Burstable
		price, source := onDemandPrice(apiPrices, b.region, name)
		switch source {
		case priceUnknown:
			report.unpriced = append(report.unpriced, name)
			continue // no price: the scheduler could not rank it
		case priceAPI:
			report.api++
		case priceEmbedded:
			report.embedded++
		}
		for _, zone := range zones[name] {
			it.Offerings = append(it.Offerings, &catalogv1.Offering{
				Zone: zone, CapacityType: commonv1.CapacityType_CAPACITY_TYPE_ON_DEMAND,
				PriceUsdPerHour: price, Available: true,
			})
			if supportsSpot(info) {
				if p, ok := spot[name+"/"+zone]; ok {
					it.Offerings = append(it.Offerings, &catalogv1.Offering{
						Zone: zone, CapacityType: commonv1.CapacityType_CAPACITY_TYPE_SPOT,
						PriceUsdPerHour: p, Available: true, PriceIsModelled: b.spotModelled,
					})
				}
			}
		}
		if len(it.Offerings) > 0 {
			out.InstanceTypes = append(out.InstanceTypes, it)
		}
	}
	sort.Slice(out.InstanceTypes, func(i, j int) bool { return out.InstanceTypes[i].Name < out.InstanceTypes[j].Name })
	sort.Strings(report.unpriced)
	sort.Strings(report.unknown)
	out.Source = b.source(report, fetched)
	return out, report, nil
}

// source says where the catalog's facts and prices came from.
func (b catalogBuilder) source(r priceReport, fetched time.Time) string {
	spot := "EC2 DescribeSpotPriceHistory"
	if b.spotModelled {
		spot += " (modelled)"
	}
	var onDemand []string
	if r.api > 0 {
		onDemand = append(onDemand, fmt.Sprintf("AWS Pricing API GetProducts of %s for %d types", fetched.UTC().Format(time.RFC3339), r.api))
	}
	if r.embedded > 0 {
		onDemand = append(onDemand, fmt.Sprintf("embedded %s table (%s) for %d types", b.region, catalog.PriceTableSource, r.embedded))
	}
	s := fmt.Sprintf("EC2 DescribeInstanceTypes/DescribeInstanceTypeOfferings; spot prices: %s; on-demand prices (%s): %s",
		spot, b.region, strings.Join(onDemand, ", "))
	if len(r.unpriced) > 0 {
		s += fmt.Sprintf("; %d types left out, unpriced", len(r.unpriced))
	}
	if len(r.unknown) > 0 {
		s += fmt.Sprintf("; %d types left out, not in the embedded type table", len(r.unknown))
	}
	return s
}

func (b catalogBuilder) instanceTypes(ctx context.Context) ([]ec2types.InstanceTypeInfo, error) {
	var all []ec2types.InstanceTypeInfo
	for page, err := range pages(ctx, ec2.NewDescribeInstanceTypesPaginator(b.api, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})) {
		if err != nil {
			return nil, fmt.Errorf("describing instance types: %w", err)
		}
		all = append(all, page.InstanceTypes...)
	}
	return all, nil
}

// offerings maps instance type → zones that offer it.
func (b catalogBuilder) offerings(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	p := ec2.NewDescribeInstanceTypeOfferingsPaginator(b.api, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, MaxResults: aws.Int32(1000),
	})
	for page, err := range pages(ctx, p) {
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			name := string(o.InstanceType)
			out[name] = append(out[name], deref(o.Location))
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out, nil
}

// spotPrices returns the latest Linux spot price per "type/zone".
func (b catalogBuilder) spotPrices(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	seen := map[string]time.Time{}
	p := ec2.NewDescribeSpotPriceHistoryPaginator(b.api, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(b.now()),
		MaxResults:          aws.Int32(1000),
	})
	for page, err := range pages(ctx, p) {
		if err != nil {
			return nil, fmt.Errorf("describing spot price history: %w", err)
		}
		for _, sp := range page.SpotPriceHistory {
			key := string(sp.InstanceType) + "/" + deref(sp.AvailabilityZone)
			price, err := strconv.ParseFloat(deref(sp.SpotPrice), 64)
			if err != nil {
				continue
			}
			if ts := deref(sp.Timestamp); ts.After(seen[key]) || seen[key].IsZero() {
				seen[key] = ts
				out[key] = price
			}
		}
	}
	return out, nil
}

func supportsSpot(info ec2types.InstanceTypeInfo) bool {
	for _, c := range info.SupportedUsageClasses {
		if c == ec2types.UsageClassTypeSpot {
			return true
		}
	}
	return false
}

// instanceType maps EC2's description onto the catalog message.
func instanceType(info ec2types.InstanceTypeInfo) *catalogv1.InstanceType {
	name := string(info.InstanceType)
	family, size, _ := strings.Cut(name, ".")
	it := &catalogv1.InstanceType{
		Name: name, Family: family, Size: size,
		Hypervisor:       string(info.Hypervisor),
		BareMetal:        aws.ToBool(info.BareMetal),
		OperatingSystems: []string{"linux"},
	}
	if v := info.VCpuInfo; v != nil {
		it.Vcpu = aws.ToInt32(v.DefaultVCpus)
	}
	if m := info.MemoryInfo; m != nil {
		it.MemoryMib = aws.ToInt64(m.SizeInMiB)
	}
	if p := info.ProcessorInfo; p != nil {
		for _, a := range p.SupportedArchitectures {
			switch a {
			case ec2types.ArchitectureTypeX8664:
				it.Architecture = "amd64"
			case ec2types.ArchitectureTypeArm64:
				it.Architecture = "arm64"
			}
		}
		it.CpuManufacturer = strings.ToLower(aws.ToString(p.Manufacturer))
		// GHz to MHz, rounded, as Karpenter's instance-cpu-sustained-clock-speed-mhz.
		it.CpuSustainedClockSpeedMhz = int32(math.Round(aws.ToFloat64(p.SustainedClockSpeedInGhz) * 1000))
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) > 0 {
		gpu := g.Gpus[0]
		it.GpuCount = aws.ToInt32(gpu.Count)
		it.GpuManufacturer = strings.ToLower(aws.ToString(gpu.Manufacturer))
		it.GpuName = strings.ToLower(aws.ToString(gpu.Name))
		if gpu.MemoryInfo != nil {
			it.GpuMemoryMib = int64(aws.ToInt32(gpu.MemoryInfo.SizeInMiB))
		}
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		it.AcceleratorCount = aws.ToInt32(d.Count)
		it.AcceleratorName = strings.ToLower(aws.ToString(d.Name))
		it.AcceleratorManufacturer = "aws"
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported {
		it.LocalNvmeGib = aws.ToInt64(s.TotalSizeInGB)
	}
	if n := info.NetworkInfo; n != nil {
		it.MaxEnis = aws.ToInt32(n.MaximumNetworkInterfaces)
		it.EncryptionInTransitSupported = aws.ToBool(n.EncryptionInTransitSupported)
		it.Ipv4PerEni = aws.ToInt32(n.Ipv4AddressesPerInterface)
		if len(n.NetworkCards) > 0 && n.NetworkCards[0].BaselineBandwidthInGbps != nil {
			it.NetworkBandwidthMbps = int64(*n.NetworkCards[0].BaselineBandwidthInGbps * 1000)
		}
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil {
		it.EbsBandwidthMbps = int64(aws.ToInt32(e.EbsOptimizedInfo.BaselineBandwidthInMbps))
	}
	return it
}
