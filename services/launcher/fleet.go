package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

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
	ClaimUID      string            // the NodeClaim's UID, the stem of the request's ClientToken
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
	in.ClientToken = aws.String(clientToken(r.ClaimUID, in))
	return in
}

// token is the ClientToken the request is sent with.
func (r fleetRequest) token() string { return aws.ToString(r.input().ClientToken) }

// clientToken is the claim's UID and a hash of the rest of the request. EC2 answers a token
// it has seen with the fleet it made for it, but only for the very same parameters: the same
// token with another subnet, unavailable set or launch template is IdempotentParameterMismatch,
// forever. Those do change between tries of one claim (the offerings out of capacity, the
// subnets' free addresses, a template renamed with its class), so the token is a pure function
// of the whole request: a request repeated as it was (the SDK's retry, a redelivery before
// anything changed) gets EC2's own idempotency, and a changed one is a new fleet. What keeps a
// changed request from launching a second instance is the launcher's lookup of the claim's
// instance by its karpenter.sh/nodeclaim tag before every CreateFleet (claimInstance), and
// after a mismatch; the token alone could not do that without failing every changed request.
// 36 characters of UID, a dash and 16 of hash fit EC2's 64.
func clientToken(claimUID string, in *ec2.CreateFleetInput) string {
	cp := *in
	cp.ClientToken = nil
	b, err := json.Marshal(&cp)
	if err != nil { // plain data: cannot happen; the UID alone is still a valid token
		return claimUID
	}
	sum := sha256.Sum256(b)
	return claimUID + "-" + hex.EncodeToString(sum[:8])
}

// claimInstance is the live (pending or running) instance this cluster launched for the claim,
// found by its karpenter.sh/nodeclaim tag, if any: one launched by an earlier delivery whose
// CreateFleet succeeded but whose claim was never updated. A claim's name is unique in the
// cluster (the scheduler adds a random suffix) and the tag is the cluster's, so a live
// instance so tagged is this claim's.
func claimInstance(ctx context.Context, api EC2API, cluster, claim string) (*ec2types.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:karpenter.sh/nodeclaim"), Values: []string{claim}},
		{Name: aws.String("tag:kubernetes.io/cluster/" + cluster), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: []string{string(ec2types.InstanceStateNamePending), string(ec2types.InstanceStateNameRunning)}},
	}}
	var found *ec2types.Instance
	for {
		out, err := api.DescribeInstances(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("looking up the instance of nodeclaim %s: %w", claim, err)
		}
		for _, res := range out.Reservations {
			for i := range res.Instances {
				inst := &res.Instances[i]
				// The earliest launched, should there be more than one (a double launch from
				// before this lookup existed): the claim keeps the same one on every try.
				if found == nil || deref(inst.LaunchTime).Before(deref(found.LaunchTime)) ||
					(deref(inst.LaunchTime).Equal(deref(found.LaunchTime)) && deref(inst.InstanceId) < deref(found.InstanceId)) {
					found = inst
				}
			}
		}
		if deref(out.NextToken) == "" {
			return found, nil
		}
		in.NextToken = out.NextToken
	}
}

// launchedOf describes an instance found by claimInstance as CreateFleet would have.
func launchedOf(inst *ec2types.Instance) launched {
	l := launched{InstanceID: deref(inst.InstanceId), InstanceType: string(inst.InstanceType), SubnetID: deref(inst.SubnetId),
		CapacityType: scheduling.CapacityTypeOnDemand}
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		l.CapacityType = scheduling.CapacityTypeSpot
	}
	if inst.Placement != nil {
		l.Zone = deref(inst.Placement.AvailabilityZone)
	}
	return l
}

var errNoOverrides = errors.New("no instance type × subnet left to try: every offering is unavailable or no subnet matches the allowed zones")

// createFleet launches one instance. A fleet that launched nothing because every pool was out
// of capacity returns *InsufficientCapacityError naming the pools; any pools reported
// exhausted alongside a successful launch are returned too, to be marked unavailable.
//
// The call is a span of its own (EC2.CreateFleet, named as OpenTelemetry's AWS SDK
// instrumentation names calls): what was asked, and the offering EC2 launched or why none.
func createFleet(ctx context.Context, api EC2API, r fleetRequest) (l launched, unavailable []Offering, err error) {
	in := r.input()
	if len(in.LaunchTemplateConfigs) == 0 {
		return launched{}, nil, errNoOverrides
	}
	ctx, span := otel.Tracer("launcher").Start(ctx, "EC2.CreateFleet", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", "EC2"), attribute.String("rpc.method", "CreateFleet"),
		attribute.String("fleetwright.capacity_type", r.CapacityType), attribute.Int("fleetwright.overrides", overrides(in)),
		attribute.StringSlice("fleetwright.instance_types", typeNames(r.InstanceTypes))))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attribute.String("fleetwright.instance_id", l.InstanceID), attribute.String("fleetwright.instance_type", l.InstanceType),
				attribute.String("fleetwright.zone", l.Zone), attribute.String("fleetwright.capacity_type", l.CapacityType))
		}
		span.SetAttributes(attribute.Int("fleetwright.offerings_unavailable", len(unavailable)))
		span.End()
	}()
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

// overrides counts the request's instance type × subnet overrides.
func overrides(in *ec2.CreateFleetInput) int {
	n := 0
	for _, c := range in.LaunchTemplateConfigs {
		n += len(c.Overrides)
	}
	return n
}

func typeNames(ts []fleetType) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
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
	list := make([]ec2types.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		list = append(list, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	specs := make([]ec2types.TagSpecification, 0, len(kinds))
	for _, kind := range kinds {
		specs = append(specs, ec2types.TagSpecification{ResourceType: kind, Tags: list})
	}
	return specs
}
