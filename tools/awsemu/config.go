package awsemu

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Config is everything the emulator is started with. The zero value of a field means its
// default (see Defaults).
type Config struct {
	Region      string   // default us-east-1
	Zones       []string // default <region>a, b, c
	AccountID   string   // default 123456789012
	ClusterName string   // discovery tag value karpenter.sh/discovery=<ClusterName>; default demo-cluster

	// ServiceCIDR is the cluster's service CIDR EKS DescribeCluster reports
	// (kubernetesNetworkConfig.serviceIpv4Cidr, serviceIpv6Cidr for an IPv6 prefix); default
	// 10.100.0.0/16, EKS's own default. ClusterEndpoint is its API server URL there; default an
	// EKS-looking one.
	ServiceCIDR     string
	ClusterEndpoint string

	// InterruptionQueue is the SQS queue created at start that receives interruption events;
	// default fleetwright-<ClusterName>, as deploy/aws/fleetwright.yaml names it (Karpenter's
	// stack names its queue after the cluster: a migration runs both).
	InterruptionQueue string

	// Roles are the IAM roles that exist at start (and after Reset); nil means
	// KarpenterNodeRole-<ClusterName> (the role of Karpenter's getting-started guide and of
	// deploy/examples) and the roles InstanceProfiles name. Empty and non-nil means none.
	Roles []string
	// InstanceProfiles are the IAM instance profiles that exist at start, by name, each with
	// its role ("" for none), which must be one of Roles. Nil means
	// KarpenterNodeInstanceProfile-<ClusterName> holding KarpenterNodeRole-<ClusterName>: the
	// profile v1alpha1 AWSNodeTemplates launch with by default.
	InstanceProfiles map[string]string

	BootDelay           time.Duration // pending → running; default 5s (NoDelay for none)
	ShutdownDelay       time.Duration // shutting-down → terminated; default 5s
	NodeDeletionDelay   time.Duration // terminated → Node deleted; default 5s
	SpotNotice          time.Duration // spot interruption warning → termination; default 2m
	TerminatedRetention time.Duration // terminated instances stay visible this long; default 1h
	// DescribeDelay is how long after it exists an instance, or a change of its tags, shows in
	// DescribeInstances, as EC2's eventual consistency has it (consistency.go); default 0:
	// at once.
	DescribeDelay time.Duration

	// PoolCapacity is how many instances each pool (type × zone × capacity type) can hold at
	// once unless the admin API says otherwise; default 100.
	PoolCapacity int

	Seed int64 // seeds instance IDs, IPs and event IDs; default 1

	// SteadySpotPrices holds every type's spot price in a zone at one value of the model
	// (catalog.ModelledSpotPrice's step 0) instead of moving it every catalog.SpotPriceStep:
	// for tests that compare a plan with prices they compute themselves.
	SteadySpotPrices bool

	Clock Clock // default RealClock

	// Registrar, when set, is told when instances start and stop so it can register and
	// delete their Nodes (see NewRegistrar). Nil means no node registration.
	Registrar NodeRegistrar

	// TickInterval is how often Run advances timers in real time; default 50ms.
	TickInterval time.Duration
}

// NoDelay stands for "no delay" in a Config duration, whose zero value means the default:
// the timer fires on the next tick.
const NoDelay = time.Nanosecond

// NodeRegistrar is what the emulator tells about instances that boot and go away. Both calls
// must return quickly (queue the work): they are made while the emulator holds its lock.
type NodeRegistrar interface {
	Register(NodeSpec)
	Deregister(nodeName string)
}

// withDefaults returns c with zero fields filled in and checks what is left.
func (c Config) withDefaults() (Config, error) {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if len(c.Zones) == 0 {
		c.Zones = []string{c.Region + "a", c.Region + "b", c.Region + "c"}
	}
	if c.AccountID == "" {
		c.AccountID = "123456789012"
	}
	if c.ClusterName == "" {
		c.ClusterName = "demo-cluster"
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = "10.100.0.0/16"
	}
	if c.InterruptionQueue == "" {
		c.InterruptionQueue = "fleetwright-" + c.ClusterName
	}
	if c.InstanceProfiles == nil {
		c.InstanceProfiles = map[string]string{"KarpenterNodeInstanceProfile-" + c.ClusterName: "KarpenterNodeRole-" + c.ClusterName}
	}
	if c.Roles == nil {
		c.Roles = []string{"KarpenterNodeRole-" + c.ClusterName}
		for _, role := range c.InstanceProfiles {
			if role != "" && !slices.Contains(c.Roles, role) {
				c.Roles = append(c.Roles, role)
			}
		}
		slices.Sort(c.Roles)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.BootDelay, 5*time.Second)
	def(&c.ShutdownDelay, 5*time.Second)
	def(&c.NodeDeletionDelay, 5*time.Second)
	def(&c.SpotNotice, 2*time.Minute)
	def(&c.TerminatedRetention, time.Hour)
	def(&c.TickInterval, 50*time.Millisecond)
	if c.PoolCapacity == 0 {
		c.PoolCapacity = 100
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	var errs []error
	if len(c.Zones) > 16 {
		errs = append(errs, fmt.Errorf("at most 16 zones, got %d", len(c.Zones)))
	}
	for _, z := range c.Zones {
		if !strings.HasPrefix(z, c.Region) || len(z) <= len(c.Region) {
			errs = append(errs, fmt.Errorf("zone %q is not in region %q", z, c.Region))
		}
	}
	if _, err := netip.ParsePrefix(c.ServiceCIDR); err != nil {
		errs = append(errs, fmt.Errorf("service CIDR %q: %w", c.ServiceCIDR, err))
	}
	if len(c.AccountID) != 12 {
		errs = append(errs, fmt.Errorf("account id %q is not 12 digits", c.AccountID))
	}
	if c.PoolCapacity < 0 {
		errs = append(errs, fmt.Errorf("pool capacity %d is negative", c.PoolCapacity))
	}
	for name, role := range c.InstanceProfiles {
		if name == "" || role != "" && !slices.Contains(c.Roles, role) {
			errs = append(errs, fmt.Errorf("instance profile %q: role %q is not one of the roles %v", name, role, c.Roles))
		}
	}
	for _, d := range []time.Duration{c.BootDelay, c.ShutdownDelay, c.NodeDeletionDelay, c.SpotNotice} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("negative delay %s", d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("checking config: %w", err)
	}
	return c, nil
}
