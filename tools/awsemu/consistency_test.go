package awsemu

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 31, item 2: with a describe delay, as in EC2, a new instance shows in DescribeInstances
// (by ID, by filter, by its tags) only the delay after it exists, and a tag put on it shows the
// delay after it was put; CreateFleet's answer and the admin API see it at once. Set at start
// (Config) or at run time (the admin API).
func TestDescribeInstancesLagsLikeEC2(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DescribeDelay = 20 * time.Second })
	ctx := context.Background()
	e.template(t, "fw-lt", e.image(t, "amazon-eks-node-al2023-x86_64-standard-1.32-*"), "")
	ids := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
	require.Len(t, ids, 1)
	id := ids[0]
	byTag := func(key, value string) int {
		out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("tag:"+key, value)}})
		require.NoError(t, err)
		return len(out.Reservations)
	}
	_, err := e.ec2Once.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	assert.Equal(t, "InvalidInstanceID.NotFound", apiCode(t, err), "by ID, not yet")
	assert.Equal(t, 0, byTag("karpenter.sh/nodepool", "default"), "by tag, not yet")
	assert.Equal(t, ids[0], e.instance(t, id).ID, "the admin API sees it at once")

	e.clock.Advance(20 * time.Second)
	assert.Equal(t, 1, byTag("karpenter.sh/nodepool", "default"), "shown with its launch tags once the delay has passed")
	_, err = e.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("c1")}}})
	require.NoError(t, err)
	assert.Equal(t, 0, byTag("karpenter.sh/nodeclaim", "c1"), "a new tag is not shown at once")
	out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	require.NoError(t, err)
	for _, tag := range out.Reservations[0].Instances[0].Tags {
		assert.NotEqual(t, "karpenter.sh/nodeclaim", aws.ToString(tag.Key), "nor in the instance's tag set")
	}
	e.clock.Advance(20 * time.Second)
	assert.Equal(t, 1, byTag("karpenter.sh/nodeclaim", "c1"), "shown the delay after it was put")

	// Off at run time: what is launched from then on shows at once.
	require.NoError(t, e.emu.SetDescribeDelay(0))
	now := e.launch(t, e.fleet(t, "fw-lt", ec2types.DefaultTargetCapacityTypeOnDemand, 1, ov{"m5.large", "us-east-1a"}))
	_, err = e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: now})
	assert.NoError(t, err)
}
