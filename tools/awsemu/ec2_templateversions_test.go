package awsemu

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// DescribeLaunchTemplateVersions answers with what the template was made with (Karpenter's
// provider suites read templates this way); $Latest, $Default and 1 name the one version.
func TestDescribeLaunchTemplateVersions(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	out, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("versions"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:            aws.String(img),
			UserData:           aws.String(b64(al2UserData)),
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("KarpenterNodeInstanceProfile-demo-cluster")},
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
				HttpEndpoint: ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled, HttpPutResponseHopLimit: aws.Int32(2),
				HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired,
			},
			NetworkInterfaces: []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{{
				DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: aws.Bool(false), Groups: []string{"sg-1"},
			}},
			BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
				DeviceName: aws.String("/dev/xvda"),
				Ebs:        &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3, Encrypted: aws.Bool(true)},
			}},
			Monitoring: &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(true)},
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{
				ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("a")}},
			}},
		},
	})
	require.NoError(t, err)
	id := aws.ToString(out.LaunchTemplate.LaunchTemplateId)

	for name, in := range map[string]*ec2.DescribeLaunchTemplateVersionsInput{
		"by id, all versions":  {LaunchTemplateId: aws.String(id)},
		"by name, $Latest":     {LaunchTemplateName: aws.String("versions"), Versions: []string{"$Latest"}},
		"by id, $Default":      {LaunchTemplateId: aws.String(id), Versions: []string{"$Default"}},
		"by id, version 1":     {LaunchTemplateId: aws.String(id), Versions: []string{"1"}},
		"every template's own": {Versions: []string{"$Latest"}, Filters: []ec2types.Filter{{Name: aws.String("image-id"), Values: []string{img}}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := e.ec2.DescribeLaunchTemplateVersions(ctx, in)
			require.NoError(t, err)
			require.Len(t, got.LaunchTemplateVersions, 1)
			v := got.LaunchTemplateVersions[0]
			assert.Equal(t, id, aws.ToString(v.LaunchTemplateId))
			assert.Equal(t, "versions", aws.ToString(v.LaunchTemplateName))
			assert.Equal(t, int64(1), aws.ToInt64(v.VersionNumber))
			assert.True(t, aws.ToBool(v.DefaultVersion))
			d := v.LaunchTemplateData
			require.NotNil(t, d)
			assert.Equal(t, img, aws.ToString(d.ImageId))
			assert.Equal(t, b64(al2UserData), aws.ToString(d.UserData))
			require.NotNil(t, d.IamInstanceProfile)
			assert.Equal(t, "KarpenterNodeInstanceProfile-demo-cluster", aws.ToString(d.IamInstanceProfile.Name))
			require.NotNil(t, d.MetadataOptions)
			assert.Equal(t, ec2types.LaunchTemplateHttpTokensStateRequired, d.MetadataOptions.HttpTokens)
			assert.Equal(t, int32(2), aws.ToInt32(d.MetadataOptions.HttpPutResponseHopLimit))
			require.Len(t, d.NetworkInterfaces, 1)
			assert.Equal(t, []string{"sg-1"}, d.NetworkInterfaces[0].Groups)
			assert.False(t, aws.ToBool(d.NetworkInterfaces[0].AssociatePublicIpAddress))
			require.Len(t, d.BlockDeviceMappings, 1)
			assert.Equal(t, "/dev/xvda", aws.ToString(d.BlockDeviceMappings[0].DeviceName))
			assert.Equal(t, int32(20), aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize))
			assert.Equal(t, ec2types.VolumeTypeGp3, d.BlockDeviceMappings[0].Ebs.VolumeType)
			assert.True(t, aws.ToBool(d.BlockDeviceMappings[0].Ebs.Encrypted))
			assert.True(t, aws.ToBool(d.Monitoring.Enabled))
			require.Len(t, d.TagSpecifications, 1)
			assert.Equal(t, ec2types.ResourceTypeInstance, d.TagSpecifications[0].ResourceType)
			assert.Equal(t, "team", aws.ToString(d.TagSpecifications[0].Tags[0].Key))
		})
	}

	_, err = e.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{"2"}})
	assert.Equal(t, "InvalidLaunchTemplateId.VersionNotFound", apiCode(t, err))
	_, err = e.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("nope")})
	assert.Equal(t, "InvalidLaunchTemplateName.NotFoundException", apiCode(t, err))
	_, err = e.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), LaunchTemplateName: aws.String("versions")})
	assert.Equal(t, "InvalidParameterCombination", apiCode(t, err))
}

// An instance launched from a template with an instance profile shows it in DescribeInstances
// (its ARN and id, whether the template named it by name or by ARN); one launched without shows
// none.
func TestDescribeInstancesShowsTheInstanceProfile(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	const arn = "arn:aws:iam::123456789012:instance-profile/KarpenterNodeInstanceProfile-demo-cluster"
	for name, spec := range map[string]*ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{
		"by-name": {Name: aws.String("KarpenterNodeInstanceProfile-demo-cluster")},
		"by-arn":  {Arn: aws.String(arn)},
		"none":    nil,
	} {
		_, err := e.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(img), IamInstanceProfile: spec}})
		require.NoError(t, err)
		ids := e.launch(t, e.fleet(t, name, ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
		require.Len(t, ids, 1)
		got, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		require.NoError(t, err)
		require.Len(t, got.Reservations, 1)
		inst := got.Reservations[0].Instances[0]
		if spec == nil {
			assert.Nil(t, inst.IamInstanceProfile, name)
			continue
		}
		require.NotNil(t, inst.IamInstanceProfile, name)
		assert.Equal(t, arn, aws.ToString(inst.IamInstanceProfile.Arn), name)
		assert.Regexp(t, `^AIPA[A-Z0-9]+$`, aws.ToString(inst.IamInstanceProfile.Id), name)
	}
}
