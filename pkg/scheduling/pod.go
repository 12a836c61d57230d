package scheduling

import "time"

// Pod is the scheduling-relevant projection of a pending (or bound) pod. The scheduler
// service fills it from the pod spec; every field is optional except UID.
type Pod struct {
	UID          string
	Namespace    string
	Name         string
	Labels       map[string]string
	Owner        OwnerReference
	CreationTime time.Time
	Priority     int32
	// DeletionCost is the controller.kubernetes.io/pod-deletion-cost annotation (0 when absent);
	// consolidation prefers to disrupt pods that cost less (see DisruptionCost).
	DeletionCost int32
	// Mirror marks a static pod's mirror (the kubelet's, owned by the Node): it is not moved
	// when its node goes, and neither are DaemonSet pods.
	Mirror bool
	// Nominated marks a pod on a node's Pods that kube-scheduler has not placed: pending, its
	// room held by a nomination. It takes room as a placed pod does, but does not anchor required
	// pod affinity while the group has placed pods: kube-scheduler looks only at those.
	Nominated bool

	// Requests is the pod's effective request: the larger of the sum of its containers and
	// its biggest init container, plus pod overhead. One "pods" slot is always added.
	Requests ResourceList

	NodeSelector map[string]string
	// RequiredNodeAffinity holds the ORed nodeSelectorTerms of
	// requiredDuringSchedulingIgnoredDuringExecution; each term ANDs its requirements.
	RequiredNodeAffinity  []NodeSelectorTerm
	PreferredNodeAffinity []PreferredNodeSelectorTerm

	PodAffinity     PodAffinityRules
	PodAntiAffinity PodAffinityRules

	Tolerations    []Toleration
	TopologySpread []TopologySpreadConstraint
	HostPorts      []HostPort

	// VolumeRequirements are the node requirements of the pod's volumes (typically
	// topology.kubernetes.io/zone In [...] from a bound PersistentVolume or a StorageClass's
	// allowed topologies), ANDed.
	VolumeRequirements []Requirement
}

// OwnerReference names the controller of a pod.
type OwnerReference struct {
	Kind string
	Name string
	UID  string
}

// NodeSelectorTerm is one term of required node affinity: its requirements are ANDed.
type NodeSelectorTerm struct {
	Requirements []Requirement
}

// PreferredNodeSelectorTerm is a weighted preferred node affinity term.
type PreferredNodeSelectorTerm struct {
	Weight int32
	Term   NodeSelectorTerm
}

// PodAffinityRules are the required and preferred terms of pod affinity or anti-affinity.
type PodAffinityRules struct {
	Required  []PodAffinityTerm
	Preferred []WeightedPodAffinityTerm
}

// PodAffinityTerm selects pods by label in some namespaces (empty: the pod's own) and names
// the topology key (kubernetes.io/hostname, topology.kubernetes.io/zone, ...) that defines
// "together". A nil selector selects nothing, an empty one everything.
type PodAffinityTerm struct {
	LabelSelector *LabelSelector
	Namespaces    []string
	TopologyKey   string
}

// WeightedPodAffinityTerm is a preferred pod (anti-)affinity term.
type WeightedPodAffinityTerm struct {
	Weight int32
	Term   PodAffinityTerm
}

// LabelSelector is a Kubernetes label selector: MatchLabels and MatchExpressions ANDed.
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []Requirement // In, NotIn, Exists, DoesNotExist
}

// Topology spread policies.
const (
	DoNotSchedule  = "DoNotSchedule"
	ScheduleAnyway = "ScheduleAnyway"
)

// TopologySpreadConstraint spreads the pods its selector matches (in the pod's namespace)
// over the domains of TopologyKey. MinDomains 0 means 1.
type TopologySpreadConstraint struct {
	MaxSkew           int32
	TopologyKey       string
	WhenUnsatisfiable string
	LabelSelector     *LabelSelector
	MinDomains        int32
}

// HostPort is a port a pod binds on its node. An empty HostIP or 0.0.0.0 means every address;
// an empty Protocol means TCP.
type HostPort struct {
	Port     int32
	Protocol string
	HostIP   string
}

// Node is an existing node, or an in-flight NodeClaim that has not registered yet, with the
// pods bound or nominated to it. For an in-flight claim, Labels holds the labels its
// requirements pin to one value (nodepool, zone, capacity type, instance type once known) and
// Allocatable the smallest allocatable among its possible types.
type Node struct {
	Name     string
	NodePool string
	Labels   map[string]string
	Taints   []Taint
	// Allocatable is what pods may use; Capacity counts against the pool's limits (when nil,
	// Allocatable does).
	Allocatable ResourceList
	Capacity    ResourceList
	Pods        []Pod
	// InFlight: a NodeClaim whose node has not registered; its pool's DaemonSet overhead is
	// charged to it on top of Pods.
	InFlight bool
	// MarkedForDeletion nodes count toward limits and topology but take no new pods.
	MarkedForDeletion bool
}

// DaemonSet contributes its pod template's requests to every node its pods would land on.
type DaemonSet struct {
	Namespace string
	Name      string
	Pod       Pod
}
