package awsemu

import (
	"context"
	"errors"

	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/catalog"
)

func apiCode(t testing.TB, err error) string {
	t.Helper()
	var ae smithy.APIError
	require.True(t, errors.As(err, &ae), "not an API error: %v", err)
	return ae.ErrorCode()
}

func flt(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

func TestDescribeInstanceTypesPagesThroughTheCatalog(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	p := ec2.NewDescribeInstanceTypesPaginator(e.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
	seen := map[string]ec2types.InstanceTypeInfo{}
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(out.InstanceTypes), 100)
		pages++
		for _, it := range out.InstanceTypes {
			seen[string(it.InstanceType)] = it
		}
	}
	require.Len(t, seen, len(catalog.Schedulable()))
	assert.Greater(t, pages, 10)
	m5 := seen["m5.large"]
	assert.Equal(t, int32(2), *m5.VCpuInfo.DefaultVCpus)
	assert.Equal(t, int64(8192), *m5.MemoryInfo.SizeInMiB)
	assert.Equal(t, []ec2types.ArchitectureType{"x86_64"}, m5.ProcessorInfo.SupportedArchitectures)
	assert.Contains(t, m5.SupportedUsageClasses, ec2types.UsageClassTypeSpot)
	assert.Equal(t, int32(3), *m5.NetworkInfo.MaximumNetworkInterfaces)
	assert.Equal(t, ec2types.InstanceTypeHypervisorNitro, m5.Hypervisor)
	_, incomplete := seen["cr1.8xlarge"]
	assert.False(t, incomplete, "types without specs are not offered")
}

func TestDescribeInstanceTypesFilters(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tests := []struct {
		name    string
		filters []ec2types.Filter
		want    []string
	}{
		{"wildcard and arch", []ec2types.Filter{flt("instance-type", "t4g.*"), flt("vcpu-info.default-vcpus", "2")},
			[]string{"t4g.large", "t4g.medium", "t4g.micro", "t4g.nano", "t4g.small"}},
		{"arch excludes", []ec2types.Filter{flt("instance-type", "t4g.*"), flt("processor-info.supported-architecture", "x86_64")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := e.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{Filters: tc.filters})
			require.NoError(t, err)
			var got []string
			for _, it := range out.InstanceTypes {
				got = append(got, string(it.InstanceType))
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
	_, err := e.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{Filters: []ec2types.Filter{flt("no-such-filter", "x")}})
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = e.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100000)})
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = e.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.huge"}})
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))
}

func TestOfferingsZonesAndSpotPrices(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	offers, err := e.ec2.DescribeInstanceTypeOfferings(ctx, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone, Filters: []ec2types.Filter{flt("instance-type", "m5.large")}})
	require.NoError(t, err)
	var zones []string
	for _, o := range offers.InstanceTypeOfferings {
		zones = append(zones, *o.Location)
	}
	assert.Equal(t, []string{"us-east-1a", "us-east-1b", "us-east-1c"}, zones)

	azs, err := e.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)
	require.Len(t, azs.AvailabilityZones, 3)
	assert.Equal(t, "use1-az1", *azs.AvailabilityZones[0].ZoneId)

	prices, err := e.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, ProductDescriptions: []string{"Linux/UNIX"}})
	require.NoError(t, err)
	require.Len(t, prices.SpotPriceHistory, 3)
	lo, hi, ok := catalog.SpotPriceRange("us-east-1", "m5.large")
	require.True(t, ok)
	for _, p := range prices.SpotPriceHistory {
		got, err := strconv.ParseFloat(*p.SpotPrice, 64)
		require.NoError(t, err)
		assert.InDelta(t, e.spot("m5.large", *p.AvailabilityZone), got, 1e-6)
		assert.True(t, got >= lo && got <= hi, "%v within us-east-1's real range %v..%v", got, lo, hi)
	}
}

func TestDiscoveryBySubnetAndSecurityGroupTags(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	subnets, err := e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{flt("tag:karpenter.sh/discovery", "demo-cluster")}})
	require.NoError(t, err)
	require.Len(t, subnets.Subnets, 3)
	for _, s := range subnets.Subnets {
		assert.NotEmpty(t, *s.AvailabilityZone)
		assert.Positive(t, *s.AvailableIpAddressCount)
	}
	none, err := e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{flt("tag:karpenter.sh/discovery", "other-cluster")}})
	require.NoError(t, err)
	assert.Empty(t, none.Subnets)
	byID, err := e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{*subnets.Subnets[1].SubnetId}})
	require.NoError(t, err)
	require.Len(t, byID.Subnets, 1)
	_, err = e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0000000000000000"}})
	assert.Equal(t, "InvalidSubnetID.NotFound", apiCode(t, err))

	groups, err := e.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{flt("tag-key", "karpenter.sh/discovery")}})
	require.NoError(t, err)
	require.Len(t, groups.SecurityGroups, 1)
	assert.Equal(t, "demo-cluster-node", *groups.SecurityGroups[0].GroupName)
	all, err := e.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	require.NoError(t, err)
	assert.Len(t, all.SecurityGroups, 2)
}

func TestDescribeImagesNewestMatters(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	out, err := e.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{flt("name", "amazon-eks-node-al2023-arm64-standard-1.32-*")}})
	require.NoError(t, err)
	require.Len(t, out.Images, 3)
	newest := out.Images[0]
	for _, im := range out.Images {
		assert.Equal(t, ec2types.ArchitectureValuesArm64, im.Architecture)
		if *im.CreationDate > *newest.CreationDate {
			newest = im
		}
	}
	assert.Equal(t, "amazon-eks-node-al2023-arm64-standard-1.32-v20250319", *newest.Name)

	for _, family := range []string{"amazon-eks-node-1.32-*", "amazon-eks-arm64-node-1.32-*", "bottlerocket-aws-k8s-1.32-aarch64-*"} {
		out, err := e.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{flt("name", family)}})
		require.NoError(t, err)
		assert.Len(t, out.Images, 3, family)
	}
	tagged, err := e.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"},
		Filters: []ec2types.Filter{flt("tag:karpenter.sh/discovery", "demo-cluster")}})
	require.NoError(t, err)
	require.Len(t, tagged.Images, 1)
	byID, err := e.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{*newest.ImageId}})
	require.NoError(t, err)
	require.Len(t, byID.Images, 1)
	assert.Equal(t, *newest.Name, *byID.Images[0].Name)
}

func TestLaunchTemplates(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	id := e.template(t, "fleetwright-default", img, al2UserData)
	_, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("fleetwright-default"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(img)}})
	assert.Equal(t, "InvalidLaunchTemplateName.AlreadyExistsException", apiCode(t, err))

	got, err := e.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"fleetwright-default"}})
	require.NoError(t, err)
	require.Len(t, got.LaunchTemplates, 1)
	assert.Equal(t, id, *got.LaunchTemplates[0].LaunchTemplateId)

	_, err = e.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String("fleetwright-default")})
	require.NoError(t, err)
	_, err = e.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"fleetwright-default"}})
	assert.Equal(t, "InvalidLaunchTemplateName.NotFoundException", apiCode(t, err))
	_, err = e.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	assert.Equal(t, "InvalidLaunchTemplateId.NotFound", apiCode(t, err))
}

func TestCreateFleetAllocation(t *testing.T) {
	e := newEnv(t, nil)
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, al2UserData)
	ovs := []ov{{"m5.xlarge", "us-east-1a"}, {"m5.large", "us-east-1a"}, {"m5.large", "us-east-1b"}, {"m5.large", "us-east-1c"}}

	t.Run("on-demand lowest-price takes the cheapest type", func(t *testing.T) {
		ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ovs...))
		require.Len(t, ids, 1)
		assert.Equal(t, "m5.large", e.instance(t, ids[0]).Type)
		assert.Equal(t, CapacityOnDemand, e.instance(t, ids[0]).CapacityType)
	})
	t.Run("spot price-capacity-optimized takes the cheapest deep pool", func(t *testing.T) {
		ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 1, ovs...))
		require.Len(t, ids, 1)
		cheapest := "us-east-1a"
		for _, z := range []string{"us-east-1b", "us-east-1c"} {
			if e.spot("m5.large", z) < e.spot("m5.large", cheapest) {
				cheapest = z
			}
		}
		inst := e.instance(t, ids[0])
		assert.Equal(t, "m5.large", inst.Type)
		assert.Equal(t, cheapest, inst.Zone)
		assert.Equal(t, CapacitySpot, inst.CapacityType)
	})
	t.Run("shallow pools are avoided", func(t *testing.T) {
		zs := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
		cheapest := zs[0]
		for _, z := range zs {
			if e.spot("m5.large", z) < e.spot("m5.large", cheapest) {
				cheapest = z
			}
		}
		require.NoError(t, e.emu.SetCapacity(CapacityRule{Pool: Pool{InstanceType: "m5.large", Zone: cheapest, CapacityType: CapacitySpot}, Capacity: 5}))
		ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 1, ov{"m5.large", "us-east-1a"}, ov{"m5.large", "us-east-1b"}, ov{"m5.large", "us-east-1c"}))
		require.Len(t, ids, 1)
		assert.NotEqual(t, cheapest, e.instance(t, ids[0]).Zone)
	})
}

func (e *env) instance(t testing.TB, id string) InstanceInfo {
	t.Helper()
	for _, i := range e.emu.Instances() {
		if i.ID == id {
			return i
		}
	}
	t.Fatalf("no instance %s", id)
	return InstanceInfo{}
}

func TestCreateFleetInsufficientCapacity(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, "")
	require.NoError(t, e.emu.SetCapacity(CapacityRule{Pool: Pool{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacitySpot}, Capacity: 0}))

	out, err := e.ec2.CreateFleet(ctx, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 1, ov{"m5.large", "us-east-1a"}, ov{"m5.large", "us-east-1b"}))
	require.NoError(t, err)
	require.Len(t, out.Instances, 1)
	assert.Equal(t, "us-east-1b", *out.Instances[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone)
	require.Len(t, out.Errors, 1)
	fe := out.Errors[0]
	assert.Equal(t, "InsufficientInstanceCapacity", *fe.ErrorCode)
	assert.Equal(t, ec2types.InstanceLifecycleSpot, fe.Lifecycle)
	assert.Equal(t, ec2types.InstanceType("m5.large"), fe.LaunchTemplateAndOverrides.Overrides.InstanceType)
	assert.Equal(t, "us-east-1a", *fe.LaunchTemplateAndOverrides.Overrides.AvailabilityZone)
	assert.Equal(t, "fw-lt", *fe.LaunchTemplateAndOverrides.LaunchTemplateSpecification.LaunchTemplateName)

	// Everything exhausted: no instances, one error per pool, still HTTP 200.
	require.NoError(t, e.emu.SetCapacity(CapacityRule{Pool: Pool{CapacityType: CapacitySpot}, Capacity: 0}))
	out, err = e.ec2.CreateFleet(ctx, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 2, ov{"m5.large", "us-east-1a"}, ov{"m5.large", "us-east-1b"}))
	require.NoError(t, err)
	assert.Empty(t, out.Instances)
	assert.Len(t, out.Errors, 2)

	// On-demand pools are separate.
	ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
	assert.Len(t, ids, 1)
}

func TestCreateFleetClientTokenIdempotency(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, "")
	in := e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 3, ov{"m5.large", "us-east-1a"})
	in.ClientToken = aws.String("nodeclaim-uid-1")
	first := e.launch(t, in)
	second := e.launch(t, in)
	require.Len(t, first, 3)
	assert.Equal(t, first, second)
	assert.Len(t, e.emu.Instances(), 3)

	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(4)
	_, err := e.ec2.CreateFleet(ctx, in)
	assert.Equal(t, "IdempotentParameterMismatch", apiCode(t, err))

	in.ClientToken = aws.String("nodeclaim-uid-2")
	assert.Len(t, e.launch(t, in), 4)
}

// A token is spent even by a fleet that launched nothing: the same token with another request
// (another subnet, here) is IdempotentParameterMismatch, and the same request gets the same
// empty answer back, as EC2 does. A launcher must change its token with its request.
func TestCreateFleetTokenOfAnEmptyFleetIsSpent(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, "")
	require.NoError(t, e.emu.SetCapacity(CapacityRule{Pool: Pool{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: CapacitySpot}, Capacity: 0}))
	in := e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 1, ov{"m5.large", "us-east-1a"})
	in.ClientToken = aws.String("nodeclaim-uid-1")
	out, err := e.ec2.CreateFleet(ctx, in)
	require.NoError(t, err)
	assert.Empty(t, out.Instances)
	require.Len(t, out.Errors, 1)

	again, err := e.ec2.CreateFleet(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, *out.FleetId, *again.FleetId, "the same request: the same fleet")
	assert.Empty(t, again.Instances)

	other := e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 1, ov{"m5.large", "us-east-1b"})
	other.ClientToken = in.ClientToken
	_, err = e.ec2.CreateFleet(ctx, other)
	assert.Equal(t, "IdempotentParameterMismatch", apiCode(t, err))
	assert.Empty(t, e.emu.Instances())
}

func TestCreateFleetRejectsUnknownTypeSubnetAndTemplate(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, "")
	in := e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"})
	in.LaunchTemplateConfigs[0].Overrides[0].InstanceType = "m5.enormous"
	_, err := e.ec2.CreateFleet(ctx, in)
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))

	in = e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"})
	in.LaunchTemplateConfigs[0].Overrides[0].SubnetId = aws.String("subnet-0123456789abcdef0")
	in.LaunchTemplateConfigs[0].Overrides[0].AvailabilityZone = nil
	_, err = e.ec2.CreateFleet(ctx, in)
	assert.Equal(t, "InvalidSubnetID.NotFound", apiCode(t, err))

	in = e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"})
	in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName = aws.String("missing")
	_, err = e.ec2.CreateFleet(ctx, in)
	assert.Equal(t, "InvalidLaunchTemplateName.NotFoundException", apiCode(t, err))

	in = e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"})
	in.Type = ec2types.FleetTypeMaintain
	_, err = e.ec2.CreateFleet(ctx, in)
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))

	// An arm64 type with an x86_64 image is a per-override error, not a call failure.
	out, err := e.ec2.CreateFleet(ctx, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m6g.large", "us-east-1a"}, ov{"m5.large", "us-east-1a"}))
	require.NoError(t, err)
	require.Len(t, out.Errors, 1)
	assert.Equal(t, "InvalidParameterValue", *out.Errors[0].ErrorCode)
	require.Len(t, out.Instances, 1)
	assert.Equal(t, ec2types.InstanceType("m5.large"), out.Instances[0].InstanceType)
}

func TestInstanceLifecycleDescribeAndTerminate(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BootDelay = 30 * time.Second })
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	e.template(t, "fw-lt", img, "")
	ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeSpot, 12, ov{"m5.large", "us-east-1a"}, ov{"c5.large", "us-east-1b"}))
	require.Len(t, ids, 12)

	running := func() int {
		out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("instance-state-name", "running")}})
		require.NoError(t, err)
		return len(out.Reservations)
	}
	assert.Equal(t, 0, running())
	e.clock.Advance(31 * time.Second)
	assert.Equal(t, 12, running())

	// Paging with tag filters, as the launcher lists its instances.
	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5),
		Filters: []ec2types.Filter{flt("tag:karpenter.sh/nodepool", "default"), flt("tag-key", "from-template")}})
	var listed []ec2types.Instance
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, r := range out.Reservations {
			listed = append(listed, r.Instances...)
		}
	}
	require.Len(t, listed, 12)
	first := listed[0]
	assert.Equal(t, ec2types.InstanceStateNameRunning, first.State.Name)
	assert.Equal(t, int32(16), *first.State.Code)
	assert.Regexp(t, `^ip-10-0-\d+-\d+\.ec2\.internal$`, *first.PrivateDnsName)
	assert.Equal(t, ec2types.InstanceLifecycleTypeSpot, first.InstanceLifecycle)
	assert.Equal(t, epoch, first.LaunchTime.UTC())
	tags := map[string]string{}
	for _, tg := range first.Tags {
		tags[*tg.Key] = *tg.Value
	}
	assert.Equal(t, "default", tags["karpenter.sh/nodepool"])
	assert.Equal(t, "fw-lt", tags["from-template"])
	assert.NotEmpty(t, tags["aws:ec2:fleet-id"])

	_, err := e.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{ids[0]}, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("node-0")}}})
	require.NoError(t, err)
	named, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("tag:Name", "node-0")}})
	require.NoError(t, err)
	require.Len(t, named.Reservations, 1)
	assert.Equal(t, ids[0], *named.Reservations[0].Instances[0].InstanceId)
	_, err = e.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{ids[0]}, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("other")}, {Key: aws.String("from-template")}}})
	require.NoError(t, err)
	kept, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
	require.NoError(t, err)
	left := map[string]string{}
	for _, tg := range kept.Reservations[0].Instances[0].Tags {
		left[*tg.Key] = *tg.Value
	}
	assert.Equal(t, "node-0", left["Name"], "a tag whose value differs is kept")
	assert.NotContains(t, left, "from-template", "a key alone removes the tag")

	term, err := e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:2]})
	require.NoError(t, err)
	require.Len(t, term.TerminatingInstances, 2)
	assert.Equal(t, ec2types.InstanceStateNameShuttingDown, term.TerminatingInstances[0].CurrentState.Name)
	assert.Equal(t, ec2types.InstanceStateNameRunning, term.TerminatingInstances[0].PreviousState.Name)
	e.clock.Advance(10 * time.Second)
	again, err := e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	require.NoError(t, err)
	assert.Equal(t, ec2types.InstanceStateNameTerminated, again.TerminatingInstances[0].CurrentState.Name)
	assert.Equal(t, 10, running())

	_, err = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	assert.Equal(t, "InvalidInstanceID.NotFound", apiCode(t, err))
	_, err = e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	assert.Equal(t, "InvalidInstanceID.NotFound", apiCode(t, err))
	_, err = e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1 << 30)})
	assert.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{NextToken: aws.String("garbage")})
	assert.Equal(t, "InvalidNextToken", apiCode(t, err))

	// Capacity is freed by termination.
	e.clock.Advance(2 * time.Hour)
	all, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	require.NoError(t, err)
	assert.Len(t, all.Reservations, 10, "terminated instances are forgotten after the retention")
}

func TestThrottlingSeenAsRequestLimitExceeded(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	require.NoError(t, e.emu.SetThrottle(Throttle{Service: "ec2", Actions: []string{"DescribeSubnets"}, Share: 1}))
	_, err := e.ec2Once.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	assert.Equal(t, "RequestLimitExceeded", apiCode(t, err))
	_, err = e.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	require.NoError(t, err, "other actions are not throttled")

	// Half the calls: the SDK's default retries get through.
	require.NoError(t, e.emu.SetThrottle(Throttle{Share: 0.5}))
	retrying := ec2.NewFromConfig(sdkConfig(e.url, 3))
	for i := range 4 {
		_, err := retrying.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
		require.NoError(t, err, "call %d", i)
	}
	throttled := 0
	for _, c := range e.emu.Calls() {
		if c.Throttled {
			throttled++
		}
	}
	assert.Equal(t, 4, throttled, "the first rule's one, then every second call: pass, throttle+retry, pass, ...")

	// A rate: 2 per second of the emulator's clock.
	require.NoError(t, e.emu.SetThrottle(Throttle{RatePerSecond: 2}))
	var codes []string
	for range 3 {
		_, err := e.ec2Once.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
		if err != nil {
			codes = append(codes, apiCode(t, err))
		} else {
			codes = append(codes, "ok")
		}
	}
	assert.Equal(t, []string{"ok", "ok", "RequestLimitExceeded"}, codes)
	e.clock.Advance(time.Second)
	_, err = e.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	require.NoError(t, err)

}
