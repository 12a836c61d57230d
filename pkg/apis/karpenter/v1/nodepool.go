package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool says what nodes may be launched for pods that fit nowhere: the template each
// NodeClaim is made from, how and when its nodes may be disrupted, how much it may launch in
// total, and its weight against other NodePools.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.resources.nodes"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is what a NodePool allows.
type NodePoolSpec struct {
	// Template is what every NodeClaim of the pool starts from.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when the pool's nodes may be taken away.
	// +kubebuilder:default={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption"`
	// Limits caps the total resources (capacity) of the pool's nodes; nothing is launched that
	// would go over them.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders NodePools: the highest weight that can take a pod is tried first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// Limits caps a NodePool's resources, e.g. cpu: 1000, memory: 1000Gi.
type Limits corev1.ResourceList

// ConsolidationPolicy says which nodes consolidation may remove.
type ConsolidationPolicy string

// Consolidation policies.
const (
	// ConsolidationPolicyWhenEmpty removes nodes only when no (non-daemon) pod runs on them.
	ConsolidationPolicyWhenEmpty ConsolidationPolicy = "WhenEmpty"
	// ConsolidationPolicyWhenEmptyOrUnderutilized also removes or replaces nodes whose pods fit
	// elsewhere or on a cheaper node.
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
)

// DisruptionReason is why a node is disrupted, as budgets name them.
// +kubebuilder:validation:Enum=Underutilized;Empty;Drifted
type DisruptionReason string

// Disruption reasons that budgets can be scoped to.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Disruption says when a NodePool's nodes may be consolidated, and how many at once.
type Disruption struct {
	// ConsolidateAfter is how long a node must have been a consolidation candidate (no pod
	// scheduled to or removed from it) before it is consolidated; Never disables consolidation.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:default="0s"
	// +optional
	ConsolidateAfter NillableDuration `json:"consolidateAfter"`
	// ConsolidationPolicy is which nodes may be consolidated.
	// +kubebuilder:validation:Enum=WhenEmpty;WhenEmptyOrUnderutilized
	// +kubebuilder:default=WhenEmptyOrUnderutilized
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets cap how many of the pool's nodes may be disrupted at once; the most restrictive
	// active budget wins.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget caps the number of nodes disrupted at once, optionally only for some reasons or
// during a recurring window.
type Budget struct {
	// Reasons the budget applies to; all reasons when empty.
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is a count ("5") or a percentage of the pool's nodes ("10%").
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes"`
	// Schedule is a cron schedule (UTC) for when the budget starts to apply; with Duration.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the budget applies after each Schedule time.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the metadata and spec every NodeClaim of a NodePool starts from.
type NodeClaimTemplate struct {
	// +optional
	ObjectMeta TemplateMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// TemplateMeta is the labels and annotations put on each NodeClaim and its Node.
type TemplateMeta struct {
	// Labels for the NodeClaim and its Node.
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self.all(x, x != 'kubernetes.io/hostname')"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self.all(x, x in ['karpenter.sh/capacity-type', 'karpenter.sh/provisioner-name'] || !x.find('^([^/]+)').endsWith('karpenter.sh'))"
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:message="label keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.all(x, x.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && x.find('^[^/]*/').size() <= 254)"
	// +kubebuilder:validation:XValidation:message="label values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="self.all(x, self[x].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$'))"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations for the NodeClaim and its Node.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is a NodeClaim's spec as a NodePool writes it: without resources,
// which come from the pods each NodeClaim is for.
type NodeClaimTemplateSpec struct {
	// Taints the nodes carry; pods must tolerate them.
	// +kubebuilder:validation:items:XValidation:message="taint keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.key.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.key.find('^[^/]*/').size() <= 254"
	// +kubebuilder:validation:items:XValidation:message="taint values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="!has(self.value) || self.value.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$')"
	// +kubebuilder:validation:items:XValidation:message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are expected on new nodes (put there by e.g. a CNI agent and removed when it
	// is ready); they are ignored when deciding whether pods fit.
	// +kubebuilder:validation:items:XValidation:message="taint keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.key.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.key.find('^[^/]*/').size() <= 254"
	// +kubebuilder:validation:items:XValidation:message="taint values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="!has(self.value) || self.value.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$')"
	// +kubebuilder:validation:items:XValidation:message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the nodes' labels must meet: instance types, zones, capacity type, ...
	// +kubebuilder:validation:XValidation:message="requirements operator 'In' must have a value defined",rule="self.all(x, x.operator != 'In' || (has(x.values) && x.values.size() != 0))"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",rule="self.all(x, !(x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(x.values) && x.values.size() == 1 && x.values[0].matches('^[0-9]+$')))"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Exists' or 'DoesNotExist' must have no values",rule="self.all(x, !(x.operator in ['Exists', 'DoesNotExist']) || !has(x.values) || x.values.size() == 0)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, !(x.operator == 'In' && has(x.minValues)) || (has(x.values) && x.values.size() >= x.minValues))"
	// +kubebuilder:validation:MaxItems=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// NodeClassRef names the EC2NodeClass the nodes are launched with.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// ExpireAfter is how long a node lives before it is replaced; Never keeps it.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:default:="720h"
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
	// TerminationGracePeriod is the longest a node may take draining once it is being deleted;
	// after it, pods are deleted regardless of PodDisruptionBudgets and do-not-disrupt.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// NodePoolStatus is what the controllers observe of a NodePool.
type NodePoolStatus struct {
	// Resources is the total capacity of the pool's nodes, and their count as "nodes".
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Conditions: NodeClassReady, ValidationSucceeded, Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePool condition types.
const (
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	ConditionTypeNodeClassReady      = "NodeClassReady"
)

// ResourceNodes is the key in NodePoolStatus.Resources that counts the pool's nodes.
const ResourceNodes corev1.ResourceName = "nodes"

// ConditionTypeReady is the root condition of NodePool, NodeClaim and EC2NodeClass alike.
const ConditionTypeReady = "Ready"
