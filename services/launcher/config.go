package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"time"

	"github.com/fleetwright/fleetwright/pkg/offerings"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/service"
)

type config struct {
	service.Common
	ClusterName            string
	ClusterEndpoint        string
	ClusterCAFile          string
	ClusterDNS             string
	ClusterCIDR            string
	Region                 string
	Workers                int
	CatalogRefresh         time.Duration
	OnDemandPriceRefresh   time.Duration
	ResolverTTL            time.Duration
	StatusInterval         time.Duration
	RegistrationResync     time.Duration
	TemplateGC             time.Duration
	UnavailableTTL         time.Duration
	SpotPriceModelled      bool
	DefaultInstanceProfile string
	// VMMemoryOverhead is the scheduler's setting (scheduling.VMOverheadFlag): a launched
	// claim's status.allocatable is what the scheduler planned.
	VMMemoryOverhead float64
	// LookupWait is how long after a launch was asked of EC2 for a claim (its launch record)
	// a redelivered intent keeps looking for the instance before it asks again: EC2's
	// DescribeInstances shows a new instance and its tags only after a while.
	LookupWait time.Duration
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("launcher", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:8083")
	fs.StringVar(&c.ClusterName, "cluster-name", service.Env("CLUSTER_NAME", ""), "EKS cluster name: discovery and ownership tags, node bootstrap (env CLUSTER_NAME)")
	fs.StringVar(&c.ClusterEndpoint, "cluster-endpoint", service.Env("CLUSTER_ENDPOINT", ""), "API server URL nodes join (env CLUSTER_ENDPOINT)")
	fs.StringVar(&c.ClusterCAFile, "cluster-ca-file", service.Env("CLUSTER_CA_FILE", ""), "PEM CA bundle nodes trust for the API server (env CLUSTER_CA_FILE)")
	fs.StringVar(&c.ClusterDNS, "cluster-dns", service.Env("CLUSTER_DNS", ""), "cluster DNS IP for the kubelet (env CLUSTER_DNS)")
	fs.StringVar(&c.ClusterCIDR, "cluster-cidr", service.Env("CLUSTER_CIDR", ""),
		"the cluster's service CIDR, from which AL2023's nodeadm derives the cluster DNS address; empty: read from EKS DescribeCluster, and no start if it cannot be (env CLUSTER_CIDR)")
	fs.StringVar(&c.Region, "region", service.Env("AWS_REGION", "us-east-1"), "AWS region (env AWS_REGION)")
	fs.IntVar(&c.Workers, "launch-workers", service.EnvInt("LAUNCH_WORKERS", 4), "launches in flight per replica (env LAUNCH_WORKERS)")
	fs.DurationVar(&c.CatalogRefresh, "catalog-refresh", service.EnvDuration("CATALOG_REFRESH", 5*time.Minute),
		"how often to republish the instance catalog: the types and zones EC2 offers and their spot prices (DescribeSpotPriceHistory) are read again each time (env CATALOG_REFRESH)")
	fs.DurationVar(&c.OnDemandPriceRefresh, "on-demand-price-refresh", service.EnvDuration("ON_DEMAND_PRICE_REFRESH", 12*time.Hour),
		"how often the region's on-demand prices are read again from the AWS Pricing API (GetProducts; endpoint from AWS_ENDPOINT_URL_PRICING, else the API's nearest region), as Karpenter's 12h; "+
			"a failed read is tried again at the next catalog refresh; types it does not price take the embedded per-region table's price; 0: never ask, the embedded table alone (isolated VPCs) (env ON_DEMAND_PRICE_REFRESH)")
	fs.DurationVar(&c.StatusInterval, "status-interval", service.EnvDuration("STATUS_INTERVAL", 30*time.Second),
		"EC2NodeClass and NodePool statuses, their hash annotations, NodeClaims' Drifted conditions and v1alpha5 adoption are brought up to date on every change of what they read; "+
			"this is how often they also are regardless, for what no watch announces (what a class's terms resolve to in EC2) (env STATUS_INTERVAL)")
	fs.DurationVar(&c.RegistrationResync, "registration-resync", service.EnvDuration("REGISTRATION_RESYNC", 10*time.Second),
		"registration runs on every Node and NodeClaim change; this is how often it also runs regardless, as a safety net (env REGISTRATION_RESYNC)")
	fs.DurationVar(&c.TemplateGC, "launch-template-gc-interval", service.EnvDuration("LAUNCH_TEMPLATE_GC_INTERVAL", 5*time.Minute),
		"how often launch templates no longer used (their node class deleted, or their configuration replaced and no live NodeClaim launched from them; "+
			"at least this old) and instance profiles of node classes that no longer exist are deleted (env LAUNCH_TEMPLATE_GC_INTERVAL)")
	fs.DurationVar(&c.ResolverTTL, "resolver-ttl", service.EnvDuration("RESOLVER_TTL", time.Minute), "cache time for subnets, security groups, AMIs and launch templates (env RESOLVER_TTL)")
	fs.DurationVar(&c.UnavailableTTL, "unavailable-ttl", service.EnvDuration("UNAVAILABLE_TTL", 3*time.Minute), "how long an offering out of capacity is avoided (env UNAVAILABLE_TTL)")
	fs.BoolVar(&c.SpotPriceModelled, "spot-price-modelled", service.Env("SPOT_PRICE_MODELLED", "") == "true", "mark spot prices as modelled in the catalog (the AWS emulator's are) (env SPOT_PRICE_MODELLED)")
	fs.StringVar(&c.DefaultInstanceProfile, "default-instance-profile", service.Env("DEFAULT_INSTANCE_PROFILE", "KarpenterNodeInstanceProfile-"+service.Env("CLUSTER_NAME", "demo-cluster")),
		"instance profile for v1alpha1 AWSNodeTemplates that name none, as aws.defaultInstanceProfile did (env DEFAULT_INSTANCE_PROFILE)")
	scheduling.VMOverheadFlag(fs, &c.VMMemoryOverhead, service.EnvFloat)
	fs.DurationVar(&c.LookupWait, "launch-lookup-wait", service.EnvDuration("LAUNCH_LOOKUP_WAIT", 30*time.Second),
		"how long a redelivered intent looks for the instance an earlier delivery asked EC2 for with a different request (DescribeInstances is eventually consistent) before it launches again; "+
			"at most 45s, within one handling of the intent (env LAUNCH_LOOKUP_WAIT)")
	if err := c.Parse(fs, args); err != nil {
		return c, err
	}
	var errs []error
	if c.ClusterName == "" {
		errs = append(errs, errors.New("--cluster-name is required"))
	}
	if _, err := netip.ParsePrefix(c.ClusterCIDR); c.ClusterCIDR != "" && err != nil {
		errs = append(errs, fmt.Errorf("--cluster-cidr %q is not a CIDR: %w", c.ClusterCIDR, err))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("--launch-workers must be at least 1"))
	}
	for name, d := range map[string]time.Duration{"--registration-resync": c.RegistrationResync, "--status-interval": c.StatusInterval,
		"--launch-template-gc-interval": c.TemplateGC, "--catalog-refresh": c.CatalogRefresh} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if c.OnDemandPriceRefresh < 0 {
		errs = append(errs, fmt.Errorf("--on-demand-price-refresh must be 0 (never) or positive, got %s", c.OnDemandPriceRefresh))
	}
	if err := scheduling.ValidVMOverhead(c.VMMemoryOverhead); err != nil {
		errs = append(errs, err)
	}
	if c.LookupWait < 0 || c.LookupWait > maxLookupWait {
		errs = append(errs, fmt.Errorf("--launch-lookup-wait must be from 0 to %s, got %s", maxLookupWait, c.LookupWait))
	}
	if c.UnavailableTTL <= 0 || c.UnavailableTTL > offerings.MaxTTL {
		errs = append(errs, fmt.Errorf("--unavailable-ttl must be positive and at most %s (every service caps an offering's expiry there), got %s", offerings.MaxTTL, c.UnavailableTTL))
	}
	return c, errors.Join(errs...)
}
