package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fleetwright/fleetwright/pkg/podproj"
	"github.com/fleetwright/fleetwright/pkg/scheduling"
	"github.com/fleetwright/fleetwright/pkg/service"
)

type config struct {
	service.Common
	Namespace         string
	Identity          string
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
	Reconcile         time.Duration
	UnavailableReplay time.Duration
	MaxInstanceTypes  int
	CacheWait         time.Duration
	// BatchTimeout bounds the handling of one batch (its handler's deadline). The batch is kept
	// in progress meanwhile (pkg/bus heartbeats), however long past AckWait that is.
	BatchTimeout time.Duration
	// Nomination bounds how long a pod nominated to a NodeClaim holds the room planned for it;
	// NominationCheck is how often at the least the leader ends nominations ready nodes cannot
	// honour (changes start the check sooner: nominationCheckGap).
	Nomination      podproj.NominationRule
	NominationCheck time.Duration
	// Early lets a pod kube-scheduler has not tried yet count as pending once old enough (as
	// pod-watcher judges it).
	Early podproj.EarlyRule
	// NominatedEventBurst and NominatedEventQPS bound the per-pod Nominated events (a token
	// bucket): a scale-out of thousands of pods tells the first pods, and the claim the rest.
	NominatedEventBurst int
	NominatedEventQPS   float64
	// LaunchLoop stops launching nodes for a workload whose launched nodes keep coming up without
	// room for it.
	LaunchLoop podproj.LaunchLoopRule
	// VMMemoryOverhead is the share of an instance's nominal memory the hypervisor and kernel
	// keep, which the scheduler takes off every type's memory (Karpenter's
	// VM_MEMORY_OVERHEAD_PERCENT, a fraction despite the name).
	VMMemoryOverhead float64
	// PreferencePolicy is Karpenter's --preference-policy: Respect relaxes pods' preferences one
	// at a time, Ignore plans as if they had none (every solve: provisioning, consolidation,
	// interruptions, simulate).
	PreferencePolicy scheduling.PreferencePolicy
	// Disruption: how often the leader looks for nodes to consolidate or replace; the share of
	// the replaced price a replacement must save (a NodePool's fleetwright.io/consolidation-min-savings
	// overrides it); how long a replacement may take to initialize; the SpotToSpotConsolidation gate.
	DisruptionInterval time.Duration
	MinSavings         float64
	ReplacementTimeout time.Duration
	// ConsolidationValidation is how long an emptiness or consolidation command waits to be
	// judged again on the cluster as it is then, before it is acted on (Karpenter's 15 s).
	ConsolidationValidation time.Duration
	SpotToSpot              bool
	FeatureGates            string
}

func parseConfig(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:8082")
	host, _ := os.Hostname()
	fs.StringVar(&c.Namespace, "pod-namespace", service.Env("POD_NAMESPACE", "fleetwright"), "namespace of the leader-election Lease (env POD_NAMESPACE)")
	fs.StringVar(&c.Identity, "pod-name", service.Env("POD_NAME", host), "this replica's name as Lease holder (env POD_NAME)")
	fs.DurationVar(&c.LeaseDuration, "lease-duration", service.EnvDuration("LEASE_DURATION", 8*time.Second), "how long a standby waits before taking over a lease that is not renewed (env LEASE_DURATION)")
	fs.DurationVar(&c.RenewDeadline, "renew-deadline", service.EnvDuration("RENEW_DEADLINE", 6*time.Second), "how long the leader keeps trying to renew before it steps down (env RENEW_DEADLINE)")
	fs.DurationVar(&c.RetryPeriod, "retry-period", service.EnvDuration("RETRY_PERIOD", time.Second), "how often leader election is retried (env RETRY_PERIOD)")
	fs.DurationVar(&c.Reconcile, "reconcile-interval", service.EnvDuration("RECONCILE_INTERVAL", 30*time.Second), "how often the leader republishes intents of NodeClaims not launched yet (env RECONCILE_INTERVAL)")
	fs.DurationVar(&c.UnavailableReplay, "unavailable-replay", service.EnvDuration("UNAVAILABLE_REPLAY", 5*time.Minute), "how far back unavailable offerings are replayed on start (env UNAVAILABLE_REPLAY)")
	fs.IntVar(&c.MaxInstanceTypes, "max-instance-types", service.EnvInt("MAX_INSTANCE_TYPES", 60), "instance types offered per NodeClaim, cheapest first (env MAX_INSTANCE_TYPES)")
	fs.DurationVar(&c.CacheWait, "cache-wait", service.EnvDuration("CACHE_WAIT", 2*time.Second), "how long a batch waits for the pod cache to show its pods pending (env CACHE_WAIT)")
	fs.DurationVar(&c.BatchTimeout, "batch-timeout", service.EnvDuration("BATCH_TIMEOUT", 10*time.Minute),
		"how long the handling of one pending-pod batch may take before it is given up and retried; a batch of thousands of pods takes minutes at the client's QPS (env BATCH_TIMEOUT)")
	c.Nomination.RegisterFlags(fs, service.EnvDuration)
	c.Early.RegisterFlags(fs, service.EnvDuration)
	c.LaunchLoop.RegisterFlags(fs, service.EnvInt, service.EnvDuration)
	fs.DurationVar(&c.NominationCheck, "nomination-check-interval", service.EnvDuration("NOMINATION_CHECK_INTERVAL", 30*time.Second),
		"how often at the least the leader ends the nominations of pods a ready node has no room left for; a change of a NodeClaim, node or pod starts the check sooner, at most once every 2 s (env NOMINATION_CHECK_INTERVAL)")
	fs.IntVar(&c.NominatedEventBurst, "nominated-event-burst", service.EnvInt("NOMINATED_EVENT_BURST", 100),
		"per-pod Nominated events recorded at once before --nominated-event-qps bounds them; pods past the bound are counted in one Nominated event on their NodeClaim; 0: none (env NOMINATED_EVENT_BURST)")
	fs.Float64Var(&c.NominatedEventQPS, "nominated-event-qps", service.EnvFloat("NOMINATED_EVENT_QPS", 10),
		"per-pod Nominated events recorded per second once --nominated-event-burst is spent (env NOMINATED_EVENT_QPS)")
	scheduling.VMOverheadFlag(fs, &c.VMMemoryOverhead, service.EnvFloat)
	fs.StringVar((*string)(&c.PreferencePolicy), "preference-policy", service.Env("PREFERENCE_POLICY", string(scheduling.PreferenceRespect)),
		"Respect: pods' preferences hold until a pod cannot be placed, then are relaxed one at a time in Karpenter's order; Ignore: they are not considered (env PREFERENCE_POLICY)")
	fs.DurationVar(&c.DisruptionInterval, "disruption-interval", service.EnvDuration("DISRUPTION_INTERVAL", 5*time.Second),
		"how often the leader looks for nodes to consolidate and drifted nodes to replace (env DISRUPTION_INTERVAL)")
	fs.Float64Var(&c.MinSavings, "consolidation-min-savings", service.EnvFloat("CONSOLIDATION_MIN_SAVINGS", 0.05),
		"share of the replaced nodes' price a consolidation replacement must save, as a fraction: 0.05 is 5%; deletes need none "+
			"(env CONSOLIDATION_MIN_SAVINGS; a NodePool's "+minSavingsAnnotation+" annotation, e.g. \"10%\", overrides it)")
	fs.DurationVar(&c.ReplacementTimeout, "replacement-timeout", service.EnvDuration("REPLACEMENT_TIMEOUT", 10*time.Minute),
		"how long a disruption waits for its replacements to initialize and its old node to go before it is abandoned (env REPLACEMENT_TIMEOUT)")
	fs.DurationVar(&c.ConsolidationValidation, "consolidation-validation", service.EnvDuration("CONSOLIDATION_VALIDATION", 15*time.Second),
		"how long an emptiness or consolidation decision waits to be validated again on the cluster as it is then before it is acted on; 0 acts at once (env CONSOLIDATION_VALIDATION)")
	fs.StringVar(&c.FeatureGates, "feature-gates", service.Env("FEATURE_GATES", ""),
		"Karpenter's feature gates, e.g. SpotToSpotConsolidation=true (env FEATURE_GATES)")
	if err := c.Parse(fs, args); err != nil {
		return c, err
	}
	var errs []error
	if c.Namespace == "" || c.Identity == "" {
		errs = append(errs, errors.New("--pod-namespace and --pod-name are required"))
	}
	if c.LeaseDuration <= c.RenewDeadline || c.RenewDeadline <= c.RetryPeriod || c.RetryPeriod <= 0 {
		errs = append(errs, errors.New("need --lease-duration > --renew-deadline > --retry-period > 0"))
	}
	if c.Reconcile <= 0 || c.NominationCheck <= 0 || c.BatchTimeout <= 0 {
		errs = append(errs, errors.New("--reconcile-interval, --nomination-check-interval and --batch-timeout must be positive"))
	}
	if c.NominatedEventBurst < 0 || c.NominatedEventQPS <= 0 {
		errs = append(errs, errors.New("--nominated-event-burst must not be negative, --nominated-event-qps must be positive"))
	}
	if err := c.Nomination.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Early.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.LaunchLoop.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxInstanceTypes < 1 || c.MaxInstanceTypes > 60 {
		errs = append(errs, errors.New("--max-instance-types must be between 1 and 60"))
	}
	if err := scheduling.ValidVMOverhead(c.VMMemoryOverhead); err != nil {
		errs = append(errs, err)
	}
	if c.DisruptionInterval <= 0 || c.ReplacementTimeout <= 0 || c.ConsolidationValidation < 0 {
		errs = append(errs, errors.New("--disruption-interval and --replacement-timeout must be positive, --consolidation-validation not negative"))
	}
	if c.MinSavings < 0 || c.MinSavings >= 1 {
		errs = append(errs, errors.New("--consolidation-min-savings must be a fraction from 0 to below 1 (0.05 is 5%)"))
	}
	var perr error
	if c.PreferencePolicy, perr = scheduling.ParsePreferencePolicy(string(c.PreferencePolicy)); perr != nil {
		errs = append(errs, fmt.Errorf("--preference-policy: %w", perr))
	}
	gates, err := parseFeatureGates(c.FeatureGates)
	if err != nil {
		errs = append(errs, err)
	}
	c.SpotToSpot = gates["SpotToSpotConsolidation"]
	return c, errors.Join(errs...)
}

// knownGates are the feature gates the scheduler acts on; others are refused, not ignored.
var knownGates = map[string]bool{"SpotToSpotConsolidation": true}

// parseFeatureGates reads "Name=true,Other=false".
func parseFeatureGates(v string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(val)
		if !ok || err != nil {
			return nil, fmt.Errorf("--feature-gates: %q is not Name=true|false", kv)
		}
		if !knownGates[name] {
			return nil, fmt.Errorf("--feature-gates: unknown gate %q (known: SpotToSpotConsolidation)", name)
		}
		out[name] = b
	}
	return out, nil
}
