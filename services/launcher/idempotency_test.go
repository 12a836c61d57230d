package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	launchv1 "github.com/fleetwright/fleetwright/proto/gen/fleetwright/launch/v1"
)

// launchTagged launches, through the SDK and outside the launcher, one m5.large in zone tagged
// for the claim as the launcher tags its instances: what an earlier delivery of the claim's
// intent left behind when it launched and then failed to record the instance on the claim.
func (e *env) launchTagged(claim, zone, token string) string {
	e.t.Helper()
	api := ec2.NewFromConfig(e.awsConfig())
	imgs, err := api.DescribeImages(e.ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.32-*"}}}})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, imgs.Images)
	lt := "earlier-delivery-" + claim
	_, err = api.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(lt),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: imgs.Images[0].ImageId}})
	require.NoError(e.t, err)
	subnets, err := api.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{zone}}}})
	require.NoError(e.t, err)
	require.NotEmpty(e.t, subnets.Subnets)
	tags := []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String(claim)},
		{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")},
		{Key: aws.String("kubernetes.io/cluster/demo-cluster"), Value: aws.String("owned")}}
	out, err := api.CreateFleet(e.ctx, &ec2.CreateFleetInput{
		Type:        ec2types.FleetTypeInstant,
		ClientToken: aws.String(token),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: subnets.Subnets[0].SubnetId,
				AvailabilityZone: aws.String(zone)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
	})
	require.NoError(e.t, err)
	require.Len(e.t, out.Instances, 1)
	require.Len(e.t, out.Instances[0].InstanceIds, 1)
	return out.Instances[0].InstanceIds[0]
}

// An instance already tagged for the claim (launched by an earlier delivery that never recorded
// it) is adopted: recorded on the claim and reported, with no CreateFleet of its own.
func TestInstanceTaggedForTheClaimIsAdopted(t *testing.T) {
	e := start(t)
	intent := e.claim("default-adopt1", "m5.large", "m5.xlarge")
	id := e.launchTagged("default-adopt1", "us-east-1a", "earlier-delivery-token")
	before := e.createFleetCalls()

	e.publish(intent, intent.NodeClaimName)
	nc := e.claimWhen("default-adopt1", 60*time.Second, hasInstance, "the claim records an instance")
	assert.Equal(t, "aws:///us-east-1a/"+id, nc.Status.ProviderID, "the instance already tagged for the claim")
	assert.Equal(t, "m5.large", nc.Labels[karpv1.LabelInstanceType])
	assert.Equal(t, "on-demand", nc.Labels[karpv1.CapacityTypeLabelKey])
	assert.NotEmpty(t, nc.Status.ImageID)
	assert.Equal(t, before, e.createFleetCalls(), "no CreateFleet for a claim whose instance exists")
	assert.Len(t, e.instancesFor("default-adopt1"), 1)
	r := e.nextResult()
	assert.Equal(t, launchv1.LaunchOutcome_LAUNCH_OUTCOME_LAUNCHED, r.Outcome)
	assert.Equal(t, id, r.InstanceId)
	assert.Equal(t, nc.Status.ProviderID, r.ProviderId)
}

// An earlier delivery launched with the claim's UID as its ClientToken (what the launcher sent
// before the token carried a hash of the request) but another request — another subnet and
// zone than the intent now allows — and never recorded the instance. The redelivery meets no
// IdempotentParameterMismatch and fails nothing: it records that instance, the claim's only one.
func TestRedeliveryWithAnotherRequestKeepsOneInstance(t *testing.T) {
	e := start(t)
	intent := e.claim("default-redeliver1", "m5.large", "m5.xlarge")
	id := e.launchTagged("default-redeliver1", "us-east-1b", intent.NodeClaimUid)

	e.publish(intent, intent.NodeClaimName)
	nc := e.claimWhen("default-redeliver1", 60*time.Second, hasInstance, "the claim records an instance and is not failed")
	assert.Equal(t, "aws:///us-east-1b/"+id, nc.Status.ProviderID)
	assert.Len(t, e.instancesFor("default-redeliver1"), 1, "exactly one instance for the claim")
	r := e.nextResult()
	assert.Equal(t, launchv1.LaunchOutcome_LAUNCH_OUTCOME_LAUNCHED, r.Outcome, "not failed: %s %s", r.ErrorCode, r.ErrorMessage)
}

// The ClientToken is the claim's UID and a hash of the request: the same request, the same
// token; any change (here the unavailable set), another; always within EC2's 64 characters.
func TestClientTokenIsAFunctionOfTheRequest(t *testing.T) {
	uid := "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
	req := func(unavailable map[Offering]bool) fleetRequest {
		return fleetRequest{ClaimUID: uid, CapacityType: scheduling.CapacityTypeSpot,
			InstanceTypes: []fleetType{{Name: "m5.large", LaunchTemplate: "lt-a"}, {Name: "m5.xlarge", LaunchTemplate: "lt-a"}},
			Subnets:       []subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}},
			Tags:          map[string]string{"karpenter.sh/nodeclaim": "default-x", "b": "2", "a": "1"}, Unavailable: unavailable}
	}
	first := aws.ToString(req(nil).input().ClientToken)
	assert.Equal(t, first, aws.ToString(req(nil).input().ClientToken), "the same request, the same token")
	assert.True(t, strings.HasPrefix(first, uid+"-"), first)
	assert.LessOrEqual(t, len(first), 64)
	other := aws.ToString(req(map[Offering]bool{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}: true}).input().ClientToken)
	assert.NotEqual(t, first, other, "a changed request is another token")
}
