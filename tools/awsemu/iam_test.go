package awsemu

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func iamClient(e *env) *iam.Client { return iam.NewFromConfig(sdkConfig(e.url, 1)) }

func iamCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// The IAM calls a launcher makes for a node class's role, through the real IAM client: the
// profile and role of Karpenter's guide exist at start; a profile is made, holds one role,
// is tagged, listed by path, and deleted once its role is removed; each misuse fails with
// IAM's own error.
func TestIAMInstanceProfiles(t *testing.T) {
	e := newEnv(t, nil)
	api := iamClient(e)
	ctx := context.Background()

	seeded, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("KarpenterNodeInstanceProfile-demo-cluster")})
	require.NoError(t, err)
	require.Len(t, seeded.InstanceProfile.Roles, 1)
	assert.Equal(t, "KarpenterNodeRole-demo-cluster", aws.ToString(seeded.InstanceProfile.Roles[0].RoleName))
	_, err = api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("KarpenterNodeRole-demo-cluster")})
	require.NoError(t, err)

	_, err = api.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("missing")})
	var noEntity *iamtypes.NoSuchEntityException
	require.ErrorAs(t, err, &noEntity)
	assert.Contains(t, err.Error(), "The role with name missing cannot be found.")

	role, err := api.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("nodes"), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17"}`)})
	require.NoError(t, err)
	assert.Equal(t, "arn:aws:iam::123456789012:role/nodes", aws.ToString(role.Role.Arn))
	_, err = api.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("nodes"), AssumeRolePolicyDocument: aws.String(`{}`)})
	var exists *iamtypes.EntityAlreadyExistsException
	require.ErrorAs(t, err, &exists)

	created, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
		InstanceProfileName: aws.String("demo-cluster_123"), Path: aws.String("/fleetwright/"),
		Tags: []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/demo-cluster"), Value: aws.String("owned")}},
	})
	require.NoError(t, err)
	assert.Equal(t, "arn:aws:iam::123456789012:instance-profile/fleetwright/demo-cluster_123", aws.ToString(created.InstanceProfile.Arn))
	assert.Regexp(t, `^AIPA[A-Z2-7]{17}$`, aws.ToString(created.InstanceProfile.InstanceProfileId))
	assert.Empty(t, created.InstanceProfile.Roles)
	_, err = api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123")})
	require.ErrorAs(t, err, &exists)
	assert.Contains(t, err.Error(), "Instance Profile demo-cluster_123 already exists.")

	_, err = api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("nope")})
	require.ErrorAs(t, err, &noEntity)
	assert.Contains(t, err.Error(), "Instance Profile nope cannot be found.")
	_, err = api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123"), RoleName: aws.String("missing")})
	require.ErrorAs(t, err, &noEntity, "a role that does not exist")

	_, err = api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123"), RoleName: aws.String("nodes")})
	require.NoError(t, err)
	_, err = api.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123"), RoleName: aws.String("KarpenterNodeRole-demo-cluster")})
	var limit *iamtypes.LimitExceededException
	require.ErrorAs(t, err, &limit, "a profile holds one role")

	_, err = api.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123"),
		Tags: []iamtypes.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}}})
	require.NoError(t, err)
	got, err := api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123")})
	require.NoError(t, err)
	require.Len(t, got.InstanceProfile.Roles, 1)
	assert.Equal(t, "nodes", aws.ToString(got.InstanceProfile.Roles[0].RoleName))
	assert.Equal(t, "/fleetwright/", aws.ToString(got.InstanceProfile.Path))
	tags := map[string]string{}
	for _, tag := range got.InstanceProfile.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	assert.Equal(t, map[string]string{"kubernetes.io/cluster/demo-cluster": "owned", "karpenter.k8s.aws/ec2nodeclass": "default"}, tags)

	listed, err := api.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{PathPrefix: aws.String("/fleetwright/")})
	require.NoError(t, err)
	require.Len(t, listed.InstanceProfiles, 1, "only the profiles under the path")
	assert.Equal(t, "demo-cluster_123", aws.ToString(listed.InstanceProfiles[0].InstanceProfileName))
	all, err := api.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(1)})
	require.NoError(t, err)
	assert.True(t, all.IsTruncated)
	next, err := api.ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{MaxItems: aws.Int32(1), Marker: all.Marker})
	require.NoError(t, err)
	assert.False(t, next.IsTruncated)
	assert.Len(t, next.InstanceProfiles, 1)

	_, err = api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123")})
	var conflict *iamtypes.DeleteConflictException
	require.ErrorAs(t, err, &conflict, "roles go first")
	_, err = api.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123"), RoleName: aws.String("nodes")})
	require.NoError(t, err)
	_, err = api.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123")})
	require.NoError(t, err)
	_, err = api.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("demo-cluster_123")})
	require.ErrorAs(t, err, &noEntity)
	assert.Equal(t, []InstanceProfileInfo{{Name: "KarpenterNodeInstanceProfile-demo-cluster", Path: "/", Role: "KarpenterNodeRole-demo-cluster"}}, e.emu.InstanceProfiles())

	_, err = api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("bad name")})
	assert.Equal(t, "ValidationError", iamCode(err))
	calls := e.emu.Calls()
	assert.Equal(t, "iam", calls[len(calls)-1].Service)
}

// Roles and profiles come from the configuration, and Reset brings them back.
func TestIAMSeededFromConfig(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.InstanceProfiles = map[string]string{"given": "given-role", "empty": ""}
	})
	assert.Equal(t, []string{"KarpenterNodeRole-demo-cluster", "given-role"}, e.emu.Roles())
	_, err := iamClient(e).DeleteInstanceProfile(context.Background(), &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("empty")})
	require.NoError(t, err)
	e.emu.Reset()
	assert.Equal(t, []InstanceProfileInfo{{Name: "empty", Path: "/"}, {Name: "given", Path: "/", Role: "given-role"}}, e.emu.InstanceProfiles())

	_, err = New(Config{Roles: []string{}, InstanceProfiles: map[string]string{"p": "r"}})
	require.ErrorContains(t, err, `role "r" is not one of the roles`)
}

// A fleet whose launch template names an instance profile that does not exist launches
// nothing: every override fails as EC2 reports it; with a profile that exists it launches.
func TestCreateFleetRejectsAMissingInstanceProfile(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	for name, profile := range map[string]string{"no-profile": "nope", "with-profile": "KarpenterNodeInstanceProfile-demo-cluster"} {
		_, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(img), IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)}}})
		require.NoError(t, err, "EC2 does not check the profile until it launches")
	}
	out, err := e.ec2.CreateFleet(ctx, e.fleet(t, "no-profile", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}, ov{"m5.xlarge", "us-east-1b"}))
	require.NoError(t, err)
	assert.Empty(t, out.Instances)
	require.Len(t, out.Errors, 2)
	for _, fe := range out.Errors {
		assert.Equal(t, "InvalidParameterValue", aws.ToString(fe.ErrorCode))
		assert.Equal(t, "Value (nope) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", aws.ToString(fe.ErrorMessage))
	}
	assert.Empty(t, e.emu.Instances())

	ids := e.launch(t, e.fleet(t, "with-profile", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
	require.Len(t, ids, 1)
	assert.Equal(t, "KarpenterNodeInstanceProfile-demo-cluster", e.emu.Instances()[0].InstanceProfile)
}

// Every launch-template field the launcher sets is recorded as sent — metadata options, the
// primary network interface with its public address and security groups, detailed
// monitoring — and the fleet's Context reaches its instances; what EC2 refuses, it refuses.
func TestLaunchTemplateFieldsAndFleetContext(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	data := func() *ec2types.RequestLaunchTemplateData {
		return &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(img),
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
				HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled, HttpProtocolIpv6: ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Enabled,
				HttpPutResponseHopLimit: aws.Int32(2), HttpTokens: ec2types.LaunchTemplateHttpTokensStateOptional,
			},
			NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
				DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: aws.Bool(true), Groups: []string{"sg-1", "sg-2"},
			}},
			Monitoring: &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(true)},
		}
	}
	_, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("fields"), LaunchTemplateData: data()})
	require.NoError(t, err)
	lts := e.emu.LaunchTemplates()
	require.Len(t, lts, 1)
	lt := lts[0]
	assert.Equal(t, MetadataOptions{HTTPEndpoint: "enabled", HTTPProtocolIPv6: "enabled", HTTPPutResponseHopLimit: 2, HTTPTokens: "optional"}, lt.MetadataOptions)
	assert.Equal(t, []NetworkInterface{{DeviceIndex: 0, AssociatePublicIPAddress: aws.Bool(true), SecurityGroups: []string{"sg-1", "sg-2"}}}, lt.NetworkInterfaces)
	assert.True(t, lt.Monitoring)
	assert.Empty(t, lt.SecurityGroups)

	in := e.fleet(t, "fields", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"})
	in.Context = aws.String("reserved-capacity-context")
	require.Len(t, e.launch(t, in), 1)
	inst := e.emu.Instances()[0]
	assert.Equal(t, "reserved-capacity-context", inst.Context)
	assert.Equal(t, []string{"sg-1", "sg-2"}, inst.SecurityGroups, "the primary interface's groups")

	both := data()
	both.SecurityGroupIds = []string{"sg-1"}
	_, err = e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("both"), LaunchTemplateData: both})
	assert.Equal(t, "InvalidParameterCombination", iamCode(err), "groups on the instance and on an interface")
	far := data()
	far.MetadataOptions.HttpPutResponseHopLimit = aws.Int32(65)
	_, err = e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("far"), LaunchTemplateData: far})
	assert.Equal(t, "InvalidParameterValue", iamCode(err))
	assert.ErrorContains(t, err, "HttpPutResponseHopLimit")
}
