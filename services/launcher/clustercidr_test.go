package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetwright/fleetwright/pkg/bus/bustest"
	"github.com/fleetwright/fleetwright/tools/awsemu"
	"github.com/fleetwright/fleetwright/tools/e2e"
)

// TestServiceCIDR: the CIDR DescribeCluster reports, IPv4 before IPv6 as Karpenter reads it;
// none, or one that does not parse, is an error, never a default.
func TestServiceCIDR(t *testing.T) {
	for _, tc := range []struct {
		name, v4, v6, want, err string
		noNetwork               bool
	}{
		{name: "ipv4", v4: "172.20.0.0/16", want: "172.20.0.0/16"},
		{name: "ipv6", v6: "fd30:1234::/108", want: "fd30:1234::/108"},
		{name: "both: ipv4", v4: "10.100.0.0/16", v6: "fd30:1234::/108", want: "10.100.0.0/16"},
		{name: "neither", err: "neither serviceIpv4Cidr nor serviceIpv6Cidr"},
		{name: "no network config", noNetwork: true, err: "no kubernetesNetworkConfig"},
		{name: "not a CIDR", v4: "10.100.0.0", err: `service CIDR "10.100.0.0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &ekstypes.Cluster{KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{}}
			if tc.v4 != "" {
				c.KubernetesNetworkConfig.ServiceIpv4Cidr = aws.String(tc.v4)
			}
			if tc.v6 != "" {
				c.KubernetesNetworkConfig.ServiceIpv6Cidr = aws.String(tc.v6)
			}
			if tc.noNetwork {
				c.KubernetesNetworkConfig = nil
			}
			got, err := serviceCIDR(c)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestClusterCIDRDiscoveredFromEKS: with CLUSTER_CIDR unset, an AL2023 node's NodeConfig
// carries the service CIDR EKS reports for the cluster (172.20.0.0/16 here), not a guess.
func TestClusterCIDRDiscoveredFromEKS(t *testing.T) {
	t.Setenv("CLUSTER_CIDR", "")
	e := startEmulated(t, func(c *awsemu.Config) { c.ServiceCIDR = "172.20.0.0/16" }, nil)
	e.launch("default", "default-cidr1", "t4g.small")
	e.claimWhen("default-cidr1", 90*time.Second, hasInstance, "launched")
	ud := e.template("default-cidr1").UserData
	assert.Contains(t, ud, "cidr: 172.20.0.0/16", "the NodeConfig's spec.cluster.cidr is the cluster's")
	assert.NotContains(t, ud, "10.100.0.0/16")
	assert.Equal(t, 1, e.countCalls(func(c awsemu.Call) bool { return c.Service == "eks" && c.Action == "DescribeCluster" }), "read once, at start")
}

// TestClusterCIDRSetIsUsedAsIs: a CLUSTER_CIDR that is set wins, and EKS is not asked.
func TestClusterCIDRSetIsUsedAsIs(t *testing.T) {
	e := startEmulated(t, func(c *awsemu.Config) { c.ServiceCIDR = "172.20.0.0/16" }, nil, "--cluster-cidr", "10.96.0.0/12")
	e.launch("default", "default-cidr2", "t4g.small")
	e.claimWhen("default-cidr2", 90*time.Second, hasInstance, "launched")
	assert.Contains(t, e.template("default-cidr2").UserData, "cidr: 10.96.0.0/12")
	assert.Zero(t, e.countCalls(func(c awsemu.Call) bool { return c.Service == "eks" }))
}

// TestLauncherRefusesToStartWithoutServiceCIDR: CLUSTER_CIDR unset and EKS not knowing the
// cluster (or not answering), the launcher does not start, and says what to set.
func TestLauncherRefusesToStartWithoutServiceCIDR(t *testing.T) {
	c := e2e.Cluster(t)
	emu, err := awsemu.New(awsemu.Config{ClusterName: "demo-cluster"})
	require.NoError(t, err)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_EC2": srv.URL, "AWS_ENDPOINT_URL_IAM": srv.URL, "AWS_ENDPOINT_URL_SSM": srv.URL,
		"AWS_ENDPOINT_URL_EKS": srv.URL, "AWS_ENDPOINT_URL_PRICING": srv.URL, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1",
		"AWS_EC2_METADATA_DISABLED": "true", "CLUSTER_CIDR": ""} {
		t.Setenv(k, v)
	}
	nsrv := bustest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = run(ctx, []string{"--nats-url", nsrv.ClientURL(), "--kubeconfig", c.Kubeconfig, "--admin-addr", "127.0.0.1:0",
		"--cluster-name", "not-on-eks"})
	require.Error(t, err, "no start without the service CIDR")
	assert.ErrorContains(t, err, "set CLUSTER_CIDR (--cluster-cidr)")
	assert.ErrorContains(t, err, "ResourceNotFoundException")
	assert.ErrorContains(t, err, `"not-on-eks"`)

	_, err = parseConfig([]string{"--cluster-name", "x", "--cluster-cidr", "10.100.0.0"})
	assert.ErrorContains(t, err, `--cluster-cidr "10.100.0.0" is not a CIDR`)
}
