package scheduling

import "time"

// Input is everything one solve needs. It is read, never modified.
type Input struct {
	// Pods are the pending pods to place.
	Pods []Pod
	// Nodes are the existing nodes and in-flight NodeClaims, with their pods; they are filled
	// before any new NodeClaim is opened.
	Nodes      []Node
	DaemonSets []DaemonSet
	NodePools  []NodePool
	// InstanceTypes is the catalog (see FromCatalog); Unavailable lists offerings that recently
	// failed with insufficient capacity.
	InstanceTypes []InstanceType
	Unavailable   []OfferingKey

	// Clock and NewID are injected so a solve is reproducible; nil means a fixed epoch and
	// names nodeclaim-00001, nodeclaim-00002, ...
	Clock func() time.Time
	NewID func() string

	// MaxInstanceTypes caps the options per NodeClaim (0: 60).
	MaxInstanceTypes int
	// SkipImprovement turns the cost-improvement step off (to measure what it buys).
	SkipImprovement bool
	// ZoneIDs maps each zone to its id (topology.k8s.aws/zone-id, e.g. use1-az1: the same
	// physical zone in every account): a requirement on the id picks the zones that have it. A
	// zone without an id here has no zone-id label.
	ZoneIDs map[string]string
	// PreferencePolicy is Karpenter's --preference-policy: Respect ("" too) keeps each pod's
	// preferences until it cannot be placed, then relaxes them one at a time; Ignore plans as if
	// pods had none.
	PreferencePolicy PreferencePolicy
}

// OfferingKey names one offering.
type OfferingKey struct {
	InstanceType string
	Zone         string
	CapacityType string
}

// String is capacity-type/instance-type/zone, e.g. spot/m5.large/us-east-1a.
func (k OfferingKey) String() string { return k.CapacityType + "/" + k.InstanceType + "/" + k.Zone }

// Plan is the outcome of a solve.
type Plan struct {
	CreatedAt time.Time
	// NodeClaims are the new claims to create, in creation order.
	NodeClaims []NodeClaim
	// Placements are pods placed on existing nodes or in-flight claims.
	Placements []Placement
	// Unschedulable explains every pod that could not be placed.
	Unschedulable []Unschedulable
	// Relaxations lists every soft constraint dropped, in the order it was dropped.
	Relaxations []Relaxation
	// PoolsWithoutTypes are the pools whose own requirements leave no instance type with an
	// available offering, or fewer than their minValues, by name.
	PoolsWithoutTypes []PoolWithoutTypes
}

// PoolWithoutTypes is a pool no pod can use whatever it asks; MinValues: its types are too few
// for its minValues.
type PoolWithoutTypes struct {
	NodePool  string
	MinValues bool
}

// NodeClaim is a planned node.
type NodeClaim struct {
	Name     string
	NodePool string
	// PodUIDs are the pending pods the claim is for.
	PodUIDs []string
	// InstanceTypes are the types it may launch as, cheapest first; Zones and CapacityTypes
	// the offerings allowed (spot listed before on-demand when both are).
	InstanceTypes []string
	Zones         []string
	CapacityTypes []string
	// Requirements are the claim's full requirements (pool, defaults, pods' constraints).
	Requirements  []Requirement
	Labels        map[string]string
	Taints        []Taint
	StartupTaints []Taint
	// Requests is what the pods and DaemonSets ask for on it; Overhead the DaemonSets' part
	// (the most any of its types carries).
	Requests ResourceList
	Overhead ResourceList
	// PriceUSDPerHour is the cheapest allowed offering of the first instance type.
	PriceUSDPerHour float64
}

// Placement puts a pod on an existing node or in-flight claim.
type Placement struct {
	PodUID string
	Node   string
}

// Unschedulable says why a pod was not placed.
type Unschedulable struct {
	PodUID string
	Reason string
}

// Relaxation records one soft constraint dropped for a pod.
type Relaxation struct {
	PodUID      string
	Description string
}

// CostUSDPerHour is the sum of the claims' prices.
func (p Plan) CostUSDPerHour() float64 {
	var c float64
	for _, nc := range p.NodeClaims {
		c += nc.PriceUSDPerHour
	}
	return c
}
