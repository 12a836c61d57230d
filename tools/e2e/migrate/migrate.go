// Package migrate makes a stack's cluster look as an older autoscaler left it, for the
// migration tests (tools/e2e, tools/e2e/fault). It is apart from tools/e2e so that what imports
// that package (every service's tests) does not import the AWS SDK with it.
package migrate

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	ec2v1 "github.com/fleetwright/fleetwright/pkg/apis/ec2/v1"
	karpv1 "github.com/fleetwright/fleetwright/pkg/apis/karpenter/v1"
	"github.com/fleetwright/fleetwright/pkg/sdkhttp"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// EC2 is an SDK client of the stack's emulator, with the services' HTTP client.
func EC2(s *e2e.Stack) *ec2.Client {
	return ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(s.EmuURL),
		Credentials: credentials.NewStaticCredentialsProvider("x", "x", ""), HTTPClient: sdkhttp.Client(awshttp.NewBuildableClient())})
}

// AsKarpenterV1Alpha5 makes the stack's nodes of a v1alpha5 Provisioner look as Karpenter v0.2x
// leaves them, its services stopped first: no NodeClaims, each instance tagged with the
// Provisioner (karpenter.sh/provisioner-name) and not with a claim or pool. It returns each
// node's instance.
func AsKarpenterV1Alpha5(t testing.TB, s *e2e.Stack, provisioner string) map[string]string {
	t.Helper()
	ctx := context.Background()
	api := EC2(s)
	instanceOf := map[string]string{} // node → instance
	for _, nc := range s.NodeClaims(t) {
		id := ec2v1.InstanceID(nc.Status.ProviderID)
		instanceOf[nc.Status.NodeName] = id
		_, err := api.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{id},
			Tags: []ec2types.Tag{{Key: aws.String(ec2v1.TagNodeClaim)}, {Key: aws.String(karpv1.NodePoolLabelKey)}}})
		require.NoError(t, err)
		_, err = api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id},
			Tags: []ec2types.Tag{{Key: aws.String("karpenter.sh/provisioner-name"), Value: aws.String(provisioner)}}})
		require.NoError(t, err)
		// A v0.2x node has no NodeClaim to be owned by: without this the garbage collector would
		// delete the node with the claim.
		s.Kubectl("patch", "node", nc.Status.NodeName, "--type", "merge", "-p", `{"metadata":{"ownerReferences":null}}`)
		s.Kubectl("patch", "nodeclaim", nc.Name, "--type", "merge", "-p", `{"metadata":{"finalizers":null}}`)
		s.Kubectl("delete", "nodeclaim", nc.Name, "--wait=true")
	}
	require.NotEmpty(t, instanceOf)
	require.Empty(t, s.NodeClaims(t))
	return instanceOf
}
