package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one node that was decided on: the requirements its instance must meet, the
// resources it was sized for, and, once launched, the instance and Node that became of it. The
// scheduler writes it; the launcher fills in its status; the terminator deletes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type"
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaimSpec is what the node must be. It does not change once written.
// +kubebuilder:validation:XValidation:message="spec is immutable",rule="self == oldSelf"
type NodeClaimSpec struct {
	// Taints the node carries.
	// +kubebuilder:validation:items:XValidation:message="taint keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.key.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.key.find('^[^/]*/').size() <= 254"
	// +kubebuilder:validation:items:XValidation:message="taint values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="!has(self.value) || self.value.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$')"
	// +kubebuilder:validation:items:XValidation:message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are expected on the new node and ignored when deciding whether pods fit.
	// +kubebuilder:validation:items:XValidation:message="taint keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.key.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.key.find('^[^/]*/').size() <= 254"
	// +kubebuilder:validation:items:XValidation:message="taint values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="!has(self.value) || self.value.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$')"
	// +kubebuilder:validation:items:XValidation:message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the node's labels (and so its instance type, zone and capacity type) meet.
	// +kubebuilder:validation:XValidation:message="requirements operator 'In' must have a value defined",rule="self.all(x, x.operator != 'In' || (has(x.values) && x.values.size() != 0))"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",rule="self.all(x, !(x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(x.values) && x.values.size() == 1 && x.values[0].matches('^[0-9]+$')))"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Exists' or 'DoesNotExist' must have no values",rule="self.all(x, !(x.operator in ['Exists', 'DoesNotExist']) || !has(x.values) || x.values.size() == 0)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, !(x.operator == 'In' && has(x.minValues)) || (has(x.values) && x.values.size() >= x.minValues))"
	// +kubebuilder:validation:MaxItems=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources the node was sized for: the requests of the pods it is for, plus DaemonSet
	// overhead.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// NodeClassRef names the EC2NodeClass the instance is launched with.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// ExpireAfter is how long the node lives before it is replaced; Never keeps it.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:default:="720h"
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitempty"`
	// TerminationGracePeriod is the longest the node may take draining once it is deleted.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
}

// ResourceRequirements is the resources a NodeClaim was sized for.
type ResourceRequirements struct {
	// Requests is the minimum the instance must have.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is what became of the NodeClaim.
type NodeClaimStatus struct {
	// NodeName is the Node that registered for this NodeClaim.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the instance, as aws:///<zone>/<instance-id>.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is the AMI the instance was launched from.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the instance's resources.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is what pods may use of Capacity.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions: Launched, Registered, Initialized, Ready, Drifted, Consolidatable, ...
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is when a pod was last scheduled to or removed from the node; the
	// consolidateAfter clock runs from it.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
}

// NodeClaim condition types, in the order a NodeClaim usually gains them.
const (
	ConditionTypeLaunched             = "Launched"
	ConditionTypeRegistered           = "Registered"
	ConditionTypeInitialized          = "Initialized"
	ConditionTypeConsolidatable       = "Consolidatable"
	ConditionTypeDrifted              = "Drifted"
	ConditionTypeDisruptionReason     = "DisruptionReason"
	ConditionTypeInstanceTerminating  = "InstanceTerminating"
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
)

// The conditions that follow a deleting NodeClaim's termination, as Karpenter v1 sets them:
// Drained and VolumesDetached are False with a reason while the node drains or its volumes
// detach and True once done; InstanceTerminating (above) is True once the instance is being
// terminated.
const (
	ConditionTypeDrained         = "Drained"
	ConditionTypeVolumesDetached = "VolumesDetached"
)

// Condition returns the NodeClaim's condition of the type, or nil.
func (in *NodeClaim) Condition(conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(in.Status.Conditions, conditionType)
}

// IsTrue reports whether the NodeClaim's condition of the type is True.
func (in *NodeClaim) IsTrue(conditionType string) bool {
	return meta.IsStatusConditionTrue(in.Status.Conditions, conditionType)
}

// SetCondition sets a condition on the NodeClaim, stamping the generation it saw and keeping
// its transition time if the status did not change.
func (in *NodeClaim) SetCondition(c metav1.Condition) bool {
	c.ObservedGeneration = in.Generation
	return meta.SetStatusCondition(&in.Status.Conditions, c)
}
