package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// The cluster's service CIDR goes into every AL2023 node's NodeConfig (spec.cluster.cidr):
// nodeadm derives the cluster DNS address from it (the tenth address of the range), so a wrong
// one gives nodes a DNS server that is not there. It is never guessed: --cluster-cidr
// (CLUSTER_CIDR) when set, else what EKS DescribeCluster says (kubernetesNetworkConfig
// serviceIpv4Cidr, else serviceIpv6Cidr, as Karpenter reads it), else the launcher does not
// start.

// eksAPI is the EKS call the launcher makes.
type eksAPI interface {
	DescribeCluster(context.Context, *eks.DescribeClusterInput, ...func(*eks.Options)) (*eks.DescribeClusterOutput, error)
}

// serviceCIDR is the service CIDR DescribeCluster reports for a cluster: IPv4, else IPv6.
func serviceCIDR(c *ekstypes.Cluster) (string, error) {
	if c == nil || c.KubernetesNetworkConfig == nil {
		return "", errors.New("DescribeCluster returned no kubernetesNetworkConfig")
	}
	for _, cidr := range []*string{c.KubernetesNetworkConfig.ServiceIpv4Cidr, c.KubernetesNetworkConfig.ServiceIpv6Cidr} {
		if s := aws.ToString(cidr); s != "" {
			if _, err := netip.ParsePrefix(s); err != nil {
				return "", fmt.Errorf("DescribeCluster returned service CIDR %q: %w", s, err)
			}
			return s, nil
		}
	}
	return "", errors.New("DescribeCluster returned neither serviceIpv4Cidr nor serviceIpv6Cidr")
}

// resolveClusterCIDR is the service CIDR to give nodes: the configured one, or the one EKS
// reports for the cluster. The error says what to set when neither is to be had.
func resolveClusterCIDR(ctx context.Context, api eksAPI, cfg config) (cidr, source string, err error) {
	if cfg.ClusterCIDR != "" {
		return cfg.ClusterCIDR, "--cluster-cidr", nil
	}
	out, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(cfg.ClusterName)})
	if err == nil {
		cidr, err = serviceCIDR(out.Cluster)
	}
	if err != nil {
		return "", "", fmt.Errorf("the cluster's service CIDR (AL2023 nodes derive their DNS address from it) is not set and could not be discovered: "+
			"EKS DescribeCluster %q: %w; set CLUSTER_CIDR (--cluster-cidr) to `aws eks describe-cluster --name %s --query cluster.kubernetesNetworkConfig.serviceIpv4Cidr`, "+
			"or allow the launcher eks:DescribeCluster on the cluster (deploy/aws/fleetwright.yaml does)", cfg.ClusterName, err, cfg.ClusterName)
	}
	return cidr, "eks:DescribeCluster", nil
}
