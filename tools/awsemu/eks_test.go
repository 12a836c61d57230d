package awsemu

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEKSDescribeCluster: the SDK's EKS client reads the emulated cluster's service CIDR from
// DescribeCluster, IPv4 or IPv6 as configured (EKS's default 10.100.0.0/16 when not), and
// another cluster name is EKS's ResourceNotFoundException.
func TestEKSDescribeCluster(t *testing.T) {
	for _, tc := range []struct {
		name, cidr        string
		wantIPv4, wantIP6 string
	}{
		{"default", "", "10.100.0.0/16", ""},
		{"ipv4", "172.20.0.0/16", "172.20.0.0/16", ""},
		{"ipv6", "fd30:1234:5678::/108", "", "fd30:1234:5678::/108"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.ClusterName, c.ServiceCIDR = "prod-1", tc.cidr })
			client := eks.NewFromConfig(sdkConfig(e.url, 1))
			ctx := context.Background()
			out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("prod-1")})
			require.NoError(t, err)
			net := out.Cluster.KubernetesNetworkConfig
			require.NotNil(t, net)
			assert.Equal(t, tc.wantIPv4, aws.ToString(net.ServiceIpv4Cidr))
			assert.Equal(t, tc.wantIP6, aws.ToString(net.ServiceIpv6Cidr))
			assert.Equal(t, "prod-1", aws.ToString(out.Cluster.Name))
			assert.Equal(t, ekstypes.ClusterStatusActive, out.Cluster.Status)
			assert.Equal(t, "arn:aws:eks:us-east-1:123456789012:cluster/prod-1", aws.ToString(out.Cluster.Arn))

			_, err = client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("other")})
			var nf *ekstypes.ResourceNotFoundException
			require.True(t, errors.As(err, &nf), "%v", err)
			assert.Contains(t, err.Error(), "No cluster found for name: other.")
			calls := e.emu.Calls()
			require.GreaterOrEqual(t, len(calls), 2)
			assert.Equal(t, Call{Service: "eks", Action: "DescribeCluster", ErrorCode: "ResourceNotFoundException"}, withoutTime(calls[len(calls)-1]))
		})
	}
}

// withoutTime is a call without its time, to compare.
func withoutTime(c Call) Call {
	return Call{Service: c.Service, Action: c.Action, ErrorCode: c.ErrorCode, Throttled: c.Throttled}
}
