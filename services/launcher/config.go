package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

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
	ResolverTTL            time.Duration
	StatusInterval         time.Duration
	RegistrationResync     time.Duration
	TemplateGC             time.Duration
	UnavailableTTL         time.Duration
	SpotPriceModelled      bool
	DefaultInstanceProfile string
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("launcher", flag.ContinueOnError)
	f := c.Register(fs, "127.0.0.1:8083")
	f.String(&c.ClusterName, "cluster-name", "CLUSTER_NAME", "", "EKS cluster name: discovery and ownership tags, node bootstrap")
	f.String(&c.ClusterEndpoint, "cluster-endpoint", "CLUSTER_ENDPOINT", "", "API server URL nodes join")
	f.String(&c.ClusterCAFile, "cluster-ca-file", "CLUSTER_CA_FILE", "", "PEM CA bundle nodes trust for the API server")
	f.String(&c.ClusterDNS, "cluster-dns", "CLUSTER_DNS", "", "cluster DNS IP for the kubelet")
	f.String(&c.ClusterCIDR, "cluster-cidr", "CLUSTER_CIDR", "10.100.0.0/16", "service CIDR, for AL2023 nodeadm")
	f.String(&c.Region, "region", "AWS_REGION", "us-east-1", "AWS region")
	f.Int(&c.Workers, "workers", "LAUNCH_WORKERS", 4, "launches in flight per replica")
	f.Duration(&c.CatalogRefresh, "catalog-refresh", "CATALOG_REFRESH", 5*time.Minute, "how often to republish the instance catalog")
	f.Duration(&c.StatusInterval, "status-interval", "STATUS_INTERVAL", 30*time.Second,
		"EC2NodeClass and NodePool statuses, their hash annotations, NodeClaims' Drifted conditions and v1alpha5 adoption are brought up to date on every change of what they read; "+
			"this is how often they also are regardless, for what no watch announces (what a class's terms resolve to in EC2)")
	f.Duration(&c.RegistrationResync, "registration-resync", "REGISTRATION_RESYNC", 10*time.Second,
		"registration runs on every Node and NodeClaim change; this is how often it also runs regardless, as a safety net")
	f.Duration(&c.TemplateGC, "template-gc-interval", "LAUNCH_TEMPLATE_GC_INTERVAL", 5*time.Minute,
		"how often launch templates and instance profiles of node classes that no longer exist are deleted")
	f.Duration(&c.ResolverTTL, "resolver-ttl", "RESOLVER_TTL", time.Minute, "cache time for subnets, security groups, AMIs and launch templates")
	f.Duration(&c.UnavailableTTL, "unavailable-ttl", "UNAVAILABLE_TTL", 3*time.Minute, "how long an offering out of capacity is avoided")
	fs.BoolVar(&c.SpotPriceModelled, "spot-price-modelled", service.Env("SPOT_PRICE_MODELLED", "") == "true", "mark spot prices as modelled in the catalog (the AWS emulator's are) (env SPOT_PRICE_MODELLED)")
	f.String(&c.DefaultInstanceProfile, "default-instance-profile", "DEFAULT_INSTANCE_PROFILE", "KarpenterNodeInstanceProfile-"+service.Env("CLUSTER_NAME", "demo-cluster"),
		"instance profile for v1alpha1 AWSNodeTemplates that name none, as aws.defaultInstanceProfile did")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var errs []error
	if c.ClusterName == "" {
		errs = append(errs, errors.New("--cluster-name is required"))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	for name, d := range map[string]time.Duration{"--registration-resync": c.RegistrationResync, "--status-interval": c.StatusInterval,
		"--template-gc-interval": c.TemplateGC, "--catalog-refresh": c.CatalogRefresh} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	return c, errors.Join(errs...)
}
