package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetwright/fleetwright/pkg/scheduling"
)

// subnet is a resolved subnet of the node class.
type subnet struct {
	ID     string
	Zone   string
	ZoneID string // e.g. use1-az1: the same physical zone in every account, unlike the name
	// FreeIPs is how many addresses the subnet has left, when it was resolved.
	FreeIPs int32
}

// fleetRequest is one instant CreateFleet for one NodeClaim.
type fleetRequest struct {
	ClientToken   string            // the NodeClaim's UID: a retried launch returns the same instance
	CapacityType  string            // spot or on-demand
	InstanceTypes []fleetType       // cheapest first
	Subnets       []subnet          // one per allowed zone with an offering
	Unavailable   map[Offering]bool // pools known to be out of capacity, skipped
	Tags          map[string]string
	Context       string // the node class's: reserved capacity or an Outpost to launch into
}

// fleetType is an instance type and the launch template (per AMI, so per architecture) it
// boots from.
type fleetType struct {
	Name           string
	LaunchTemplate string
}

// launched is the instance CreateFleet started.
type launched struct {
	InstanceID   string
	InstanceType string
	Zone         string
	SubnetID     string
	CapacityType string
}

// maxOverrides bounds the request the way EC2 does (it rejects more than 300 overrides).
const maxOverrides = 300

// configs crosses instance types with subnets, cheapest type first, skipping pools known to
// be unavailable, grouped into one launch-template config per template. Priority follows the
// order, which on-demand's lowest-price ignores and spot's price-capacity-optimized uses only
// as a tie-break.
func (r fleetRequest) configs() []ec2types.FleetLaunchTemplateConfigRequest {
	var out []ec2types.FleetLaunchTemplateConfigRequest
	index := map[string]int{}
	n := 0
	for _, it := range r.InstanceTypes {
		for _, s := range r.Subnets {
			if n == maxOverrides {
				return out
			}
			if r.Unavailable[Offering{InstanceType: it.Name, Zone: s.Zone, CapacityType: r.CapacityType}] {
				continue
			}
			i, ok := index[it.LaunchTemplate]
			if !ok {
				i = len(out)
				index[it.LaunchTemplate] = i
				out = append(out, ec2types.FleetLaunchTemplateConfigRequest{
					LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
						LaunchTemplateName: aws.String(it.LaunchTemplate),
						Version:            aws.String("$Latest"),
					},
				})
			}
			out[i].Overrides = append(out[i].Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType:     ec2types.InstanceType(it.Name),
				SubnetId:         aws.String(s.ID),
				AvailabilityZone: aws.String(s.Zone),
				Priority:         aws.Float64(float64(n)),
			})
			n++
		}
	}
	return out
}

func (r fleetRequest) input() *ec2.CreateFleetInput {
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(r.ClientToken),
		LaunchTemplateConfigs: r.configs(),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1),
		},
		TagSpecifications: tagSpecs(r.Tags, ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeFleet),
	}
	if r.Context != "" {
		in.Context = aws.String(r.Context)
	}
	if r.CapacityType == scheduling.CapacityTypeSpot {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeSpot
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeOnDemand
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in
}

var errNoOverrides = errors.New("no instance type × subnet left to try: every offering is unavailable or no subnet matches the allowed zones")

// createFleet launches one instance. A fleet that launched nothing because every pool was out
// of capacity returns *InsufficientCapacityError naming the pools; any pools reported
// exhausted alongside a successful launch are returned too, to be marked unavailable.
func createFleet(ctx context.Context, api EC2API, r fleetRequest) (launched, []Offering, error) {
	in := r.input()
	if len(in.LaunchTemplateConfigs) == 0 {
		return launched{}, nil, errNoOverrides
	}
	out, err := api.CreateFleet(ctx, in)
	if err != nil {
		return launched{}, nil, fmt.Errorf("creating fleet: %w", err)
	}
	unavailable, other := fleetErrors(out)
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) == 0 {
			continue
		}
		l := launched{InstanceID: inst.InstanceIds[0], InstanceType: string(inst.InstanceType), CapacityType: string(inst.Lifecycle)}
		if l.CapacityType == "" {
			l.CapacityType = r.CapacityType
		}
		if o := inst.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
			l.Zone, l.SubnetID = deref(o.Overrides.AvailabilityZone), deref(o.Overrides.SubnetId)
			if l.Zone == "" {
				l.Zone = r.zoneOf(l.SubnetID)
			}
			if l.SubnetID == "" {
				l.SubnetID = r.subnetOf(l.Zone)
			}
		}
		return l, unavailable, nil
	}
	if len(other) == 0 && len(unavailable) > 0 {
		return launched{}, unavailable, &InsufficientCapacityError{Offerings: unavailable}
	}
	if len(other) == 0 {
		other = []string{"CreateFleet returned no instance and no error"}
	}
	return launched{}, unavailable, fmt.Errorf("creating fleet: %s", strings.Join(other, "; "))
}

func (r fleetRequest) zoneOf(subnetID string) string {
	for _, s := range r.Subnets {
		if s.ID == subnetID {
			return s.Zone
		}
	}
	return ""
}

// subnetOf is the request's subnet in the zone (one per zone).
func (r fleetRequest) subnetOf(zone string) string {
	for _, s := range r.Subnets {
		if s.Zone == zone {
			return s.ID
		}
	}
	return ""
}

func tagSpecs(tags map[string]string, kinds ...ec2types.ResourceType) []ec2types.TagSpecification {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	list := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		list = append(list, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	specs := make([]ec2types.TagSpecification, 0, len(kinds))
	for _, kind := range kinds {
		specs = append(specs, ec2types.TagSpecification{ResourceType: kind, Tags: list})
	}
	return specs
}
