package awsemu

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The public parameters Karpenter reads for an alias name the images of the world: the newest
// release for recommended/latest, the named release otherwise, in every variant AWS publishes.
func TestSSMPublicParametersNameTheImages(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, c := range []struct{ path, image, arch string }{
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id", "amazon-eks-node-al2023-x86_64-standard-1.32-v20250319", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id", "amazon-eks-node-al2023-arm64-standard-1.32-v20250319", "arm64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/recommended/image_id", "amazon-eks-node-al2023-x86_64-nvidia-1.32-v20250319", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/nvidia/recommended/image_id", "amazon-eks-node-al2023-arm64-nvidia-1.32-v20250319", "arm64"},
		{"/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/neuron/recommended/image_id", "amazon-eks-node-al2023-x86_64-neuron-1.31-v20250319", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20250115/image_id",
			"amazon-eks-node-al2023-x86_64-standard-1.31-v20250115", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id", "amazon-eks-node-1.32-v20250319", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id", "amazon-eks-arm64-node-1.32-v20250319", "arm64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id", "amazon-eks-gpu-node-1.32-v20250319", "x86_64"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/amazon-eks-gpu-node-1.32-v20250212/image_id", "amazon-eks-gpu-node-1.32-v20250212", "x86_64"},
		{"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/latest/image_id", "bottlerocket-aws-k8s-1.32-x86_64-v1.32.0-02222222", "x86_64"},
		{"/aws/service/bottlerocket/aws-k8s-1.32-nvidia/arm64/latest/image_id", "bottlerocket-aws-k8s-1.32-nvidia-aarch64-v1.32.0-02222222", "arm64"},
		{"/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.30.0/image_id", "bottlerocket-aws-k8s-1.31-aarch64-v1.30.0-00000000", "arm64"},
	} {
		out, err := e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(c.path)})
		require.NoError(t, err, c.path)
		p := out.Parameter
		assert.Equal(t, c.path, *p.Name)
		assert.Equal(t, ssmtypes.ParameterTypeString, p.Type)
		assert.Equal(t, "arn:aws:ssm:us-east-1::parameter"+c.path, *p.ARN, "public parameters belong to no account")
		imgs, err := e.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{*p.Value}})
		require.NoError(t, err, c.path)
		require.Len(t, imgs.Images, 1, c.path)
		assert.Equal(t, c.image, *imgs.Images[0].Name, c.path)
		assert.Equal(t, ec2types.ArchitectureValues(c.arch), imgs.Images[0].Architecture, c.path)
		assert.NotEmpty(t, aws.ToString(imgs.Images[0].DeprecationTime), "public images have a deprecation time")
	}
}

// What AWS does not publish is not found, with the typed error the SDK maps.
func TestSSMParameterNotFound(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, name := range []string{
		"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/neuron/recommended/image_id", // no arm64 Neuron image
		"/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
		"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/9.9.9/image_id",
		"/my/ami",
	} {
		_, err := e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		var nf *ssmtypes.ParameterNotFound
		require.True(t, errors.As(err, &nf), "typed ParameterNotFound for %s, got %v", name, err)
		assert.Contains(t, nf.ErrorMessage(), name)
	}
	_, err := e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("")})
	var ve *ssmtypes.ValidationException
	require.ErrorAs(t, err, &ve)

	calls := e.emu.Calls()
	var notFound int
	for _, c := range calls {
		if c.Service == "ssm" && c.Action == "GetParameter" && c.ErrorCode == "ParameterNotFound" {
			notFound++
		}
	}
	assert.Equal(t, 4, notFound, "the call log records SSM calls and their errors")
}

// GetParameters answers what it found and names what it did not; more than ten names is a
// validation error.
func TestSSMGetParameters(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	std := "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id"
	gpu := "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
	missing := "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/neuron/recommended/image_id"
	out, err := e.ssm.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{std, gpu, missing}})
	require.NoError(t, err)
	require.Len(t, out.Parameters, 2)
	assert.ElementsMatch(t, []string{std, gpu}, []string{*out.Parameters[0].Name, *out.Parameters[1].Name})
	assert.NotEqual(t, *out.Parameters[0].Value, *out.Parameters[1].Value, "the nvidia variant is its own image")
	assert.Equal(t, []string{missing}, out.InvalidParameters)

	names := make([]string, 11)
	for i := range names {
		names[i] = std
	}
	_, err = e.ssm.GetParameters(ctx, &ssm.GetParametersInput{Names: names})
	var ve *ssmtypes.ValidationException
	require.ErrorAs(t, err, &ve)
}

// The account's own parameters (an `ssmParameter` AMI term) are put through the Go method or
// the admin API, read by name or ARN, versioned on overwrite, and forgotten on reset.
func TestSSMPutParameter(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	img := e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*")
	require.NoError(t, e.emu.PutParameter("/team/ami", img))
	out, err := e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/team/ami")})
	require.NoError(t, err)
	assert.Equal(t, img, *out.Parameter.Value)
	assert.Equal(t, int64(1), out.Parameter.Version)
	assert.Equal(t, "arn:aws:ssm:us-east-1:123456789012:parameter/team/ami", *out.Parameter.ARN)
	byARN, err := e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: out.Parameter.ARN})
	require.NoError(t, err)
	assert.Equal(t, img, *byARN.Parameter.Value)

	resp, err := http.Post(e.url+"/_emu/parameters", "application/json", strings.NewReader(`{"name":"/team/ami","value":"ami-0abc"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out, err = e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/team/ami")})
	require.NoError(t, err)
	assert.Equal(t, "ami-0abc", *out.Parameter.Value)
	assert.Equal(t, int64(2), out.Parameter.Version, "an overwrite raises the version")

	assert.ErrorContains(t, e.emu.PutParameter("/aws/service/mine", "x"), "reserved")
	assert.ErrorContains(t, e.emu.PutParameter("/team/empty", ""), "value must be")
	resp, err = http.Post(e.url+"/_emu/parameters", "application/json", strings.NewReader(`{"name":"","value":"x"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	e.emu.Reset()
	_, err = e.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/team/ami")})
	var nf *ssmtypes.ParameterNotFound
	require.ErrorAs(t, err, &nf, "a reset forgets the parameters put")
}

// SSM can be throttled like EC2 and SQS.
func TestSSMThrottled(t *testing.T) {
	e := newEnv(t, nil)
	require.NoError(t, e.emu.SetThrottle(Throttle{Service: "ssm", Share: 1}))
	once := ssm.NewFromConfig(sdkConfig(e.url, 1))
	_, err := once.GetParameter(context.Background(), &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ThrottlingException")
}
