package service

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// UnsupportedSetting is a setting of Karpenter's (an environment variable its controller reads,
// most set by its Helm chart's settings.*) that Fleetwright does not act on.
type UnsupportedSetting struct {
	// Default is Karpenter's default: set to it, or unset, the setting is harmless.
	Default string
	// Instead is what Fleetwright does, in words (docs/settings.md).
	Instead string
}

// UnsupportedKarpenterSettings are Karpenter's settings Fleetwright does not act on, by
// environment variable. Set to anything but Karpenter's default, a service refuses to start and
// names them: a switcher's Helm values carried over would otherwise be accepted and ignored.
var UnsupportedKarpenterSettings = map[string]UnsupportedSetting{
	"RESERVED_ENIS":                       {"0", "max pods count every network interface of the type; none is kept back for VPC CNI custom networking"},
	"ISOLATED_VPC":                        {"false", "no mode for VPCs without AWS endpoints: the launcher needs EC2, SSM, IAM and EKS, the terminator EC2 and SQS; ON_DEMAND_PRICE_REFRESH=0 keeps the launcher off the Pricing API (the embedded price table alone)"},
	"EKS_CONTROL_PLANE":                   {"false", "the launcher asks EKS DescribeCluster for the service CIDR whenever CLUSTER_CIDR is unset, and takes the endpoint from CLUSTER_ENDPOINT or its kubeconfig"},
	"DISABLE_DRY_RUN":                     {"false", "EC2NodeClasses are not validated with EC2 dry-run calls; their statuses say what their terms resolve to"},
	"ENABLE_ZONAL_SHIFT":                  {"false", "zonal shifts are not followed"},
	"MIN_VALUES_POLICY":                   {"Strict", "requirements' minValues are enforced strictly, as Karpenter's default Strict"},
	"IGNORE_DRA_REQUESTS":                 {"true", "pods' DRA requests are ignored when planning, as Karpenter's default"},
	"DISABLE_CLUSTER_STATE_OBSERVABILITY": {"false", "Fleetwright's metrics and events are always on"},
	"DISABLE_LEADER_ELECTION":             {"false", "the scheduler always elects a leader; the other services need none"},
	"LEADER_ELECTION_NAME":                {"karpenter-leader-election", "the scheduler's Lease is fleetwright-scheduler"},
	"LEADER_ELECTION_NAMESPACE":           {"", "the Lease is in POD_NAMESPACE (--pod-namespace)"},
	"DISABLE_CONTROLLER_WARMUP":           {"true", "every replica's caches are warm before it leads"},
	"CLUSTER_CA_BUNDLE":                   {"", "the nodes' CA bundle is a file, CLUSTER_CA_FILE (default: the kubeconfig's)"},
	"AMI_REFRESH_INTERVAL":                {"1m", "RESOLVER_TTL (1m) is how long AMIs, subnets and security groups are cached"},
	"SUBNET_REFRESH_INTERVAL":             {"1m", "RESOLVER_TTL (1m) is how long AMIs, subnets and security groups are cached"},
	"METRICS_PORT":                        {"8080", "each service serves /metrics on ADMIN_ADDR"},
	"HEALTH_PROBE_PORT":                   {"8081", "each service serves /healthz and /readyz on ADMIN_ADDR"},
	"MEMORY_LIMIT":                        {"-1", "the Deployments set GOMEMLIMIT from the container's memory limit"},
	"CPU_REQUESTS":                        {"1000", "not read"},
	"LOG_OUTPUT_PATHS":                    {"stdout", "logs are JSON lines on stderr"},
	"LOG_ERROR_OUTPUT_PATHS":              {"stderr", "logs are JSON lines on stderr"},
	"KARPENTER_SERVICE":                   {"", "no webhooks: the CRDs validate"},
}

// unsupportedSettingsError names the unsupported Karpenter settings set to other than
// Karpenter's default.
func unsupportedSettingsError() error {
	var set []string
	for _, k := range slices.Sorted(maps.Keys(UnsupportedKarpenterSettings)) {
		v := strings.TrimSpace(os.Getenv(k))
		if v == "" || strings.EqualFold(v, UnsupportedKarpenterSettings[k].Default) {
			continue
		}
		set = append(set, fmt.Sprintf("%s=%q", k, v))
	}
	if len(set) == 0 {
		return nil
	}
	//lint:ignore ST1005 the sentence starts with a name
	return fmt.Errorf("Karpenter setting(s) Fleetwright does not support are set: %s; unset them (docs/settings.md says what Fleetwright does instead)", strings.Join(set, ", "))
}
