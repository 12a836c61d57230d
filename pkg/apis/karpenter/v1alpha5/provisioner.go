package v1alpha5

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Provisioner is the v1alpha5 form of a NodePool: requirements, labels, taints, limits,
// weight, emptiness and expiry TTLs, consolidation, kubelet settings and the AWS node
// template (by reference, or inline as provider).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=provisioners,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Template",type="string",JSONPath=".spec.providerRef.name"
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Provisioner struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProvisionerSpec   `json:"spec,omitempty"`
	Status ProvisionerStatus `json:"status,omitempty"`
}

// ProvisionerList is a list of Provisioners.
//
// +kubebuilder:object:root=true
type ProvisionerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Provisioner `json:"items"`
}

// ProvisionerSpec is what a Provisioner allows.
// +kubebuilder:validation:XValidation:message="ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive",rule="!(has(self.ttlSecondsAfterEmpty) && has(self.consolidation) && has(self.consolidation.enabled) && self.consolidation.enabled)"
// +kubebuilder:validation:XValidation:message="provider and providerRef are mutually exclusive",rule="!(has(self.provider) && has(self.providerRef))"
type ProvisionerSpec struct {
	// Annotations for the nodes.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels for the nodes.
	// +kubebuilder:validation:XValidation:message="label keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.all(x, x.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && x.find('^[^/]*/').size() <= 254)"
	// +kubebuilder:validation:XValidation:message="label values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="self.all(x, self[x].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$'))"
	// +kubebuilder:validation:MaxProperties=100
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Taints the nodes carry.
	// +kubebuilder:validation:items:XValidation:message="taint keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.key.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.key.find('^[^/]*/').size() <= 254"
	// +kubebuilder:validation:items:XValidation:message="taint values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="!has(self.value) || self.value.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$')"
	// +kubebuilder:validation:items:XValidation:message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are expected on new nodes and ignored when deciding whether pods fit.
	// +kubebuilder:validation:items:XValidation:message="taint keys must be qualified names: an optional prefix (a lowercase DNS subdomain of at most 253 characters) and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit",rule="self.key.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self.key.find('^[^/]*/').size() <= 254"
	// +kubebuilder:validation:items:XValidation:message="taint values must be empty or 1 to 63 letters, digits, '-', '_' or '.' that start and end with a letter or digit",rule="!has(self.value) || self.value.matches('^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$')"
	// +kubebuilder:validation:items:XValidation:message="taint effect must be NoSchedule, PreferNoSchedule or NoExecute",rule="self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the nodes' labels must meet.
	// +kubebuilder:validation:XValidation:message="requirements operator 'In' must have a value defined",rule="self.all(x, x.operator != 'In' || (has(x.values) && x.values.size() != 0))"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt' or 'Lt' must have a single non-negative integer value",rule="self.all(x, !(x.operator in ['Gt', 'Lt']) || (has(x.values) && x.values.size() == 1 && x.values[0].matches('^[0-9]+$')))"
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Requirements []NodeSelectorRequirement `json:"requirements,omitempty"`
	// KubeletConfiguration for the nodes.
	// +optional
	KubeletConfiguration *KubeletConfiguration `json:"kubeletConfiguration,omitempty"`
	// Provider is the AWS node template written inline (the v1alpha1 AWSNodeTemplate spec's
	// fields), the oldest form; ProviderRef is the newer.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	Provider *runtime.RawExtension `json:"provider,omitempty"`
	// ProviderRef names the AWSNodeTemplate the nodes are launched with.
	// +optional
	ProviderRef *MachineTemplateRef `json:"providerRef,omitempty"`
	// TTLSecondsAfterEmpty removes a node this long after it became empty.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterEmpty *int64 `json:"ttlSecondsAfterEmpty,omitempty"`
	// TTLSecondsUntilExpired replaces a node this long after it was launched.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsUntilExpired *int64 `json:"ttlSecondsUntilExpired,omitempty"`
	// Limits caps the total resources of the Provisioner's nodes.
	// +optional
	Limits *Limits `json:"limits,omitempty"`
	// Weight orders Provisioners; the highest that can take a pod is tried first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Consolidation removes or replaces underused nodes.
	// +optional
	Consolidation *Consolidation `json:"consolidation,omitempty"`
}

// NodeSelectorRequirement is a requirement on one node label.
type NodeSelectorRequirement struct {
	// +kubebuilder:validation:MaxLength=316
	// +required
	Key string `json:"key"`
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// MachineTemplateRef names an AWSNodeTemplate.
type MachineTemplateRef struct {
	// Kind of the template; AWSNodeTemplate when empty.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Name of the template.
	// +required
	Name string `json:"name"`
	// APIVersion of the template; karpenter.k8s.aws/v1alpha1 when empty.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
}

// Limits caps a Provisioner's resources.
type Limits struct {
	// Resources is the cap, e.g. cpu: 1000.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
}

// Consolidation turns consolidation on.
type Consolidation struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// KubeletConfiguration is the v1alpha5 kubelet settings subset.
// +kubebuilder:validation:XValidation:message="Fleetwright nodes run containerd: containerRuntime must be containerd or unset",rule="!has(self.containerRuntime) || self.containerRuntime == 'containerd'"
type KubeletConfiguration struct {
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// ContainerRuntime is docker or containerd (AL2 only); ignored by v1.
	// +kubebuilder:validation:Enum:={containerd,dockerd}
	// +optional
	ContainerRuntime *string `json:"containerRuntime,omitempty"`
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// +kubebuilder:validation:Minimum:=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x in ['cpu', 'memory', 'ephemeral-storage', 'pid'])"
	// +optional
	SystemReserved corev1.ResourceList `json:"systemReserved,omitempty"`
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x in ['cpu', 'memory', 'ephemeral-storage', 'pid'])"
	// +optional
	KubeReserved corev1.ResourceList `json:"kubeReserved,omitempty"`
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// ProvisionerStatus is what the controllers observe of a Provisioner.
type ProvisionerStatus struct {
	// LastScaleTime is when the Provisioner last launched or removed a node.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// Resources is the total capacity of its nodes.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
